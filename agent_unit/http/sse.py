"""Server-Sent Events: the framing of a stream, and a small ASGI response that sends one.

Every SSE byte of the API is written here, at the end: the REST route frames each stored
event as one message whose ``id`` is its seq (so a client that reconnects with
``Last-Event-ID`` or ``?after=`` continues exactly where it stopped), and the protocols
frame their own translations with :func:`message`. A keep-alive is a comment line.

Written by hand rather than with a library because it must behave the same under uvicorn,
under Mangum (which buffers the whole body, so the stream must end by itself) and in
Pyodide (no threads): it needs only asyncio and the ASGI ``send``/``receive`` callables.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable

from starlette.types import Receive, Scope, Send

from .._records import StoredEvent
from ..errors import StoreUnavailable
from .stream import StreamItem

__all__ = ["KEEP_ALIVE_COMMENT", "SSEResponse", "event_messages", "message", "utf8"]

log = logging.getLogger("agent_unit.http")

# A comment (clients ignore it: no event is made up) and the reconnection delay in milliseconds.
INTERRUPTED = b": the stream was interrupted: reconnect with Last-Event-ID\nretry: 1000\n\n"

KEEP_ALIVE_COMMENT = b": keep-alive\n\n"
"""A comment line: it keeps a connection (and proxies) open and is no event for a client."""


def utf8(text: str) -> bytes:
    """``text`` (an event's JSON) as UTF-8. Stored events hold no lone surrogate (``events.dumps``
    and the stores refuse one); if one arrived anyway it is written as its JSON escape
    (``\\ud800``), never a stream cut mid-way."""
    return text.encode(errors="backslashreplace")


def message(data: str, *, id: int | None = None, event: str | None = None) -> bytes:
    """One SSE message of one ``data`` line (``data`` is JSON: it holds no newline)."""
    head = b"" if id is None else b"id: %d\n" % id
    if event is not None:
        head += b"event: %s\n" % event.encode()
    return head + b"data: %s\n\n" % utf8(data)


async def event_messages(items: AsyncIterable[StreamItem]) -> AsyncIterator[bytes]:
    """The stored events as SSE messages (``id`` = seq, ``data`` = the event) and keep-alive comments."""
    async for item in items:
        yield message(item.data, id=item.seq) if isinstance(item, StoredEvent) else KEEP_ALIVE_COMMENT


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
