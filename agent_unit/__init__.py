"""agent-unit: durable runs for any Python agent framework, on any host."""

from __future__ import annotations

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
)
from .records import RunRecord, RunStatus
from .run import Cancelled, Interrupted, Park, Run, Sleeping, StepContext, Yielded, use_run

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentNotFound",
    "AgentUnitError",
    "Cancelled",
    "Interrupted",
    "InvalidAnswer",
    "InvalidInput",
    "NotInterrupted",
    "Park",
    "Run",
    "RunConflict",
    "RunEngine",
    "RunNotFound",
    "RunRecord",
    "RunStatus",
    "Sleeping",
    "StepContext",
    "StepResultError",
    "Yielded",
    "__version__",
    "define_agent",
    "use_run",
]
