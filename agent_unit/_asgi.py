"""What an ASGI 3 app is, for the checks of a server the build or a test is given."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["is_asgi"]


def is_asgi(value: Any) -> bool:
    """An ASGI 3 app: ``async def app(scope, receive, send)``, or an object whose ``__call__`` is one."""
    if inspect.isclass(value):
        return False  # ASGI 2 (a class made per scope) or a class the user forgot to instantiate
    call = value if inspect.isfunction(value) or inspect.ismethod(value) else getattr(value, "__call__", None)  # noqa: B004
    if call is None or not inspect.iscoroutinefunction(call):
        return False
    try:
        inspect.signature(call).bind(None, None, None)
    except TypeError:
        return False
    return True
