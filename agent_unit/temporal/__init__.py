"""Temporal as the engine of agent-unit's runs (``[temporal]``; the ``temporal`` extra).

Each run is one Temporal workflow (workflow id = run id) that drives it; the agents execute in
activities that replay the run's journal from agent-unit's store, so every framework runs as it
is. See :mod:`agent_unit.temporal.engine` (the app's side), :mod:`agent_unit.temporal.worker`
(the workers') and :mod:`agent_unit.temporal.workflow` (the workflow).

Importing this package imports no ``temporalio``; its modules do, when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .settings import TemporalSettings, temporal_settings

if TYPE_CHECKING:
    from .engine import TemporalEngine
    from .worker import run_worker, serve_worker, worker_engine

__all__ = ["TemporalEngine", "TemporalSettings", "run_worker", "serve_worker", "temporal_settings", "worker_engine"]


def __getattr__(name: str) -> Any:
    if name == "TemporalEngine":
        from .engine import TemporalEngine

        return TemporalEngine
    if name in ("run_worker", "serve_worker", "worker_engine"):
        from . import worker

        return getattr(worker, name)
    raise AttributeError(f"module 'agent_unit.temporal' has no attribute {name!r}")
