"""uvicorn's HTTP protocol (httptools) with a response's head sent in one write with its first body bytes.

    uvicorn.run(app, http=HttpToolsHeadWithBody)   # what a built server's main.py does

uvicorn writes a response's head at ``http.response.start`` and its body at each
``http.response.body``: two writes, so two TCP segments (TCP_NODELAY), and a client woken twice.
On a small host the first wake-up costs the server: Linux runs a task woken by a socket write on
the writer's core, so a client that parses the head (httpx, a browser) takes the server's core
while the server would write the first event. Measured on a 2-core VM
(``bench/http/first_event.py``): a run's first SSE event left the server 0.7 ms after its head
for httpx and Chromium, 0.1 ms for a raw socket; held for each other, they leave together.

A head waits only for the rest of the current turn of the event loop: a stream with nothing to
send yet gets its head out at the end of the turn, alone. Importing this module needs httptools
(an ImportError without it: uvicorn then serves with h11, as ``main.py`` does).

Each connection also gets ``TCP_NODELAY``, so Nagle's algorithm never holds an event back behind
an unacknowledged one. uvloop sets it on every TCP connection, asyncio's loop only on sockets
whose ``proto`` says TCP: not on those accepted from a listening socket made without it
(``socket.create_server``, gunicorn's listeners, a socket handed over as a file descriptor).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HeadWithBody", "HttpToolsHeadWithBody"]

_HEAD = b"HTTP/1.1 "


class HeadWithBody:
    """A transport that passes every write through, except a response head: that one is held until
    the next write (sent with it) or the end of the loop's turn, whichever comes first."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._head is not None:
            data, self._head = self._head + data, None
        elif data[: len(_HEAD)] == _HEAD:
            self._head = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Send a held head now (the end of the turn: no body came with it)."""
        if self._head is not None:
            head, self._head = self._head, None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._head or b"")

    def __getattr__(self, name: str) -> Any:
        """Everything else (``is_closing``, ``get_extra_info``, ``pause_reading``, a WebSocket
        upgrade's ``set_protocol``) is the transport's own."""
        return getattr(self._transport, name)


class HttpToolsHeadWithBody(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through :class:`HeadWithBody`, on a socket with Nagle off."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        connection = transport.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):  # a connection already gone: the protocol finds out itself
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(cast(asyncio.Transport, HeadWithBody(cast(asyncio.Transport, transport))))
