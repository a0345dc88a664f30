"""Background loops stop when cancelled even if a store's driver turns the cancellation into an error.

A driver's read that is cancelled may answer with a connection error, which the store reports as
StoreUnavailable, a failure the sweep tries again after. Seen: a server that ignored SIGTERM, its
shutdown waiting forever for a sweep that went on reporting its Redis out of reach.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_unit import Run, RunEngine, define_agent
from agent_unit.errors import StoreUnavailable
from agent_unit.stores.memory import MemoryStore


@define_agent
async def idle(input: str, run: Run) -> str:
    return input


class StallingStore(MemoryStore):
    """A store whose sweep read waits, and answers its cancellation as a driver may: unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.reading = asyncio.Event()

    async def due_runs(self, *, before: float, limit: int = 100) -> list[Any]:
        self.reads += 1
        self.reading.set()
        if self.reads > 1:
            return []  # a sweep that went on after its cancellation reads again, and finds nothing
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise StoreUnavailable("the store cannot be reached: connection closed while reading") from None
        return []


async def test_the_sweep_stops_when_cancelled_even_if_the_store_turns_the_cancellation_into_an_outage() -> None:
    store = StallingStore()
    engine = RunEngine({"idle": idle}, store, sweep_interval="0.05s")
    engine.start_background()
    await asyncio.wait_for(store.reading.wait(), 5)  # the first sweep runs at once, and waits in its read
    closing = asyncio.ensure_future(engine.aclose())
    done, _ = await asyncio.wait({closing}, timeout=5)
    if not done:  # the old behaviour: it swept on; let it end before failing (it is cancelled again)
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
    assert done, f"the engine's close waited for a sweep that went on after its cancellation ({store.reads} reads)"
    assert store.reads == 1
