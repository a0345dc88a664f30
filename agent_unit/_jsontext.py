"""JSON text that every store keeps and every reader reads back: what journals, run records and events hold.

Python writes JSON that not every store or reader takes back: a lone surrogate (``"\\ud800"``)
is not UTF-8, so SQLite, PostgreSQL, Redis and DynamoDB refuse the write; ``NaN`` and
``Infinity`` are not JSON; pydantic reads JSON only 200 levels deep (serde_json 128) and Python
only ints of up to 4,300 digits. A value that breaks one of these rules is the error of whoever
made it (a step's result, an input, an answer), found here before anything is written, never an
outage of the store: a store write that fails is then the store's fault alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

__all__ = ["MAX_DEPTH", "encode", "message_of", "scrub", "shown", "storable_name"]

MAX_DEPTH = 100
"""How deeply arrays and objects may nest: half of pydantic's reading limit, so a value still reads
back inside the events and records that wrap it."""

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=to_jsonable_python)
_STRINGS = re.compile(r'"(?:[^"\\]++|\\.)*+"')
_BRACKETS = re.compile(r"[\[\]{}]")
_REASONS = {  # what json and pydantic say, in the words of the rule that was broken
    "Out of range float values": "NaN and Infinity are not JSON numbers",
    "surrogates not allowed": "it holds a lone surrogate, which UTF-8 cannot encode",
    "serialization depth": f"it nests more than {MAX_DEPTH} levels deep",
    "Exceeds the limit": "it holds an int of more than 4,300 digits, which JSON readers refuse",
}


def encode(value: Any, adapter: TypeAdapter[Any] | None = None) -> tuple[str, int]:
    """``value`` as JSON text (through ``adapter`` when given) and its size in UTF-8 bytes.

    Raises ``ValueError`` saying what a store or reader could not take. ``adapter`` writes NaN
    and Infinity as ``null`` (pydantic's way): the caller reads the text back to see if it still fits.
    """
    try:
        text = _encoder.encode(value) if adapter is None else adapter.dump_json(value).decode()
    except RecursionError:
        raise ValueError(f"it nests more than {MAX_DEPTH} levels deep") from None
    except (TypeError, ValueError) as exc:
        message = str(exc)
        for found, reason in _REASONS.items():
            if found in message:
                message = reason
        raise ValueError(scrub(message)) from None
    return text, check(text)


def check(text: str) -> int:
    """The size of JSON ``text`` in UTF-8 bytes; ``ValueError`` if a store or reader cannot take it."""
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode())
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"it holds {text[exc.start]!r}, a lone surrogate, which UTF-8 cannot encode: "
                "join surrogate pairs or drop the character"
            ) from None
    if _deeper_than(text, MAX_DEPTH):
        raise ValueError(f"it nests more than {MAX_DEPTH} levels deep")
    return size


def _deeper_than(text: str, limit: int) -> bool:
    if text.count("[") + text.count("{") <= limit:  # the common case: too few brackets to nest that deep
        return False
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (as a UTF-8 decoder does), pairs joined."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def message_of(exc: BaseException) -> str:
    """``str(exc)``, scrubbed, storable whatever the exception does: one whose ``__str__`` raises
    reads as a note naming its type, so a failure can always be journaled and reported."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a user's __str__ may raise anything
        return f"<{type(exc).__name__}: its message could not be printed>"
    return scrub(text) if isinstance(text, str) else f"<{type(exc).__name__}: its message is not text>"


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` as an error message quotes what a request sent: scrubbed, and cut past
    ``limit`` characters, so a 10 KB id is not echoed back whole."""
    text = scrub(repr(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def storable_name(text: str) -> bool:
    """Whether ``text`` can be a key or a name in every store: UTF-8, and no NUL (PostgreSQL's text refuses it)."""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
