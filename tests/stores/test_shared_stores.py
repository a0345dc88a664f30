"""Two real server processes over one Redis, and over one PostgreSQL: exact, and nothing lost.

Every test runs against both stores, with real ``redis-server`` and ``postgres`` processes
and two uvicorn servers (A and B) sharing them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ..support import fetch
from ..support.server import Server

pytestmark = pytest.mark.slow  # starts real servers in subprocesses: left out of `make check`


ROUNDS = 50
OPTIONS = {"lease_ttl": "1s", "sweep_interval": "1s", "poll_interval": 5.0}
"""Short leases so recovery is quick; a long poll interval, so only the store's notifications can be fast."""


@pytest.fixture(params=["redis", "postgres"])
def shared_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def pair(shared_url: str, tmp_path: Path) -> Iterator[tuple[Server, Server, Path]]:
    effects = tmp_path / "effects.txt"
    env = {
        "TEST_AGENTS": "tests.support.process_agents:AGENTS",
        "TEST_OPTIONS": json.dumps(OPTIONS),
        "EFFECTS_FILE": str(effects),
    }
    a = Server(shared_url, env={**env, "HANG_IN_STEP_TWO": "1", "HANG_MARKER": str(tmp_path / "marker")}).start()
    b = Server(shared_url, env=env).start()
    yield a, b, effects
    a.stop()
    b.stop()


def _events(url: str, run_id: str, *, follow: bool = False, until: str = "RUN_FINISHED") -> list[dict[str, object]]:
    """Read the SSE stream of a run until an event of type ``until``; each event gets its arrival time."""
    found: list[dict[str, object]] = []
    query = "?follow=1" if follow else ""
    with fetch.stream("GET", f"{url}/runs/{run_id}/events{query}", timeout=30) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                event["arrived"] = time.time()
                found.append(event)
                if event["type"] == until:
                    break
    return found


def test_a_run_started_on_a_is_streamed_and_resumed_through_b(pair: tuple[Server, Server, Path]) -> None:
    a, b, effects = pair
    parked = fetch.post(f"{a.url}/agents/approval/runs?wait=1", json={"input": 7}, timeout=30).json()
    assert parked["status"] == "interrupted"
    with ThreadPoolExecutor(1) as pool:
        stream = pool.submit(_events, b.url, parked["id"], follow=True)
        time.sleep(0.3)  # the reader on B is waiting
        done = fetch.post(f"{b.url}/runs/{parked['id']}/resume?wait=1", json={"answer": "yes"}, timeout=30).json()
        seen = [event["type"] for event in stream.result(timeout=30)]
    assert done["status"] == "completed" and done["output"] == "approved yes"
    assert seen == ["RUN_STARTED", "RUN_INTERRUPTED", "RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    assert fetch.get(f"{a.url}/runs/{parked['id']}").json()["status"] == "completed"
    assert effects.read_text().splitlines() == [f"after-approval {parked['id']}"]


def test_a_and_b_resuming_the_same_run_at_once_exactly_one_wins(pair: tuple[Server, Server, Path]) -> None:
    a, b, effects = pair
    run_ids = [
        fetch.post(f"{a.url}/agents/approval/runs?wait=1", json={"input": i}, timeout=30).json()["id"]
        for i in range(ROUNDS)
    ]
    barrier = threading.Barrier(2)

    def resume(url: str, run_id: str) -> int:
        with fetch.Client(timeout=30) as client:
            barrier.wait()
            return client.post(f"{url}/runs/{run_id}/resume?wait=1", json={"answer": "yes"}).status_code

    with ThreadPoolExecutor(2) as pool:
        for run_id in run_ids:
            codes = sorted(pool.map(resume, [a.url, b.url], [run_id, run_id]))
            assert codes == [200, 409], (run_id, codes)
    # Each run's stream to its end first, then the effects: a 200 with ?wait=1 is the run as read when
    # its execution was handed on (a lease lapsed under load: leases are 1 s here), which may still run.
    for run_id in run_ids:
        events = [event["type"] for event in _events(b.url, run_id)]
        assert events.count("RUN_FINISHED") == 1 and events.count("STEP_FINISHED") == 1  # one "after" step, once
    assert Counter(effects.read_text().splitlines()) == Counter({f"after-approval {run_id}": 1 for run_id in run_ids})


def test_a_server_killed_mid_step_is_recovered_by_the_other(pair: tuple[Server, Server, Path], tmp_path: Path) -> None:
    a, b, effects = pair
    run_id = fetch.post(f"{a.url}/agents/crashable/runs", json={"input": None}, timeout=30).json()["id"]
    deadline = time.monotonic() + 30
    while not (tmp_path / "marker").exists():
        assert time.monotonic() < deadline, "A never reached step two"
        time.sleep(0.02)
    a.stop(signal.SIGKILL)
    while (record := fetch.get(f"{b.url}/runs/{run_id}").json())["status"] != "completed":
        assert time.monotonic() < deadline + 30, record
        time.sleep(0.1)
    assert record["output"] == "charged" and record["attempt"] == 2
    lines = effects.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["one", "two-start", "two-start", "two-done"]
    assert len({line.split()[1] for line in lines[1:]}) == 1  # step two re-ran under the same key


def test_a_reader_on_b_sees_events_written_by_a_without_polling(pair: tuple[Server, Server, Path]) -> None:
    a, b, _ = pair
    started = fetch.post(f"{a.url}/agents/ticker/runs", json={"input": 30}, timeout=30).json()
    remote = _events(b.url, started["id"], follow=True)
    local = _events(a.url, started["id"])  # the whole stream again, from A's own store handle
    ticks = [event for event in remote if event["type"] == "CUSTOM"]
    assert [tick["value"]["i"] for tick in ticks] == list(range(30))  # type: ignore[index]
    delays = [float(tick["arrived"]) - float(tick["value"]["at"]) for tick in ticks]  # type: ignore[index,arg-type]
    # B polls only every 5 s: every tick arriving well inside that came through the store's notification.
    assert max(delays) < 1.0, (statistics.median(delays), max(delays))
    assert len([event for event in local if event["type"] == "CUSTOM"]) == 30


@pytest.mark.parametrize("kind", ["redis", "postgres"])
async def test_the_store_restarting_loses_nothing(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's server restarts while one run is parked and another is executing."""
    from agent_unit import RunEngine, RunStatus
    from agent_unit.stores import open_store

    from ..support.process_agents import AGENTS
    from ..support.servers import PostgresServer, RedisServer

    effects = tmp_path / "effects.txt"
    monkeypatch.setenv("EFFECTS_FILE", str(effects))
    if kind == "redis":
        server: RedisServer | PostgresServer = RedisServer().start(keep_data=tmp_path)
        url = server.url
    else:
        server = PostgresServer().start()
        url = server.url
    engine = RunEngine(AGENTS, open_store(url), lease_ttl="1s", sweep_interval="1s")
    try:
        await engine.check_store()
        parked = await engine.start("approval", 1, wait=True)
        assert parked.status == RunStatus.interrupted
        running = await engine.start("plodder", 20)
        await asyncio.sleep(0.4)  # a few steps in
        server.stop()
        await asyncio.sleep(0.3)  # steps finishing now cannot be journaled
        server.start()

        done = await engine.resume(parked.id, "yes", wait=True)
        assert done.status == RunStatus.completed and done.output == "approved yes"
        engine.start_background()  # the sweep recovers the run that lost its store mid-step
        deadline = time.monotonic() + 30
        while (record := await engine.get(running.id)).status != RunStatus.completed:
            assert time.monotonic() < deadline, record
            await asyncio.sleep(0.1)
        assert record.output == 20 and record.attempt >= 2
    finally:
        await engine.aclose()
        await engine.store.close()
        if isinstance(server, PostgresServer):
            server.remove()
        else:
            server.stop()
    plods = [line.split() for line in effects.read_text().splitlines() if line.startswith("plod")]
    counts = Counter(int(i) for _, i, _ in plods)
    assert sorted(counts) == list(range(20))  # every step ran
    repeated = [i for i, n in counts.items() if n > 1]
    assert len(repeated) <= 1  # at most the step in flight when the store went away ran again...
    for i in repeated:
        assert len({key for _, j, key in plods if int(j) == i}) == 1  # ...under the same idempotency key
    assert effects.read_text().splitlines().count(f"after-approval {parked.id}") == 1


def test_a_peer_recovers_a_run_when_its_lease_lapses_not_at_its_next_sweep(shared_url: str, tmp_path: Path) -> None:
    effects, marker = tmp_path / "effects.txt", tmp_path / "marker"
    lease = 4.0
    # B sweeps once an hour: only a timer at the lease's expiry can recover the run in seconds.
    env = {
        "TEST_AGENTS": "tests.support.process_agents:AGENTS",
        "TEST_OPTIONS": json.dumps({"lease_ttl": f"{lease:g}s", "sweep_interval": "1h"}),
        "EFFECTS_FILE": str(effects),
    }
    b = Server(shared_url, env=env).start()
    # A's lease names a process of another machine, as a peer's would: B cannot see it end, only its lease lapse.
    a_env = {**env, "HANG_IN_STEP_TWO": "1", "HANG_MARKER": str(marker)}
    a_env["TEST_OPTIONS"] = json.dumps({**json.loads(env["TEST_OPTIONS"]), "owner": "peer-machine:7:1:1:a"})
    a = Server(shared_url, env=a_env).start()
    try:
        time.sleep(1)  # the run starts after B's first sweep, so B has not seen it then
        run_id = fetch.post(f"{a.url}/agents/crashable/runs", json={"input": None}, timeout=30).json()["id"]
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "A never reached step two"
            time.sleep(0.02)
        time.sleep(lease)  # A renews its lease meanwhile: B must follow the renewals
        a.stop(signal.SIGKILL)
        killed = time.monotonic()
        while (record := fetch.get(f"{b.url}/runs/{run_id}").json())["status"] != "completed":
            assert time.monotonic() - killed < lease + 3, f"B did not recover the run when its lease lapsed: {record}"
            time.sleep(0.05)
    finally:
        a.stop(signal.SIGKILL)
        b.stop()
    assert record["output"] == "charged" and record["attempt"] == 2
    lines = effects.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["one", "two-start", "two-start", "two-done"]
