"""Journal values and step errors as JSON text, and back exactly as a replay reads them.

A journaled value is stored as JSON and read back through its type, so a replay sees the same
value the first execution returned; a step's error is stored as its type and arguments, so a
replay raises the same exception. Both live here, apart from the primitives in
:mod:`agent_unit.run`, because adapters and the engine's callers rely on one encoding.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from . import _jsontext as jsontext
from .errors import VALUE_ERRORS, StepFailed, StepResultError

__all__ = ["UNTYPED", "answer_schema", "decode", "encode", "encode_error", "error_event", "rebuild_error"]

UNTYPED: Any = object()
"""The type of a journaled value that has none: it is stored as JSON and replayed as plain JSON
data (dicts, lists, strings, numbers). Pass a type instead to have the value rebuilt as it."""

_adapters: dict[Any, TypeAdapter[Any]] = {}
_SAME_AFTER_JSON = frozenset({int, str, bool, type(None)})
"""Types whose values read back from their JSON text as equal values of the same type, typed as
themselves or untyped (a float is not among them: typed, pydantic writes NaN as ``null``)."""
_schemas: dict[Any, dict[str, Any]] = {}


def _int_text(value: int) -> str | None:
    """An int's JSON text where it is short (``repr``, as every JSON writer has it); else None: the
    general path, which refuses one of more than 4,300 digits as JSON readers do."""
    return repr(value) if -_SHORT_INT < value < _SHORT_INT else None


_SHORT_INT = 10**18
# The JSON text of values that read back as themselves, written without an encoder (a step's
# result is journaled once per step, and these are most of the results of small steps).
_SCALAR_TEXT: dict[type, Callable[[Any], str | None]] = {
    int: _int_text,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return _adapters[annotation]
    except KeyError:
        adapter = _adapters[annotation] = TypeAdapter(annotation)
        return adapter
    except TypeError:  # unhashable annotation
        return TypeAdapter(annotation)


def encode_error(exc: BaseException, step: str) -> dict[str, Any]:
    """The journal's record of a step's error, storable whatever the error holds (its message is
    scrubbed of lone surrogates; arguments that are not storable JSON are left out)."""
    cls = type(exc)
    message = jsontext.message_of(exc)
    error: dict[str, Any] = {"type": f"{cls.__module__}.{cls.__qualname__}", "message": message, "step": step}
    with contextlib.suppress(*VALUE_ERRORS):  # arguments that are not JSON: rebuilt from the message
        error["args"] = json.loads(jsontext.encode(list(exc.args))[0])
    return error


def error_event(error: dict[str, Any]) -> dict[str, Any]:
    """An error as events show it: the exception's type (without its module) and message."""
    return {"type": error["type"].rpartition(".")[2], "message": error["message"]}


def _bare(cls: type[Exception], args: tuple[Any, ...]) -> Exception:
    """An instance of ``cls`` with ``args`` set, without running its ``__init__``."""
    exc = cls.__new__(cls)
    exc.args = args
    return exc


def rebuild_error(error: dict[str, Any]) -> BaseException:
    """The journaled exception: the same type built from the same arguments where possible."""
    module, _, name = error["type"].rpartition(".")
    try:
        cls: Any = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
    except (ImportError, AttributeError):
        cls = None
    if isinstance(cls, type) and issubclass(cls, Exception):
        args = tuple(error.get("args", [error["message"]]))
        builds: tuple[Callable[[], Exception], ...] = (lambda: cls(*args), lambda: _bare(cls, args))
        for build in builds:
            try:
                exc = build()
            except Exception:  # noqa: BLE001 - a constructor that wants other arguments: try the next way
                continue
            if jsontext.message_of(exc) == error["message"]:
                return exc
    return StepFailed(f"step {error.get('step')!r} failed: {error['type']}: {error['message']}")


def encode(value: Any, annotation: Any, what: str, limit: int) -> tuple[str, Any]:
    """``value`` as journal text, and the value a replay reads back from that text.

    Refused with a clear ``StepResultError`` when it cannot be journaled (not JSON, not UTF-8,
    too deep, too large) or does not read back (a float NaN written as ``null``): the text
    is read here exactly as a replay will read it, so what is journaled always replays.
    """
    kind = type(value)
    if kind is int and -_SHORT_INT < value < _SHORT_INT and (annotation is UNTYPED or annotation is int):
        short = repr(value)  # _int_text inlined: a no-op step's 1, the commonest result
        if len(short) <= limit:
            return short, value
    elif kind in _SCALAR_TEXT and (annotation is UNTYPED or annotation is kind):
        scalar = _SCALAR_TEXT[kind](value)
        if scalar is not None and len(scalar) <= limit:
            return scalar, value  # a no-op step's 1, a flag: its JSON is its repr, and it reads back as itself
    try:
        text, size = jsontext.encode(value, None if annotation is UNTYPED else _adapter(annotation))
    except ValueError as exc:
        raise StepResultError(
            f"{what} cannot be stored as JSON ({type(value).__name__}): {exc}. "
            "Return JSON data, a pydantic model or a dataclass."
        ) from None
    if size > limit:
        raise StepResultError(
            f"{what} is {size:,} bytes of JSON, over max_step_bytes ({limit:,}). "
            "Keep large data out of the journal: store it elsewhere (a file, a bucket, a table) "
            "and return its key from the step."
        )
    if type(value) in _SAME_AFTER_JSON and (annotation is UNTYPED or annotation is type(value)) and size < 1000:
        return text, value  # reads back as itself (a no-op step's 1, a name, a flag): no decode needed
    try:
        return text, decode(text, annotation)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "value"
        reason = f"{where}: {first['msg']}"
    except VALUE_ERRORS as exc:
        reason = str(exc)
    raise StepResultError(
        f"{what} does not read back from its JSON as {jsontext.scrub(repr(annotation))} ({reason}): "
        "return a value its return annotation accepts from JSON"
    )


def answer_schema(annotation: Any) -> dict[str, Any]:
    """The answer type's JSON Schema, built once per type (it is a copy: callers may keep it)."""
    try:
        schema = _schemas[annotation]
    except KeyError:
        schema = _schemas[annotation] = _adapter(annotation).json_schema()
    except TypeError:  # unhashable annotation
        schema = _adapter(annotation).json_schema()
    return copy.deepcopy(schema)


def decode(text: str, annotation: Any) -> Any:
    """A journaled value read back: plain JSON data if ``annotation`` is :data:`UNTYPED`, else validated as it."""
    return json.loads(text) if annotation is UNTYPED else _adapter(annotation).validate_json(text)
