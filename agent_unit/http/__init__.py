"""The HTTP API (Starlette): routes, the SSE event stream, authorization, and the gateway every protocol uses."""

from ..errors import Forbidden, Unauthorized
from .app import AgentUnit, agent_units, create_agent_unit
from .gateway import Gateway
from .inbox import create_inbox

__all__ = [
    "AgentUnit",
    "Forbidden",
    "Gateway",
    "agent_units",
    "Unauthorized",
    "create_agent_unit",
    "create_inbox",
]
