"""Framework adapters: ``define_adapter`` and how adapters are found."""

from ..errors import AdapterError
from .api import API_VERSION, AdaptedAgent, Adapter, AdapterContext, define_adapter
from .registry import ENTRY_POINT_GROUP, adapters, load_adapter, resolve_agent

__all__ = [
    "API_VERSION",
    "ENTRY_POINT_GROUP",
    "AdaptedAgent",
    "Adapter",
    "AdapterContext",
    "AdapterError",
    "adapters",
    "define_adapter",
    "load_adapter",
    "resolve_agent",
]
