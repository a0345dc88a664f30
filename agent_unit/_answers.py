"""Interrupt answers: how an answer's type is recorded on the interrupt, and checked on resume.

The interrupt stores the answer's JSON Schema (for forms) and, where the answer is a
module-level class, its ``module:QualName``. A resume validates the answer with that class,
validators included, when the resuming process has it loaded; otherwise with the schema.
Either way a wrong answer is refused with 422 while the run stays parked.

What is checked is the answer's JSON text, read back the way the replay will read it: an
answer the resume accepts can never fail the run later.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from . import _jsontext as jsontext
from ._records import RunRecord
from .errors import InvalidAnswer

__all__ = ["check_answer", "resolve_type_ref", "type_ref"]


def type_ref(annotation: Any) -> str | None:
    """``module:QualName`` of a class, or of a named alias (``TypeAliasType``, as ``bool | Approval``
    names none), that another process can import, so a resume validates fully."""
    if isinstance(annotation, type):
        name = annotation.__qualname__
    elif _is_alias(annotation):
        name = annotation.__name__
    else:
        return None
    if annotation.__module__ == "builtins" or "<locals>" in name:
        return None
    return f"{annotation.__module__}:{name}"


def _is_alias(annotation: Any) -> bool:
    """A ``TypeAliasType`` (``typing``'s or ``typing_extensions``'): a named type that is not a class."""
    return hasattr(annotation, "__value__") and isinstance(getattr(annotation, "__name__", None), str)


def resolve_type_ref(ref: str, schema: dict[str, Any] | None) -> Any:
    """The class named by :func:`type_ref`, if this process has loaded it and it still has ``schema``.

    The class is looked up among modules already loaded (the agents' own), so a reference in
    the store can never make a process run new code; only agent-unit's own modules are
    imported, being part of the runtime: an adapter's answer class (a tool approval's) is not
    loaded in a fresh process until its run executes, and without it the check would need
    jsonschema, which a Worker cannot load (its rpds-py has no Pyodide wheel on PyPI). A class
    whose schema changed since the interrupt (a deploy in between) is not trusted.
    """
    module, _, qualname = ref.partition(":")
    found: Any = sys.modules.get(module)
    if found is None and module.startswith(f"{__package__}."):
        try:
            found = importlib.import_module(module)
        except ImportError:  # an adapter whose framework is not installed here
            return None
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
        if not (isinstance(found, type) or _is_alias(found)) or _schema_of(found) != schema:
            return None
    except Exception:  # noqa: BLE001 - anything odd: fall back to the stored schema
        return None
    return found


@functools.lru_cache(maxsize=256)
def _adapter_of(cls: Any) -> TypeAdapter[Any]:
    """One ``TypeAdapter`` per answer class (a resume validates each answer with it)."""
    return TypeAdapter(cls)


@functools.lru_cache(maxsize=256)
def _schema_of(cls: Any) -> dict[str, Any]:
    """``cls``'s JSON Schema, built once per class: pydantic builds it anew for each call (measured:
    0.75 ms, a third of a resume's time, for a two-field model). Only compared, never handed out."""
    schema: dict[str, Any] = _adapter_of(cls).json_schema()
    return schema


@functools.lru_cache(maxsize=256)
def _validator(schema: str) -> Any:
    import jsonschema  # lazily: only a resume pays for it

    return jsonschema.Draft202012Validator(json.loads(schema))


# JSON Schema's types, as Draft 2020-12 defines them, for values parsed from JSON (bool is not a number).
_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "boolean": lambda value: isinstance(value, bool),
    "string": lambda value: isinstance(value, str),
    "null": lambda value: value is None,
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "integer": lambda value: (
        (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    ),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
}


# Values that JSON gives back exactly as they were (the exact types: a subclass of int, such as an
# IntEnum, is read back as a plain int), so checking the value is checking the text read back.
_JSON_AS_IS = (bool, int, type(None))


def _fits_type_only(schema: dict[str, Any], value: Any) -> bool:
    """True when ``schema`` is only ``{"type": ...}`` (a ``bool``, ``int`` or ``str`` answer's) and
    ``value`` has that type: the one keyword checked without jsonschema, whose walk through its
    keywords was 7% of a resume's instructions over HTTP. False: ask jsonschema (it words the error)."""
    kind = schema.get("type")
    if len(schema) != 1 or not isinstance(kind, str):
        return False
    fits = _JSON_TYPES.get(kind)
    return fits is not None and fits(value)


def check_answer(record: RunRecord, answer: Any, *, limit: int | None = None) -> str:
    """The answer's JSON text, to journal; ``InvalidAnswer`` if it does not fit the interrupt.

    The answer must be storable JSON (``limit`` bytes at most) and fit the interrupt, checked on
    that text as the replay reads it: with the answer's class where this process has it loaded
    (so pydantic validators run too), otherwise with the JSON Schema stored on the interrupt.
    """
    interrupt = record.interrupt
    assert interrupt is not None
    try:
        text, size = jsontext.encode(answer)
    except ValueError as exc:
        raise InvalidAnswer(f"the answer to {interrupt.name!r} cannot be stored as JSON: {exc}") from None
    if limit is not None and size > limit:
        raise InvalidAnswer(
            f"the answer to {interrupt.name!r} is {size:,} bytes of JSON, over max_step_bytes ({limit:,})"
        )
    answer_type = resolve_type_ref(interrupt.answer_type, interrupt.answer_schema) if interrupt.answer_type else None
    if answer_type is not None:
        try:
            _adapter_of(answer_type).validate_json(text)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False)
            details = [{"loc": list(error["loc"]), "msg": error["msg"]} for error in errors]
            where = ".".join(str(part) for part in errors[0]["loc"]) or "answer"
            raise InvalidAnswer(
                f"the answer does not fit interrupt {interrupt.name!r}: {where}: {errors[0]['msg']}", details=details
            ) from None
        return text
    if not interrupt.answer_schema:
        return text
    value = answer if type(answer) in _JSON_AS_IS else json.loads(text)  # a yes/no answer is not parsed back
    if _fits_type_only(interrupt.answer_schema, value):
        return text
    validator = _validator(json.dumps(interrupt.answer_schema, sort_keys=True))
    found = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
    if found:
        details = [{"loc": list(error.absolute_path), "msg": error.message} for error in found]
        where = ".".join(str(part) for part in found[0].absolute_path) or "answer"
        raise InvalidAnswer(
            f"the answer does not fit interrupt {interrupt.name!r}: {where}: {found[0].message}", details=details
        )
    return text
