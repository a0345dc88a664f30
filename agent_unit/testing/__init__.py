"""Test agents in milliseconds: ``create_test_unit`` runs them on a clock that moves when told.

    unit = create_test_unit({"refund": refund})
    parked = await unit.run("refund", {"order_id": "o_1"})
    assert parked.status == "interrupted"
    done = await unit.resume(parked.id, {"approved": True})

Pass the same store to a second unit to test a restart. An adapter's own test project runs
the conformance scenarios every built-in adapter passes with :mod:`agent_unit.testing.adapters`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._agent import Agent
from .._clock import ManualClock
from .._durations import Duration, parse_duration
from .._engine import RunEngine
from .._host import Host
from .._records import RunRecord, StoredEvent
from ..env import drain
from ..errors import AdapterCheckFailed
from ..run import current_run
from ..stores import Store
from ..stores.memory import MemoryStore

__all__ = [
    "HOST",
    "AdapterCheckFailed",
    "EffectKit",
    "TestUnit",
    "assert_adapter",
    "create_test_unit",
    "execute_again",
]


class TestUnit:
    """A :class:`RunEngine` whose calls return once the run parks or ends, and once the
    ``wait_until`` work it started has finished (a test sees its effects)."""

    __test__ = False  # not a pytest test class

    def __init__(self, engine: RunEngine, clock: ManualClock) -> None:
        self.engine = engine
        self.clock = clock
        self.store = engine.store

    async def run(self, agent: str, input: Any = None, *, thread_id: str | None = None) -> RunRecord:
        record = await self.engine.start(agent, input, thread_id=thread_id, wait=True)
        await drain(None)
        return record

    async def resume(self, run_id: str, answer: Any = None) -> RunRecord:
        record = await self.engine.resume(run_id, answer, wait=True)
        await drain(None)
        return record

    async def get(self, run_id: str) -> RunRecord:
        return await self.engine.get(run_id)

    async def cancel(self, run_id: str) -> RunRecord:
        return await self.engine.cancel(run_id)

    async def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's stored events, each with its ``seq``."""
        stored: list[StoredEvent] = await self.engine.events(run_id)
        return [event.to_dict() for event in stored]

    async def advance(self, duration: Duration) -> None:
        """Move the clock and wake (or recover, or delete) whatever is due, waiting for it."""
        self.clock.advance(parse_duration(duration))
        await self.engine.sweep(wait=True)
        await drain(None)

    async def close(self) -> None:
        await drain(None)
        await self.engine.aclose()

    async def __aenter__(self) -> TestUnit:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


HOST = Host(name="test")
"""The test unit's :class:`~agent_unit.Host`: a server's answers; its manual clock means no
sweep or timer runs by itself (``advance()`` moves time), and ``wait_until`` work is drained
before each call returns."""


def create_test_unit(
    agents: Mapping[str, Agent],
    store: Store | str | None = None,
    clock: ManualClock | None = None,
    **options: Any,
) -> TestUnit:
    """A test unit over ``store`` (a fresh in-memory store by default) and a manual clock.

    ``options`` go to :class:`RunEngine` (``budget``, ``retention``, ``lease_ttl``, ``host``...).
    Its host is :data:`HOST` unless ``host=`` says otherwise.
    """
    clock = clock or ManualClock()
    options.setdefault("host", HOST)
    engine = RunEngine(agents, store if store is not None else MemoryStore(), clock=clock, **options)
    return TestUnit(engine, clock)


class EffectKit:
    """Handed to the agent factory: report every real side effect with ``kit.effect(name)``.

    Give each effect a name of its own (``"refund o_1"``): a name seen twice is a repeat.
    """

    def __init__(self) -> None:
        self.effects: list[str] = []
        self.outside: list[str] = []

    def effect(self, name: str) -> None:
        self.effects.append(name)
        run = current_run()
        if run is None or run.current_key() is None:
            self.outside.append(name)

    def repeated(self) -> list[str]:
        return sorted({name for name in self.effects if self.effects.count(name) > 1})


async def assert_adapter(
    *,
    adapter: Any,
    agent: Any,
    input: Any = None,
    pause: Mapping[str, Any] | None = None,
) -> None:
    """Check an adapter the way agent-unit checks its own, in any test runner.

    ``agent(kit)`` builds an agent of the adapter's framework whose side effects call
    ``kit.effect(name)``. The agent runs to the end; then the host "restarts" (a new engine
    over the same SQLite store) and executes the run again from its journal: every effect
    must have run inside a journaled call, and none may run again. With ``pause``
    (``{"agent": factory, "answer": ...}``), that agent must pause through its framework,
    and after a restart the answer resumes it, with no model call or effect repeated.
    """
    import tempfile
    from pathlib import Path

    from ..stores.sqlite import SQLiteStore

    async def check(factory: Any, answer: Any, pausing: bool) -> None:
        kit = EffectKit()
        value = factory(kit)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "check.db"
            first = create_test_unit({"checked": value}, SQLiteStore(path), adapters=[adapter])
            record = await first.run("checked", input)
            await first.close()
            await first.store.close()
            if pausing and record.status != "interrupted":
                raise AdapterCheckFailed(f"the pause agent did not pause (it is {record.status.value})")
            if record.status == "failed":
                raise AdapterCheckFailed(f"the agent failed: {record.error.message if record.error else ''}")
            second = create_test_unit({"checked": factory(kit)}, SQLiteStore(path), adapters=[adapter])
            if pausing:
                record = await second.resume(record.id, answer)
            else:
                await execute_again(second, record.id)
                record = await second.get(record.id)
            await second.close()
            await second.store.close()
        if record.status != "completed":
            raise AdapterCheckFailed(
                f"the run ended {record.status.value}: {record.error.message if record.error else ''}"
            )
        problems = []
        if kit.outside:
            problems.append(f"effects ran outside a journaled call: {', '.join(kit.outside)}")
        if kit.repeated():
            problems.append(f"effects ran again after a restart: {', '.join(kit.repeated())}")
        if problems:
            raise AdapterCheckFailed(f"adapter {adapter.name!r}: " + "; ".join(problems))

    await check(agent, None, False)
    if pause is not None:
        await check(pause["agent"], pause.get("answer"), True)


async def execute_again(unit: TestUnit, run_id: str) -> None:
    """Execute a finished run again from its journal in ``unit`` (a new engine), as a recovery would:
    every journaled step answers from the journal, so nothing it did runs twice."""
    from .._records import RunStatus

    record = await unit.get(run_id)
    expected = record.version
    record.status = RunStatus.queued
    record.finished_at = None
    record.output = None
    record.due_at = unit.clock.time()
    await unit.store.save_run(record, expected_version=expected)
    await unit.engine.sweep(wait=True)
