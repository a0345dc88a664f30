"""A locked or vanished store never stalls the server: waiting for SQLite's lock leaves the event
loop free, a write that cannot get the lock in time is a 503 with Retry-After (never a 500), and
an event stream whose store goes away ends cleanly, for the client to reconnect."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_unit import create_agent_unit
from agent_unit.errors import StoreUnavailable

from ..support import fetch
from ..support.http_agents import AGENTS
from ..support.server import Server
from ..support.servers import PostgresServer, RedisServer

_HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")  # the file's write lock, until told to let go
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""


@contextmanager
def write_lock(path: Path) -> Iterator[None]:
    """Another process holds the database's write lock for the duration of the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)


async def test_a_request_is_answered_while_another_waits_for_a_locked_sqlite_file_and_that_one_gets_a_503(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    app = create_agent_unit(AGENTS, store=f"sqlite:///{path}?busy_timeout=3000")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        assert (await http.get("/runs")).json()["runs"] == []
        with write_lock(path):
            start = asyncio.ensure_future(http.post("/agents/refund/runs", json={"input": {"order_id": "o_1"}}))
            await asyncio.sleep(
                0.2
            )  # the start reaches the locked file (a loop blocked by it would not even wake here)
            listed = await http.get("/agents")
            assert listed.status_code == 200 and "refund" in listed.text
            assert not start.done()  # answered while the start still waits for the lock, which is still held
            refused = await start
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "store_unavailable" and int(refused.headers["retry-after"]) >= 1
        assert "runs.db" not in refused.text and str(tmp_path) not in refused.text  # the kind only
        assert (await http.get("/runs")).json()["runs"] == []  # no run was created

        # the lock let go: everything works again
        started = await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}})
        assert started.status_code == 200 and started.json()["status"] == "interrupted"
    await app.engine.aclose()


async def test_a_step_waits_for_a_briefly_locked_file_without_failing_and_the_file_can_be_opened(
    tmp_path: Path,
) -> None:
    from agent_unit._records import JournalEntry
    from agent_unit.stores.sqlite import SQLiteStore

    from .test_conformance import make_record

    store = SQLiteStore(tmp_path / "runs.db")
    record = make_record()
    await store.create_run(record)
    with write_lock(Path(store.path)):
        append = asyncio.ensure_future(store.append(record.id, owner="a", journal=[JournalEntry("k", "1")]))
        await asyncio.sleep(0.1)
        assert not append.done()  # waiting, off the loop's thread
        second = SQLiteStore(store.path)  # opening the existing file needs no write lock: a server starts
        assert await second.load_run(record.id) == record
        await second.close()
    assert await append == 0  # it went through once the lock was let go
    assert list(await store.load_journal(record.id)) == ["k"]
    await store.close()


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_an_event_stream_whose_store_goes_away_ends_cleanly_and_can_be_resumed(kind: str, tmp_path: Path) -> None:
    store: RedisServer | PostgresServer
    store = RedisServer().start(keep_data=tmp_path) if kind == "redis" else PostgresServer().start()
    server = Server(store.url, env={"TEST_AGENTS": "tests.support.process_agents:AGENTS"}).start()
    try:
        run_id = fetch.post(f"{server.url}/agents/approval/runs?wait=1", json={"input": 1}).json()["id"]
        lines: list[str] = []
        with fetch.stream("GET", f"{server.url}/runs/{run_id}/events?follow=1", timeout=30) as stream:
            for line in stream.iter_lines():  # a cut chunked body would raise here
                lines.append(line)
                if line.startswith("data:") and "RUN_INTERRUPTED" in line:
                    store.stop()  # the store goes away while the stream follows the run
        assert stream.status_code == 200
        last_id = [line for line in lines if line.startswith("id:")][-1].split(":", 1)[1].strip()
        assert lines[-3:] == [": the stream was interrupted: reconnect with Last-Event-ID", "retry: 1000", ""]

        store.start()  # back: the client reconnects where it stopped, with nothing missed or repeated
        again = fetch.get(f"{server.url}/runs/{run_id}/events", headers={"last-event-id": last_id}, timeout=30)
        assert again.status_code == 200 and "data:" not in again.text
    finally:
        server.stop()
        store.remove() if isinstance(store, PostgresServer) else store.stop()


async def test_the_client_following_a_stream_cut_short_by_a_store_outage_reconnects_instead_of_stopping(
    tmp_path: Path,
) -> None:
    from agent_unit.client import AgentClient
    from agent_unit.errors import StoreUnavailable

    store = RedisServer().start(keep_data=tmp_path)
    server = Server(store.url, env={"TEST_AGENTS": "tests.support.process_agents:AGENTS"}).start()
    client = AgentClient(server.url, reconnects=1)
    try:
        run_id = (await client.start("approval", 1, wait=True)).id
        seen = []
        with pytest.raises(StoreUnavailable):  # it reconnected, and was told the store is still away
            async for event in client.events(run_id, follow=True):
                seen.append(event.type)
                if event.type == "RUN_INTERRUPTED":
                    store.stop()
        assert seen[-1] == "RUN_INTERRUPTED"  # it did not take the early end for the end of the run
    finally:
        await client.aclose()
        server.stop()
        store.stop()


def test_the_sync_client_following_a_stream_cut_short_by_a_store_outage_reconnects_instead_of_stopping(
    tmp_path: Path,
) -> None:
    from agent_unit.client import SyncAgentClient
    from agent_unit.errors import StoreUnavailable

    store = RedisServer().start(keep_data=tmp_path)
    server = Server(store.url, env={"TEST_AGENTS": "tests.support.process_agents:AGENTS"}).start()
    try:
        with SyncAgentClient(server.url, reconnects=1) as client:
            run_id = client.start("approval", 1, wait=True).id
            seen = []
            with pytest.raises(StoreUnavailable):  # it reconnected, and was told the store is still away
                for event in client.events(run_id, follow=True):
                    seen.append(event.type)
                    if event.type == "RUN_INTERRUPTED":
                        store.stop()
            assert seen[-1] == "RUN_INTERRUPTED"  # it did not take the early end for the end of the run
    finally:
        server.stop()
        store.stop()


ticks_ran: list[datetime] = []


async def record_tick(name: str, scheduled_at: datetime) -> None:
    ticks_ran.append(scheduled_at)


class ShiftedClock:
    """Real time, shifted so that ``moment`` comes ``after`` seconds from now: the scheduler's own
    loop meets a tick in a fraction of a second."""

    manual = False

    def __init__(self, moment: datetime, after: float) -> None:
        self.offset = moment.timestamp() - (time.time() + after)

    def time(self) -> float:
        return time.time() + self.offset


async def test_a_tick_due_while_the_sqlite_file_stays_locked_runs_once_the_lock_clears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agent_unit._scheduler import Scheduler
    from agent_unit.stores.sqlite import SQLiteStore

    ticks_ran.clear()
    eight = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    store = SQLiteStore(tmp_path / "runs.db", busy_timeout_ms=300)  # a lock outlasts the store's own waiting
    tasks = {"digest": {"schedule": "0 8 * * *", "handler": f"{__name__}:record_tick"}}
    scheduler = Scheduler(tasks, store, clock=ShiftedClock(eight, after=0.5))
    with caplog.at_level(logging.INFO, logger="agent_unit.scheduler"):
        with write_lock(Path(store.path)):  # held across 08:00, ten times longer than busy_timeout
            loop = asyncio.ensure_future(scheduler.run_forever())
            await asyncio.sleep(3)
            assert ticks_ran == [] and scheduler.retrying
        deadline = time.monotonic() + 60
        while not ticks_ran:  # the next try, within the backoff's few seconds
            assert time.monotonic() < deadline, caplog.text
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    assert ticks_ran == [eight]
    assert "the scheduler cannot use the store (the sqlite store stayed locked" in caplog.text
    assert "waiting to be claimed: digest at 2026-03-02T08:00:00+00:00" in caplog.text
    assert "the scheduler can use the store again" in caplog.text
    await store.close()


def authorize_through_a_store_that_is_down(request: Any, action: str, run: Any) -> bool:
    """A user's ``authorize`` that reads a store of its own, which is down."""
    raise StoreUnavailable("the redis store cannot be reached: try again later")


@pytest.mark.parametrize(("method", "path"), [("GET", "/runs"), ("GET", "/ui/"), ("POST", "/mcp")])
async def test_every_route_answers_a_store_outage_with_503_and_retry_after(method: str, path: str) -> None:
    app = create_agent_unit(AGENTS, store="memory://", ui=True, authorize=authorize_through_a_store_that_is_down)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        answer = await http.request(method, path, headers=headers, json={} if method == "POST" else None)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "store_unavailable"
    assert int(answer.headers["retry-after"]) >= 1  # the client is told when to try again
    await app.engine.aclose()


async def test_a_store_that_accepts_connections_but_never_answers_fails_the_health_ping_in_its_seconds() -> None:
    """A hung store (a frozen server, a black-holed route) fails the engine's ping, which ``/healthz``
    answers 503 with, after the ping's seconds, not the driver's own timeouts (10 s for redis)."""
    stop = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await stop.wait()  # reads nothing, answers nothing
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = create_agent_unit(AGENTS, store=f"redis://127.0.0.1:{port}/0", background_sweep=False)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="did not answer"):
            await app.engine.ping(0.5)
        assert time.monotonic() - started < 3
    finally:
        stop.set()
        await app.engine.aclose()
        server.close()
        await server.wait_closed()
