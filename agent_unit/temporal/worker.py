"""A Temporal worker for agent-unit's runs: it executes the agents' runs that Temporal hands it.

    engine = RunEngine(agents, store, background_sweep=False, lease_ttl=settings.heartbeat)
    await run_worker(engine, settings)

HTTP servers and workers scale apart: a server only starts, answers and cancels runs through
Temporal; the workers (any number, anywhere the agents' code and the store are) execute them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._engine import RunEngine
from .activities import RunActivities
from .settings import TemporalSettings, temporal_settings
from .workflow import RunWorkflow

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.worker import Worker

__all__ = ["create_worker", "run_worker", "serve_worker", "worker_engine"]


def worker_engine(engine: RunEngine, settings: TemporalSettings) -> RunEngine:
    """A native engine for a worker that shares ``engine``'s agents, store and event tail.

    It never sweeps (Temporal decides when a run executes) and its lease on a run lasts as long
    as a heartbeat may be late, so a run whose worker died is taken over when Temporal retries.
    """
    worker = RunEngine(
        engine.agents,
        engine.store,
        clock=engine.clock,
        budget=engine.budget,
        lease_ttl=settings.heartbeat,
        background_sweep=False,
        delta_batch_ms=engine.delta_batch_ms,
        max_step_bytes=engine.max_step_bytes,
        broken=engine.broken,
        approval_timeout=engine.approval_timeout,
        retention=engine.retention,
    )
    worker.tail = engine.tail  # readers of an app in the same process hear the worker's writes
    return worker


def create_worker(client: Client, engine: RunEngine, settings: TemporalSettings) -> Worker:
    """A worker of ``settings.task_queue`` running the run workflow and, over ``engine``, its activities."""
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    settings = settings.expanded()
    activities = RunActivities(engine, heartbeat=settings.heartbeat_seconds)
    # The workflow module imports only temporalio, but the sandbox re-imports its package:
    # agent_unit passes through (it is imported once, outside, and never runs in a workflow).
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("agent_unit"))
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[RunWorkflow],
        activities=[activities.advance, activities.resume, activities.expire, activities.cancel],
        workflow_runner=runner,
    )


async def run_worker(engine: RunEngine, settings: TemporalSettings, *, client: Client | None = None) -> None:
    """Run a worker until cancelled; ``engine`` is a native engine (see :func:`worker_engine`)."""
    worker = create_worker(client or await settings.connect(), engine, settings)
    await worker.run()


async def serve_worker(
    agents: Mapping[str, Any],
    store: Any,
    temporal: TemporalSettings | Mapping[str, Any],
    **engine_options: Any,
) -> None:
    """Run a worker alone (``agent-unit worker``) for ``agents`` over ``store`` until cancelled.

    ``engine_options`` go to the :class:`~agent_unit.RunEngine` that executes the runs
    (``budget``, ``adapters``, ``broken``...); it never sweeps, and its lease lasts a heartbeat.
    """
    settings = temporal_settings(temporal)
    engine_options.setdefault("lease_ttl", settings.heartbeat)
    engine = RunEngine(agents, store, background_sweep=False, **engine_options)
    try:
        await engine.check_store()
        await run_worker(engine, settings)
    finally:
        await engine.aclose()
