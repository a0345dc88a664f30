"""A store's live tail stops when it is cancelled, whatever its driver makes of the cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from agent_unit.stores._listen import HEARING, Listener


async def test_a_listener_whose_driver_turns_its_cancellation_into_an_error_still_stops() -> None:
    sessions = 0

    async def session() -> AsyncIterator[str]:
        nonlocal sessions
        sessions += 1
        yield HEARING
        try:
            await asyncio.Event().wait()  # a subscription waiting for the next message
        except asyncio.CancelledError:
            if sessions == 1:  # as a driver may: the cancelled read answers with a connection error
                raise ConnectionError("connection closed while reading") from None
            raise
        yield "never"

    listener = Listener("redis://example", session)
    heard: list[bool] = []
    hearing = asyncio.Event()

    def hear(on: bool) -> None:
        heard.append(on)
        hearing.set()

    listener.start(lambda run_id: None, hear)
    await asyncio.wait_for(hearing.wait(), 5)
    closing = asyncio.ensure_future(listener.close())
    done, _ = await asyncio.wait({closing}, timeout=5)
    if not done:  # it reconnected instead of stopping: cancel it again (the second session lets it end)
        closing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closing
    assert done, f"the listener did not stop when cancelled: it reconnected ({sessions} sessions)"
    assert sessions == 1
    assert heard == [True, False]
