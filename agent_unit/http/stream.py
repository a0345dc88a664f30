"""A run's stored events as a live stream: what every protocol reads, before any framing.

The REST route frames these as SSE messages (``id`` = seq), A2A turns them into task updates
and AG-UI into one AG-UI run; each translates the stored event itself, and none reads SSE
text back. A stream ends when the run ends, or parks (unless it follows), and yields a
:data:`KEEP_ALIVE` marker when nothing happened for a while (never more than ``keepalive``
seconds apart), so the protocol can write whatever its transport needs to keep the connection open.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Final

from .._engine import RunEngine
from .._records import FINISHED, RunStatus, StoredEvent

__all__ = ["KEEP_ALIVE", "PARKED", "KeepAlive", "StreamItem", "read_stream"]

# A stream that does not follow ends once the run is in one of these and every event is sent.
PARKED = frozenset({RunStatus.interrupted, RunStatus.sleeping}) | FINISHED

_PAGE = 500  # events read from the store at a time


@dataclass(frozen=True)
class KeepAlive:
    """Nothing happened for a while: a marker, never an event of the run."""


KEEP_ALIVE: Final = KeepAlive()

StreamItem = StoredEvent | KeepAlive


async def read_stream(
    engine: RunEngine,
    run_id: str,
    *,
    after: int,
    follow: bool,
    keepalive: float,
    poll_interval: float,
    stop: asyncio.Event,
    once: bool = False,
) -> AsyncGenerator[StreamItem, None]:
    """The run's events after ``after``, until it ends, or parks unless ``follow`` (or ``stop``), with keep-alives.

    ``once``: the events stored so far, then the end (hosts that buffer a response, like AWS
    Lambda's Python runtime, could not send a stream that waits; the client reconnects with
    Last-Event-ID for more).
    """
    if once:
        while events := await engine.events(run_id, after=after, limit=_PAGE):
            for event in events:
                yield event
                after = event.seq
        return
    idle = 0.0
    while not stop.is_set():
        waiter = engine.tail.listen(run_id)  # before reading: a write after the read still wakes us
        events = await engine.events(run_id, after=after, limit=_PAGE)
        for event in events:
            yield event
            after = event.seq
        if len(events) == _PAGE:
            idle = 0.0
            continue  # more are stored: they go out before anything else is read
        # The status is read after the events are sent, so no event waits for it: a stream's first
        # event (a run's RUN_STARTED) leaves ~0.1 ms sooner on an idle server, whose first request
        # after a pause runs ~1 ms of cold Python. A run that had ended (or parked) by this read
        # stored everything before it: what it stored after the read above is read below.
        record = await engine.find(run_id)
        if record is None:
            return
        if record.status in FINISHED or (not follow and record.status in PARKED):
            while rest := await engine.events(run_id, after=after, limit=_PAGE):
                for event in rest:
                    yield event
                    after = event.seq
            return
        if events:
            idle = 0.0
            continue
        # While the store's subscription hears every write, a notification wakes the reader: it
        # reads again only to send a keep-alive. Every wait ends at a random point of its interval,
        # never at a fixed time since the stream opened: streams opened together (a burst of
        # followers) then never read the store together again, at a keep-alive or otherwise.
        interval = min(keepalive if engine.tail.hearing else poll_interval, keepalive)
        timeout = interval * random.uniform(0.5, 1.0)
        woken = await _first(waiter, stop, timeout)
        if woken:
            idle = 0.0
        else:
            idle += timeout
            if idle + interval > keepalive:  # the next wait could outlast the keep-alive interval
                idle = 0.0
                yield KEEP_ALIVE


async def _first(waiter: asyncio.Event, stop: asyncio.Event, seconds: float) -> bool:
    """Wait for a notify or a stop; False when ``seconds`` passed first."""
    waits = [asyncio.ensure_future(waiter.wait()), asyncio.ensure_future(stop.wait())]
    try:
        done, _ = await asyncio.wait(waits, timeout=max(seconds, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    return bool(done)
