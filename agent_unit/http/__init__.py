"""The HTTP API (Starlette): routes, the SSE event stream, authorization."""

from ..errors import Forbidden, Unauthorized
from .app import AgentUnit, agent_units, create_agent_unit, host_defaults
from .inbox import create_inbox

__all__ = [
    "AgentUnit",
    "Forbidden",
    "agent_units",
    "Unauthorized",
    "create_agent_unit",
    "create_inbox",
    "host_defaults",
]
