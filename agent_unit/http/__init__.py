"""The HTTP API (Starlette): routes, the SSE event stream, authorization."""

from .app import AgentUnit, create_agent_unit
from .auth import Forbidden, Unauthorized

__all__ = ["AgentUnit", "Forbidden", "Unauthorized", "create_agent_unit"]
