"""The Durable Objects store held to the conformance suite, over the Workers *simulation*.

Each factory call is a new handle, as the Worker itself holds one (no run object of its own):
every run goes to an object of its own through RPC, lists and state to the index object. The
objects' storage is the simulation's real SQLite. ``due_runs`` is the one guarantee this store
keeps per object instead (each run's alarm is its due index, and only the object sweeps its
run): its conformance test is left out here and proved by the alarm tests in
``test_durable_objects.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_unit._clock import ManualClock
from agent_unit.hosts.cloudflare.durable_objects_store import DurableObjectsStore

from ...stores import test_conformance as conformance
from .workers_sim import WorkersSim, uninstall

BINDINGS = {"AGENT_UNIT_RUNS": "AgentUnitRun", "AGENT_UNIT_INDEX": "AgentUnitIndex"}

for _name in dir(conformance):
    if _name.startswith("test_") and _name != "test_due_runs_reads_only_what_is_due":
        globals()[_name] = getattr(conformance, _name)


@pytest.fixture
def store_factory() -> Iterator[Any]:
    sim = WorkersSim(ManualClock(datetime(2026, 12, 1, tzinfo=UTC)))
    from agent_unit.hosts.cloudflare.durable_objects_runtime import durable_object_classes

    def no_app(store: Any, on_continue: Any) -> Any:
        raise AssertionError("the conformance suite serves no requests")

    async def no_serve(*args: Any) -> Any:
        raise AssertionError("the conformance suite serves no requests")

    run_class, index_class = durable_object_classes(no_app, no_serve)
    isolate = sim.isolate(object, {"AgentUnitRun": run_class, "AgentUnitIndex": index_class}, BINDINGS)
    yield lambda: DurableObjectsStore(isolate.env)
    uninstall()
