"""Two servers over one shared store, each with its own scheduler in its own process: a task due
every minute runs once per tick, never twice, and a tick whose server is killed mid-handler runs
again once, on another server. The test moves the servers' clocks."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_unit.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.slow  # starts real servers in subprocesses: left out of `make check`


ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 2, 8, 0, 20, tzinfo=UTC)


def server(store: str, ledger: Path, *, hang: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.scheduler_process", store, str(ledger)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HANG": "1" if hang else ""},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def shared_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind != "sqlite":
        return str(request.getfixturevalue(f"{kind}_url"))
    # The file is made before the servers start: this test is about ticks. Two processes creating
    # a new SQLite file at the same moment once failed to open it here (under heavy load); that
    # race is its own matter, not hidden by the claim this test proves.
    asyncio.run(SQLiteStore(tmp_path / "shared.db").close())
    return f"sqlite:///{tmp_path / 'shared.db'}"


def tell(servers: list[subprocess.Popen[str]], moment: datetime) -> int:
    """Move every server's clock to ``moment`` (all told before any answers: they race); the ticks won."""
    for process in servers:
        assert process.stdin is not None
        process.stdin.write(f"{moment.timestamp()}\n")
        process.stdin.flush()
    won = 0
    for process in servers:
        assert process.stdout is not None
        answer = process.stdout.readline().split()
        assert answer[0] == "ticked", answer
        won += int(answer[1])
    return won


def stop(servers: list[subprocess.Popen[str]]) -> None:
    for process in servers:
        assert process.stdin is not None
        process.stdin.close()
    for process in servers:
        process.wait(timeout=30)


@pytest.mark.parametrize("kind", ["redis", "postgres", "sqlite"])
def test_two_servers_run_each_tick_of_a_task_once(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    store = shared_store(kind, request, tmp_path)
    ledger = tmp_path / "ledger.txt"
    servers = [server(store, ledger), server(store, ledger)]
    won = 0
    try:
        for minute in range(6):
            won += tell(servers, T0 + timedelta(minutes=minute))
    finally:
        stop(servers)
    lines = ledger.read_text().splitlines()
    ticks = Counter(line.split()[1] for line in lines)
    expected = {(T0.replace(second=0) + timedelta(minutes=m)).isoformat() for m in range(6)}
    assert set(ticks) == expected
    assert max(ticks.values()) == 1, ticks  # never twice
    assert won == len(lines) == 6
    assert all(process.returncode == 0 for process in servers)


@pytest.mark.parametrize("kind", ["redis", "postgres", "sqlite"])
def test_a_tick_whose_server_is_killed_mid_handler_runs_again_once_on_another_server(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = shared_store(kind, request, tmp_path)
    ledger = tmp_path / "ledger.txt"
    doomed = server(store, ledger, hang=True)
    assert doomed.stdin is not None
    doomed.stdin.write(f"{T0.timestamp()}\n")  # it claims the 08:00 tick and hangs in the handler
    doomed.stdin.flush()
    deadline = time.monotonic() + 60
    while not (ledger.exists() and ledger.read_text()):
        assert time.monotonic() < deadline and doomed.poll() is None, "the handler never started"
        time.sleep(0.05)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=30)
    servers = [server(store, ledger), server(store, ledger)]  # another server, and the killed one restarted
    try:
        assert tell(servers, T0 + timedelta(seconds=30)) == 0  # the dead claimant's lease still runs
        after_lease = T0 + timedelta(seconds=20 + 61)
        assert tell(servers, after_lease) == 2  # the 08:00 tick taken over, and the 08:01 tick
        assert tell(servers, after_lease + timedelta(minutes=1)) == 1  # only 08:02: 08:00 is done
    finally:
        stop(servers)
    lines = [line.split() for line in ledger.read_text().splitlines()]
    first = T0.replace(second=0)
    at_eight = [pid for _, tick, pid in lines if tick == first.isoformat()]
    assert len(at_eight) == 2 and at_eight[0] == str(doomed.pid) and at_eight[1] != str(doomed.pid)
    ticks = Counter(tick for _, tick, _ in lines)
    assert ticks == {
        first.isoformat(): 2,
        (first + timedelta(minutes=1)).isoformat(): 1,
        (first + timedelta(minutes=2)).isoformat(): 1,
    }
