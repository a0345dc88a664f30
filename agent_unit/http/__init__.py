"""The HTTP API (Starlette): routes, the SSE event stream, authorization, the gateway every protocol uses,
and ``HostGuard``, its Host and Origin checks in front of any ASGI app."""

from ..errors import Forbidden, Unauthorized
from .app import AgentUnit, agent_units, create_agent_unit
from .gateway import Gateway
from .guard import HostGuard
from .inbox import create_inbox

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
