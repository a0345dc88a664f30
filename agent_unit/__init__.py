"""agent-unit: durable runs for any Python agent framework, on any host.

These names are the documented API (the README's "What `agent_unit` exports"); every other
module is for adapters, hosts and the engine's own parts, and says so where it is public.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .agent import Agent, define_agent
from .engine import RunEngine
from .errors import (
    AgentNotFound,
    AgentUnitError,
    InvalidAnswer,
    InvalidInput,
    NotInterrupted,
    RunConflict,
    RunNotFound,
    StepResultError,
    UnstorableValue,
)
from .host import Host, use_host
from .parks import Park
from .records import RunRecord, RunStatus
from .retry import RetryPolicy
from .run import Run, StepContext, use_run

__version__ = "0.1.0"

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers and editors
    from .http import create_agent_unit


def __getattr__(name: str) -> object:
    # The HTTP layer imports Starlette: only code that serves HTTP pays for it.
    if name == "create_agent_unit":
        from .http import create_agent_unit

        return create_agent_unit
    raise AttributeError(f"module 'agent_unit' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentNotFound",
    "AgentUnitError",
    "Host",
    "InvalidAnswer",
    "InvalidInput",
    "NotInterrupted",
    "Park",
    "RetryPolicy",
    "Run",
    "RunConflict",
    "RunEngine",
    "RunNotFound",
    "RunRecord",
    "RunStatus",
    "StepContext",
    "StepResultError",
    "UnstorableValue",
    "__version__",
    "create_agent_unit",
    "define_agent",
    "use_host",
    "use_run",
]
