"""Two processes opening a new SQLite store at once both open it (two servers of a rolling deploy,
or ``--workers 2``, starting together on a fresh file): neither fails with "database is locked"."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPEN_AT = """
import sys, time
from agent_unit.stores.sqlite import SQLiteStore
start, folder, count = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(count):  # both processes open file i at the same instant
    time.sleep(max(0.0, start + i * 0.05 - time.time()))
    SQLiteStore(f"{folder}/{i}.db")
"""


def test_two_processes_opening_a_fresh_store_together_both_open_it(tmp_path: Path) -> None:
    count = 40  # without the wait for the WAL switch, about one open in six failed here
    start = time.time() + 3  # after both have imported the store
    argv = [sys.executable, "-c", OPEN_AT, str(start), str(tmp_path), str(count)]
    processes = [subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    failures = [err for process in processes if (err := process.communicate(timeout=120)[1]) or process.returncode]
    assert not failures, failures[0][-600:]
    assert sorted(path.name for path in tmp_path.glob("*.db")) == sorted(f"{i}.db" for i in range(count))
