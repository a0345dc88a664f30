"""Test agents in milliseconds: ``create_test_unit`` runs them on a clock that moves when told.

    unit = create_test_unit({"refund": refund})
    parked = await unit.run("refund", {"order_id": "o_1"})
    assert parked.status == "interrupted"
    done = await unit.resume(parked.id, {"approved": True})

Pass the same store to a second unit to test a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .agent import Agent
from .clock import ManualClock
from .durations import Duration, parse_duration
from .engine import RunEngine
from .records import RunRecord, StoredEvent
from .stores import Store
from .stores.memory import MemoryStore

__all__ = ["TestUnit", "create_test_unit"]


class TestUnit:
    """A :class:`RunEngine` whose calls return once the run parks or ends."""

    __test__ = False  # not a pytest test class

    def __init__(self, engine: RunEngine, clock: ManualClock) -> None:
        self.engine = engine
        self.clock = clock
        self.store = engine.store

    async def run(self, agent: str, input: Any = None, *, thread_id: str | None = None) -> RunRecord:
        return await self.engine.start(agent, input, thread_id=thread_id, wait=True)

    async def resume(self, run_id: str, answer: Any = None) -> RunRecord:
        return await self.engine.resume(run_id, answer, wait=True)

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

    async def close(self) -> None:
        await self.engine.aclose()

    async def __aenter__(self) -> TestUnit:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def create_test_unit(
    agents: Mapping[str, Agent],
    store: Store | str | None = None,
    clock: ManualClock | None = None,
    **options: Any,
) -> TestUnit:
    """A test unit over ``store`` (a fresh in-memory store by default) and a manual clock.

    ``options`` go to :class:`RunEngine` (``budget``, ``retention``, ``lease_ttl``...).
    """
    clock = clock or ManualClock()
    engine = RunEngine(agents, store if store is not None else MemoryStore(), clock=clock, **options)
    return TestUnit(engine, clock)
