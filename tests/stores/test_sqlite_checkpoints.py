"""The SQLite store checkpoints its WAL from a worker thread, and the WAL stays bounded."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from agent_unit._records import JournalEntry, RunStatus
from agent_unit.stores import _checkpoint
from agent_unit.stores.sqlite import SQLiteStore

from .test_conformance import make_record


async def running_run(store: SQLiteStore, run_id: str = "run_1", owner: str = "me") -> None:
    await store.create_run(make_record(id=run_id, status=RunStatus.running, lease_owner=owner, lease_expires=1e12))


async def steps(store: SQLiteStore, count: int, start: int = 0, run_id: str = "run_1") -> None:
    step = '{"type":"STEP_STARTED","stepName":"s","timestamp":1764547200000}'
    for i in range(start, start + count):
        await store.append(run_id, owner="me", journal=(JournalEntry(f"step:s#{i}", "1"),), events=(step, step))


def wal_frames(path: Path) -> int:
    """Frames the WAL file holds room for (it is reused, not shrunk, after a checkpoint)."""
    size = os.path.getsize(f"{path}-wal")
    with sqlite3.connect(path) as db:
        page = int(db.execute("PRAGMA page_size").fetchone()[0])
    return max(0, size - 32) // (page + 24)


async def test_checkpoints_run_on_the_worker_thread_not_in_the_writers_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    checkpoint = _checkpoint.WalCheckpointer._checkpoint

    def recorded(self: _checkpoint.WalCheckpointer) -> None:
        threads.append(threading.current_thread().name)
        checkpoint(self)

    monkeypatch.setattr(_checkpoint.WalCheckpointer, "_checkpoint", recorded)
    path = tmp_path / "wal.db"
    store = SQLiteStore(path)
    await running_run(store)
    # The writer's own autocheckpoint is only the backstop: far above what a step run writes here.
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == _checkpoint.BACKSTOP_PAGES
    await steps(store, 3 * _checkpoint.CHECKPOINT_EVERY)
    assert store._checkpoints is not None
    store._checkpoints.wait()
    assert store._checkpoints.checkpoints >= 1
    assert threads and all(name.startswith("agent-unit-sqlite-checkpoint") for name in threads)
    # The checkpoints kept the WAL far below the backstop: it was restarted, not grown.
    assert wal_frames(path) < _checkpoint.BACKSTOP_PAGES // 2
    await store.close()


async def test_the_wal_stays_bounded_when_writes_never_pause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A checkpoint thread that never catches up (here: never runs) leaves the bound to the
    # writer's backstop, as SQLite's default would be.
    monkeypatch.setattr(_checkpoint.WalCheckpointer, "request", lambda self: None)
    monkeypatch.setattr(_checkpoint, "BACKSTOP_PAGES", 600)
    monkeypatch.setattr("agent_unit.stores.sqlite.BACKSTOP_PAGES", 600)
    path = tmp_path / "bounded.db"
    store = SQLiteStore(path)
    await running_run(store)
    await steps(store, 1500)  # about 4,500 pages of WAL without a checkpoint
    assert wal_frames(path) < 2 * 600
    assert len(await store.load_journal("run_1")) == 1500
    await store.close()


async def test_a_closed_store_leaves_no_checkpoint_connection_and_its_data_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "closed.db"
    store = SQLiteStore(path)
    await running_run(store)
    await steps(store, _checkpoint.CHECKPOINT_EVERY + 10)
    checkpoints = store._checkpoints
    await store.close()
    assert checkpoints is not None and checkpoints._db is None
    checkpoints.request()  # a late request after close does nothing
    reopened = SQLiteStore(path)
    assert len(await reopened.load_journal("run_1")) == _checkpoint.CHECKPOINT_EVERY + 10
    await reopened.close()
