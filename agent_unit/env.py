"""The host environment, read the same way on every host.

Process variables everywhere; on Cloudflare Workers the entry shim calls :func:`bind` with
the Worker's ``env`` so bindings and secrets are found by the same names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["bind", "get"]

_bound: Mapping[str, Any] | None = None


def bind(values: Mapping[str, Any] | None) -> None:
    """Read names from ``values`` before the process environment (``None`` unbinds)."""
    global _bound
    _bound = values


def get(name: str, default: str | None = None) -> Any:
    if _bound is not None and name in _bound:
        return _bound[name]
    return os.environ.get(name, default)
