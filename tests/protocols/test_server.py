"""The HTTP contract over a real uvicorn process: restarts between pause and resume, dropped streams."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest

from agent_unit.client import AgentClient, RunEvent, SyncAgentClient

from ..support import fetch
from ..support.server import Server
from .test_http import BAD

pytestmark = pytest.mark.slow  # starts real servers in subprocesses: left out of `make check`


@pytest.fixture
def server(tmp_path: Path) -> Server:
    ledger = tmp_path / "ledger.txt"
    running = Server(f"sqlite:///{tmp_path / 'runs.db'}", env={"LEDGER_FILE": str(ledger)}).start()
    running.ledger = ledger  # type: ignore[attr-defined]
    yield running  # type: ignore[misc]
    running.stop()


def test_pause_restart_the_server_resume_charges_once(server: Server) -> None:
    with SyncAgentClient(server.url) as agents:
        events = list(agents.run("refund", {"order_id": "o_1"}))
        assert events[-1].type == "RUN_INTERRUPTED"
        run_id = events[-1].data["runId"]
    server.restart()  # a new process over the same store
    with SyncAgentClient(server.url) as agents:
        assert agents.get(run_id).status == "interrupted"
        finished = list(agents.resume(run_id, {"approved": True}))
        assert [event.type for event in finished] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
        assert finished[0].seq == events[-1].seq + 1
        assert agents.get(run_id).output == "refunded"
    charges = server.ledger.read_text().splitlines()  # type: ignore[attr-defined]
    assert len(charges) == 1 and charges[0].startswith("charge o_1 ")


async def test_a_stream_dropped_by_a_server_restart_yields_every_event_once(server: Server) -> None:
    seen: list[RunEvent] = []
    restarted = threading.Event()

    async def consume() -> None:
        async with AgentClient(server.url, reconnects=40) as agents:
            async for event in agents.run("chatty", 300):
                seen.append(event)
                if len(seen) == 30 and not restarted.is_set():
                    # mid-run: stop the server (it hands the run back) and start a new one
                    await asyncio.to_thread(server.restart)
                    restarted.set()

    await asyncio.wait_for(consume(), 60)
    assert restarted.is_set()
    seqs = [event.seq for event in seen]
    assert seqs == list(range(1, len(seqs) + 1))  # no gap, no duplicate
    assert seen[-1].type == "RUN_FINISHED" and seen[-1].data["result"] == 300
    ticks = [event for event in seen if event.type == "STEP_FINISHED"]
    assert len(ticks) == 300
    released = [i for i, event in enumerate(seen) if event.data.get("name") == "agent-unit.released"]
    assert len(released) == 1 and released[0] < len(seen) - 2  # the old server handed it back; the new one finished it


def test_bad_requests_over_the_real_server_change_nothing(tmp_path: Path) -> None:
    server = Server(f"sqlite:///{tmp_path / 'runs.db'}", env={"AGENT_UNIT_SECRET": "s3cret"}).start()
    try:
        with fetch.Client(base_url=server.url) as http:
            parked = http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}}).json()
            for what, method, path, kwargs, status, code in BAD:
                response = http.request(method, path, **kwargs)
                assert response.status_code == status, (what, response.text)
                assert response.json()["error"]["code"] == code, what
                assert "Traceback" not in response.text
            assert http.get(f"/runs/{parked['id']}").json() == parked
            assert len(http.get("/runs").json()["runs"]) == 1
    finally:
        server.stop()


def test_idle_streams_get_keep_alive_comments_that_clients_skip(server: Server) -> None:
    with SyncAgentClient(server.url) as agents:
        run_id = next(iter(agents.run("refund", {"order_id": "o_1"}))).data["runId"]
        lines: list[str] = []
        with (
            fetch.Client(base_url=server.url, timeout=5) as http,
            http.stream("GET", f"/runs/{run_id}/events?follow=1&after=4") as response,
        ):
            for line in response.iter_lines():  # the run is parked: nothing but keep-alives comes
                lines.append(line)
                if len(lines) >= 4:
                    break
        assert ": keep-alive" in lines and not any(line.startswith("data:") for line in lines)
        assert [event.seq for event in agents.events(run_id, after=2)] == [3, 4]


@pytest.mark.parametrize("path", ["/agents/refund/runs", "/a2a", "/agents/refund/ag-ui", "/mcp"])
def test_a_client_that_disconnects_mid_body_costs_no_traceback_in_the_log(tmp_path: Path, path: str) -> None:
    log = tmp_path / "server.log"
    server = Server(f"sqlite:///{tmp_path / 'runs.db'}", log=log).start()
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port)) as raw:
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\ncontent-type: application/json\r\n"
                    "accept: application/json, text/event-stream\r\ncontent-length: 5000\r\n\r\n"
                )
                raw.sendall(head.encode() + b'{"input": {"order_id": "o_')  # and the client goes away
        time.sleep(0.5)
        assert fetch.get(f"{server.url}/runs").json()["runs"] == []  # still serving; nothing started
    finally:
        server.stop()
    text = log.read_text()
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text
    assert len(text.splitlines()) <= 3, text  # at most one line per disconnect, and only when asked for
