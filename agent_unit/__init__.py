"""agent-unit: durable runs for any Python agent framework, on any host.

These names are the documented API (the README's "What `agent_unit` exports"). The public
modules beside them (``client``, ``discovery``, ``env``, ``errors``, ``run``, ``runtime``,
``telemetry`` and the subpackages) are for users, adapters and hosts; a module whose name starts
with ``_`` is the engine's own part, as in httpx and pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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

__version__ = "0.1.0"

if TYPE_CHECKING:  # what __getattr__ returns, for type checkers and editors
    from ._agent import Agent, define_agent
    from ._engine import RunEngine
    from ._host import Host, use_host
    from ._parks import Park
    from ._records import RunRecord, RunStatus
    from ._retry import RetryPolicy
    from .http import create_agent_unit
    from .run import Run, StepContext, use_run

# Each name is imported at its first use: the engine and the records import pydantic, the HTTP
# layer Starlette, so a host shim (a Lambda handler) that imports ``agent_unit.hosts.aws_lambda``
# at a cold start pays for none of them until its first invocation builds the app.
_LAZY = {
    "Agent": "_agent",
    "define_agent": "_agent",
    "RunEngine": "_engine",
    "Host": "_host",
    "use_host": "_host",
    "create_agent_unit": "http",
    "Park": "_parks",
    "RunRecord": "_records",
    "RunStatus": "_records",
    "RetryPolicy": "_retry",
    "Run": "run",
    "StepContext": "run",
    "use_run": "run",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_unit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


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
