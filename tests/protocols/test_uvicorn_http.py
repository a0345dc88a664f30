"""A built server's HTTP protocol sends a response's head in one write with its first body bytes.

Two writes wake a client twice, and on a small host the client woken by the head runs on the
server's core while the server would write the first event (0.7 ms measured for httpx and
Chromium). The transport holds a head until the next write or the end of the loop's turn.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from agent_unit.hosts.uvicorn_http import HeadWithBody, HttpToolsHeadWithBody

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"


class Recording:
    """A transport that keeps what is written to it (and passes it on, when it wraps a real one)."""

    def __init__(self, transport: Any = None) -> None:
        self.transport = transport
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        if self.transport is not None:
            self.transport.write(data)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def is_closing(self) -> bool:
        return self.closed if self.transport is None else self.transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


async def test_a_head_leaves_with_the_body_written_in_the_same_turn() -> None:
    recording = Recording()
    transport = HeadWithBody(recording)  # type: ignore[arg-type]
    transport.write(HEAD)
    assert recording.writes == []  # held
    transport.write(b"data: {}\n\n")
    assert recording.writes == [HEAD + b"data: {}\n\n"]
    transport.write(b"data: 2\n\n")  # what follows passes straight through
    assert recording.writes[1:] == [b"data: 2\n\n"]


async def test_a_head_with_no_body_in_its_turn_leaves_alone_at_the_end_of_the_turn() -> None:
    recording = Recording()
    transport = HeadWithBody(recording)  # type: ignore[arg-type]
    transport.write(HEAD)
    await asyncio.sleep(0)
    assert recording.writes == [HEAD]
    transport.write(b"data: {}\n\n")
    assert recording.writes == [HEAD, b"data: {}\n\n"]


async def test_closing_sends_a_held_head_first_and_a_closed_transport_gets_nothing_more() -> None:
    recording = Recording()
    transport = HeadWithBody(recording)  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.close()
    assert recording.writes == [HEAD] and recording.closed
    await asyncio.sleep(0)  # the turn's flush finds nothing held
    assert recording.writes == [HEAD]
    transport.write(HEAD)  # a head held on a connection that closes before the turn ends
    await asyncio.sleep(0)
    assert recording.writes == [HEAD]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An event stream whose first event is ready at once, then a second one later."""
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    await asyncio.sleep(0.05)
    await send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": False})


@pytest.fixture
async def served() -> AsyncIterator[tuple[int, list[Recording]]]:
    """uvicorn serving ``app`` with the built servers' protocol, the writes under it recorded."""
    recordings: list[Recording] = []

    class Recorded(HttpToolsHeadWithBody):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            recordings.append(Recording(transport))
            super().connection_made(recordings[-1])  # type: ignore[arg-type]

    listening = socket.create_server(("127.0.0.1", 0))  # connections queue here until uvicorn accepts them
    server = uvicorn.Server(uvicorn.Config(app, http=Recorded, log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[listening]))
    try:
        yield listening.getsockname()[1], recordings
    finally:
        server.should_exit = True
        await serving
        listening.close()


def get(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        received = b""
        while chunk := client.recv(65536):
            received += chunk
    return received


async def test_uvicorn_with_the_protocol_writes_the_head_and_first_event_at_once(
    served: tuple[int, list[Recording]],
) -> None:
    port, recordings = served
    received = await asyncio.to_thread(get, port)
    assert received.startswith(b"HTTP/1.1 200 OK") and received.endswith(b"0\r\n\r\n")
    assert b"data: 1" in received and b"data: 2" in received
    (recording,) = recordings
    first = recording.writes[0]
    assert first.startswith(b"HTTP/1.1 200 OK") and b"data: 1" in first and b"data: 2" not in first
