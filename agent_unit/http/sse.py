"""The run event stream as Server-Sent Events, written as a small ASGI response.

Each stored event is one SSE message whose ``id`` is its seq, so a client that reconnects
with ``Last-Event-ID`` (or ``?after=``) continues exactly where it stopped. The stream ends
when the run parks or ends (unless it follows), and sends a comment line as a keep-alive.

Written by hand rather than with a library because it must behave the same under uvicorn,
under Mangum (which buffers the whole body, so the stream must end by itself) and in
Pyodide (no threads): it needs only asyncio and the ASGI ``send``/``receive`` callables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable

from starlette.types import Receive, Scope, Send

from ..engine import RunEngine
from ..errors import StoreUnavailable
from ..records import FINISHED, RunStatus

__all__ = ["SSEResponse", "event_stream", "utf8"]

log = logging.getLogger("agent_unit.http")

# A comment (clients ignore it: no event is made up) and the reconnection delay in milliseconds.
INTERRUPTED = b": the stream was interrupted: reconnect with Last-Event-ID\nretry: 1000\n\n"

# A stream that does not follow ends once the run is in one of these and every event is sent.
PARKED = frozenset({RunStatus.interrupted, RunStatus.sleeping}) | FINISHED


def utf8(text: str) -> bytes:
    """``text`` (an event's JSON) as UTF-8. Stored events hold no lone surrogate (``events.dumps``
    and the stores refuse one); if one arrived anyway it is written as its JSON escape
    (``\\ud800``), never a stream cut mid-way."""
    return text.encode(errors="backslashreplace")


async def event_stream(
    engine: RunEngine,
    run_id: str,
    *,
    after: int,
    follow: bool,
    keepalive: float,
    poll_interval: float,
    stop: asyncio.Event,
    once: bool = False,
) -> AsyncGenerator[bytes]:
    """SSE messages for the run's events after ``after``, until it parks or ends (or ``stop``).

    ``once``: the events stored so far, then the end (hosts that buffer a response, like AWS
    Lambda's Python runtime, could not send a stream that waits; the client reconnects with
    Last-Event-ID for more).
    """
    if once:
        while events := await engine.store.read_events(run_id, after=after, limit=500):
            for event in events:
                yield b"id: %d\ndata: %s\n\n" % (event.seq, utf8(event.data))
                after = event.seq
        return
    idle = 0.0
    while not stop.is_set():
        waiter = engine.tail.listen(run_id)  # before reading: a write after the read still wakes us
        record = await engine.store.load_run(run_id)  # before reading too: its status covers what we read
        if record is None:
            return
        events = await engine.store.read_events(run_id, after=after, limit=500)
        for event in events:
            yield b"id: %d\ndata: %s\n\n" % (event.seq, utf8(event.data))
            after = event.seq
        if not follow and record.status in PARKED and len(events) < 500:
            return  # it was parked or ended before this read, so the read got everything up to now
        if events:
            idle = 0.0
            continue
        timeout = min(poll_interval, keepalive - idle)
        woken = await _first(waiter, stop, timeout)
        if woken:
            idle = 0.0
        else:
            idle += timeout
            if idle >= keepalive:
                idle = 0.0
                yield b": keep-alive\n\n"


async def _first(waiter: asyncio.Event, stop: asyncio.Event, seconds: float) -> bool:
    """Wait for a notify or a stop; False when ``seconds`` passed first."""
    waits = [asyncio.ensure_future(waiter.wait()), asyncio.ensure_future(stop.wait())]
    try:
        done, _ = await asyncio.wait(waits, timeout=max(seconds, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    return bool(done)


class SSEResponse:
    """Streams ``body`` (made with the ``stop`` event it is given) and stops it on disconnect."""

    media_type = "text/event-stream"

    def __init__(
        self, make_body: Callable[[asyncio.Event], AsyncIterator[bytes]], headers: dict[str, str] | None = None
    ) -> None:
        self._make_body = make_body
        self._headers = headers or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stop = asyncio.Event()

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    stop.set()
                    return

        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            *[(key.encode(), value.encode()) for key, value in self._headers.items()],
        ]
        watcher = asyncio.ensure_future(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            ending = b""
            try:
                async for chunk in self._make_body(stop):
                    if stop.is_set():
                        break
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except OSError:
                raise  # the client is gone: nobody to end the stream for
            except StoreUnavailable:  # the store logged where and why
                ending = INTERRUPTED
            except Exception:  # a 200 has been sent: end the body cleanly rather than cut it
                log.exception("agent-unit: an event stream failed; it ends and the client reconnects")
                ending = INTERRUPTED
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": ending, "more_body": False})
        finally:
            watcher.cancel()
