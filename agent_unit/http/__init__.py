"""The HTTP API (Starlette): routes, the SSE event stream, authorization, the gateway every protocol uses,
and ``HostGuard``, its Host and Origin checks in front of any ASGI app.

Each name is imported at its first use: a built entry that puts ``HostGuard`` in front of an
app that is not agent-unit's (``server = "module:app"``) loads the checks, not the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers and editors
    from ..errors import Forbidden, Unauthorized
    from .app import AgentUnit, agent_units, create_agent_unit
    from .gateway import Gateway
    from .guard import HostGuard
    from .inbox import create_inbox

_LAZY = {
    "AgentUnit": ".app",
    "agent_units": ".app",
    "create_agent_unit": ".app",
    "Forbidden": "..errors",
    "Gateway": ".gateway",
    "HostGuard": ".guard",
    "Unauthorized": "..errors",
    "create_inbox": ".inbox",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_unit.http' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


__all__ = [
    "AgentUnit",
    "Forbidden",
    "Gateway",
    "HostGuard",
    "agent_units",
    "Unauthorized",
    "create_agent_unit",
    "create_inbox",
]
