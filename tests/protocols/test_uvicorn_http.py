"""A built server's HTTP protocol sends a response's head in one write with its first body bytes.

Two writes wake a client twice, and on a small host the client woken by the head runs on the
server's core while the server would write the first event (0.7 ms measured for httpx and
Chromium). The transport holds a head until the next write or the end of the loop's turn.
The last tests serve agent-unit's own app through it the way production fails: a burst of 300
streamed starts, 300 waited starts with two racing resumes of each run, pipelined requests on
one connection, a client gone in the middle of a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from agent_unit import create_agent_unit
from agent_unit.hosts.uvicorn_http import HeadWithBody, HttpToolsHeadWithBody

from ..support.http_agents import AGENTS

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


@contextlib.asynccontextmanager
async def uvicorn_on(app: Any, http: type[HttpToolsHeadWithBody]) -> AsyncIterator[int]:
    """``app`` served by uvicorn with the protocol ``http``, in this loop, until the block ends: its port.
    The listening socket is bound first (connections queue there until uvicorn accepts them)."""
    listening = socket.create_server(("127.0.0.1", 0), backlog=1024)
    server = uvicorn.Server(uvicorn.Config(app, http=http, log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[listening]))
    try:
        yield listening.getsockname()[1]
    finally:
        server.should_exit = True
        await serving
        listening.close()


@pytest.fixture
async def served() -> AsyncIterator[tuple[int, list[Recording]]]:
    """uvicorn serving ``app`` with the built servers' protocol, the writes under it recorded."""
    recordings: list[Recording] = []

    class Recorded(HttpToolsHeadWithBody):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            recordings.append(Recording(transport))
            super().connection_made(recordings[-1])  # type: ignore[arg-type]

    async with uvicorn_on(app, Recorded) as port:
        yield port, recordings


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


# -- the real app through the protocol, the way production fails --------------------------------


@pytest.fixture
async def agent_unit_served(tmp_path: Path) -> AsyncIterator[tuple[int, Any]]:
    """agent-unit's app (the refund agent, on SQLite) on uvicorn with the built servers' protocol."""
    unit = create_agent_unit(AGENTS, store=f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        async with uvicorn_on(unit, HttpToolsHeadWithBody) as port:
            yield port, unit
    finally:
        await unit.engine.aclose()


BODY = b'{"input": {"order_id": "o-1"}}'
START = (
    b"POST /agents/refund/runs HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)
)


def events(body: bytes) -> list[dict[str, Any]]:
    """The ``data:`` of each SSE message in a (de-chunked) body, checking ``id`` counts up from 1."""
    found = []
    for message in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in message.splitlines() if ": " in line)
        if "data" in fields:
            assert fields["id"] == str(len(found) + 1), message
            found.append(json.loads(fields["data"]))
    return found


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
    """One chunked HTTP/1.1 response: its status line, headers and de-chunked body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")[:-2]
    headers = dict(line.lower().split(": ", 1) for line in lines)
    assert headers["transfer-encoding"] == "chunked", head
    body = b""
    while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
        body += (await reader.readexactly(size + 2))[:-2]
    assert await reader.readexactly(2) == b"\r\n"
    return status.encode(), headers, body


async def test_a_burst_of_300_streamed_starts_through_the_protocol_each_gets_its_whole_stream(
    agent_unit_served: tuple[int, Any],
) -> None:
    port, app = agent_unit_served

    async def start() -> tuple[str, list[dict[str, Any]]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(START)
            status, headers, body = await read_response(reader)
        finally:
            writer.close()
        assert status == b"HTTP/1.1 200 OK" and headers["content-type"].startswith("text/event-stream")
        return headers["x-run-id"], events(body)

    answers = await asyncio.wait_for(asyncio.gather(*(start() for _ in range(300))), 120)
    assert len({run_id for run_id, _ in answers}) == 300
    for run_id, stream in answers:  # each stream is its own run's, whole, in order, ending at the pause
        assert stream[0]["type"] == "RUN_STARTED" and stream[0]["runId"] == run_id
        assert [event["type"] for event in stream][-1] == "RUN_INTERRUPTED", stream
        assert all(event.get("runId", run_id) == run_id for event in stream)
    first = await app.engine.list(status="interrupted", limit=200)
    rest = await app.engine.list(status="interrupted", limit=200, cursor=first.next_cursor)
    assert {run.id for run in first.runs + rest.runs} == {run_id for run_id, _ in answers}


async def test_pipelined_starts_on_one_connection_are_answered_in_order_each_whole(
    agent_unit_served: tuple[int, Any],
) -> None:
    port, _ = agent_unit_served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(START * 3)  # three requests in one write: each head waits for the one before
        answers = [await asyncio.wait_for(read_response(reader), 30) for _ in range(3)]
    finally:
        writer.close()
    run_ids = [headers["x-run-id"] for _, headers, _ in answers]
    assert len(set(run_ids)) == 3
    for (status, _, body), run_id in zip(answers, run_ids, strict=True):
        stream = events(body)
        assert status == b"HTTP/1.1 200 OK" and stream[0]["runId"] == run_id and stream[-1]["type"] == "RUN_INTERRUPTED"


async def test_a_client_that_leaves_mid_stream_loses_nothing_of_the_run_and_the_server_goes_on(
    agent_unit_served: tuple[int, Any],
) -> None:
    port, app = agent_unit_served
    body = b'{"input": 20}'  # chatty: 20 steps, 10 ms apart
    request = (
        b"POST /agents/chatty/runs HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    run_id = dict(line.lower().split(": ", 1) for line in head.decode().split("\r\n")[1:-2])["x-run-id"]
    await asyncio.wait_for(reader.readuntil(b"data: "), 30)  # the first event arrived with the head
    writer.transport.abort()  # gone, as a closed browser tab is: the stream's next writes find no one
    record = await asyncio.wait_for(app.engine.wait(run_id), 30)
    assert record.status == "completed" and record.output == 20
    stored = [event.to_dict()["type"] for event in await app.engine.events(run_id, after=0, limit=500)]
    assert stored.count("STEP_FINISHED") == 20
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # the server serves on
    try:
        writer.write(START)
        status, _, stream = await asyncio.wait_for(read_response(reader), 30)
    finally:
        writer.close()
    assert status == b"HTTP/1.1 200 OK" and events(stream)[-1]["type"] == "RUN_INTERRUPTED"


async def post_json(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One JSON ``POST`` on a connection of its own: the status and the JSON body (sized, not chunked)."""
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (path.encode(), len(payload), payload)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status, *lines = head.decode().split("\r\n")[:-2]
        headers = dict(line.lower().split(": ", 1) for line in lines)
        answer = json.loads(await reader.readexactly(int(headers["content-length"])))
    finally:
        writer.close()
    return int(status.split()[1]), answer


async def test_a_burst_of_300_waited_starts_then_racing_resumes_through_the_lane_each_run_once(
    agent_unit_served: tuple[int, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON starts and resumes skip Starlette's stack (``AgentUnit._lane``): under a burst each start is a
    run of its own, and of two resumes of one run sent at once exactly one wins, the other a 409."""
    port, _ = agent_unit_served
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("LEDGER_FILE", str(ledger))  # the refund agent's charge step writes a line each time it runs
    started = await asyncio.wait_for(
        asyncio.gather(
            *(post_json(port, "/agents/refund/runs?wait=1", {"input": {"order_id": f"o-{i}"}}) for i in range(300))
        ),
        120,
    )
    assert {status for status, _ in started} == {200}
    assert {run["status"] for _, run in started} == {"interrupted"}
    run_ids = [run["id"] for _, run in started]
    assert len(set(run_ids)) == 300
    resumes = [
        post_json(port, f"/runs/{run_id}/resume?wait=1", {"answer": {"approved": True}})
        for run_id in run_ids
        for _ in range(2)
    ]
    answered = await asyncio.wait_for(asyncio.gather(*resumes), 120)
    for first, second in zip(answered[::2], answered[1::2], strict=True):
        statuses = sorted([first[0], second[0]])
        assert statuses == [200, 409], (first, second)
        winner = first[1] if first[0] == 200 else second[1]
        assert winner["status"] == "completed" and winner["output"] == "refunded"
    charged = [line.split()[1] for line in ledger.read_text().splitlines()]
    assert sorted(charged) == sorted(f"o-{i}" for i in range(300))  # each order charged once, none twice


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_servers_side_of_each_connection_has_nagle_off(loop: str) -> None:
    """An event is never held back by Nagle's algorithm on the server's side: each accepted socket
    has TCP_NODELAY, on uvloop (what built servers run) and on asyncio's loop, which sets it only
    when the listening socket says TCP (this one, made by ``socket.create_server``, does not)."""
    run = asyncio.run if loop == "asyncio" else pytest.importorskip("uvloop").run
    options: list[int] = []

    class Checked(HttpToolsHeadWithBody):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            options.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    async def main() -> None:
        async with uvicorn_on(app, Checked) as port:
            received = await asyncio.to_thread(get, port)
        assert received.endswith(b"0\r\n\r\n")

    run(main())
    assert len(options) == 1 and options[0] != 0, options
