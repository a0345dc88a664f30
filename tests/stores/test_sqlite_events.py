"""The SQLite store keeps the events of one write in one row; readers still see one event per seq."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent_unit import Run, define_agent
from agent_unit._records import JournalEntry, RunStatus
from agent_unit.errors import LeaseLost, RunConflict
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit

from .test_conformance import make_record

# The events table as schema version 1 made it: one event per row.
_VERSION_1 = """
CREATE TABLE runs (id TEXT PRIMARY KEY, agent TEXT NOT NULL, thread_id TEXT NOT NULL, status TEXT NOT NULL,
  version INTEGER NOT NULL, lease_owner TEXT, lease_expires REAL, due_at REAL, data TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX runs_due ON runs (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX runs_status ON runs (status, id);
CREATE INDEX runs_agent ON runs (agent, id);
CREATE INDEX runs_thread ON runs (thread_id, id);
CREATE TABLE journal (run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT, error TEXT, meta TEXT,
  PRIMARY KEY (run_id, key)) WITHOUT ROWID;
CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
CREATE TABLE state (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (scope, key))
  WITHOUT ROWID;
INSERT INTO events (run_id, seq, data) VALUES ('run_old', 1, '{"type":"RUN_STARTED"}'), ('run_old', 2, '{}');
PRAGMA user_version = 1;
"""


def event_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM events").fetchone()[0])


async def test_a_steps_started_and_finished_events_are_one_row_and_read_as_two_events(tmp_path: Path) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> int:
        for i in range(3):
            await run.step(f"s{i}", lambda: None)
        return 3

    path = tmp_path / "events.db"
    store = SQLiteStore(path)
    unit = create_test_unit({"a": agent}, store)
    record = await unit.run("a")
    events = await unit.events(record.id)
    assert [(event["seq"], event["type"]) for event in events] == list(
        enumerate(["RUN_STARTED", *["STEP_STARTED", "STEP_FINISHED"] * 3, "RUN_FINISHED"], 1)
    )
    assert event_rows(path) == 5  # RUN_STARTED, one row per step, RUN_FINISHED
    await store.close()


async def test_a_file_from_schema_version_1_keeps_its_events_and_takes_new_ones(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(_VERSION_1)
    store = SQLiteStore(path)
    try:
        assert [(event.seq, event.data) for event in await store.read_events("run_old")] == [
            (1, '{"type":"RUN_STARTED"}'),
            (2, "{}"),
        ]
        assert await store.last_seq("run_old") == 2
        record = make_record()
        assert await store.create_run(record, events=['{"a":1}', '{"b":2}']) == 2
        assert [(event.seq, event.data) for event in await store.read_events(record.id, after=1)] == [(2, '{"b":2}')]
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        index = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'runs_due'").fetchone()[0]
        assert "status != 'running'" in index


async def test_a_file_from_schema_version_2_leaves_running_runs_out_of_runs_due_and_finds_them_due(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.db"
    store = SQLiteStore(path)
    records = [
        make_record(status=RunStatus.running, due_at=10.0),
        make_record(status=RunStatus.sleeping, due_at=20.0, lease_owner=None),
        make_record(status=RunStatus.running, due_at=30.0),
    ]
    for record in records:
        await store.create_run(record)
    await store.close()
    with sqlite3.connect(path) as db:  # the index and version as version 2 left them
        db.execute("DROP INDEX runs_due")
        db.execute("CREATE INDEX runs_due ON runs (due_at) WHERE due_at IS NOT NULL")
        db.execute("PRAGMA user_version = 2")
    store = SQLiteStore(path)
    try:
        assert [run.id for run in await store.due_runs(before=25.0)] == [records[0].id, records[1].id]
        assert [run.id for run in await store.due_runs(before=99.0)] == [record.id for record in records]
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        index = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'runs_due'").fetchone()[0]
        assert index.endswith("WHERE due_at IS NOT NULL AND status != 'running'")  # the running runs left out


async def test_an_append_follows_events_another_connection_wrote_since(tmp_path: Path) -> None:
    """A store skips the seek for a run's last seq only while no other connection has written."""
    path = tmp_path / "tips.db"
    holder, other = SQLiteStore(path), SQLiteStore(path)
    record = make_record(lease_owner="a")
    await holder.create_run(record)
    assert await holder.append(record.id, owner="a", journal=[JournalEntry("s#0", "1")], events=["{}"] * 2) == 2
    assert await other.append(record.id, owner="a", events=["{}"] * 3) == 5  # another process, same lease
    assert await holder.append(record.id, owner="a", journal=[JournalEntry("s#1", "1")], events=["{}"] * 2) == 7
    seen = await other.load_run(record.id)
    assert seen is not None
    await other.save_run(seen, expected_version=seen.version, events=["{}"])
    assert await holder.append(record.id, owner="a", events=["{}"]) == 9
    assert await other.append(record.id, owner="a", events=["{}"]) == 10
    mine = await holder.load_run(record.id)
    assert mine is not None
    assert await holder.save_run(mine, expected_version=mine.version, events=["{}"] * 2) == 12
    assert [event.seq for event in await holder.read_events(record.id)] == list(range(1, 13))
    await holder.close()
    await other.close()


async def test_a_refused_append_leaves_no_gap_in_the_seqs(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "gap.db")
    record = make_record(lease_owner="a")
    await store.create_run(record)
    await store.append(record.id, owner="a", journal=[JournalEntry("s#0", "1")], events=["{}"])
    with pytest.raises(RunConflict):  # the same key again: nothing is written
        await store.append(
            record.id, owner="a", journal=[JournalEntry("x", "1"), JournalEntry("s#0", "1")], events=["{}"]
        )
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="b", events=["{}"])
    assert await store.append(record.id, owner="a", events=["{}"]) == 2
    assert [event.seq for event in await store.read_events(record.id)] == [1, 2]
    await store.close()


async def test_a_failure_after_a_commit_never_repeats_a_seq(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever raises after a commit (here the checkpoint request), the next write knows the last seq."""
    store = SQLiteStore(tmp_path / "after.db")
    record = make_record(lease_owner="a")
    await store.create_run(record)
    await store.append(record.id, owner="a", events=["{}"])

    def fails() -> None:
        raise RuntimeError("after the commit")

    monkeypatch.setattr(store, "_committed", fails)
    with pytest.raises(RuntimeError):
        await store.append(record.id, owner="a", events=["{}"] * 2)
    loaded = await store.load_run(record.id)
    assert loaded is not None
    with pytest.raises(RuntimeError):
        await store.save_run(loaded, expected_version=loaded.version, events=["{}"])
    monkeypatch.undo()
    assert await store.append(record.id, owner="a", events=["{}"]) == 5
    assert [event.seq for event in await store.read_events(record.id)] == [1, 2, 3, 4, 5]
    await store.close()


async def test_a_runs_next_append_by_the_same_owner_skips_the_fence_read(tmp_path: Path) -> None:
    """The fence passed at the last append holds while nothing has written the run's row since."""
    store = SQLiteStore(tmp_path / "fence.db")
    record = make_record(lease_owner="a")
    await store.create_run(record)
    await store.append(record.id, owner="a", journal=[JournalEntry("s#0", "1")], events=["{}"] * 2)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    await store.append(record.id, owner="a", journal=[JournalEntry("s#1", "1")], events=["{}"] * 2)
    await store.append(record.id, owner="a", events=["{}"])
    store._db.set_trace_callback(None)
    assert not [sql for sql in statements if "runs" in sql]
    assert [event.seq for event in await store.read_events(record.id)] == [1, 2, 3, 4, 5]
    await store.close()


async def test_a_fence_is_read_again_after_any_write_to_the_runs_row(tmp_path: Path) -> None:
    """Another connection's write, or this store's own save, renew or delete, makes the next append read the fence."""
    path = tmp_path / "fence.db"
    store, other = SQLiteStore(path), SQLiteStore(path)
    record = make_record(lease_owner="a")
    await store.create_run(record)
    await store.append(record.id, owner="a", journal=[JournalEntry("s#0", "1")], events=["{}"])
    # This store's own save hands the run to another owner: "a" is refused at once.
    mine = await store.load_run(record.id)
    assert mine is not None
    await store.save_run(mine.model_copy(update={"lease_owner": "b"}), expected_version=mine.version)
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="a", journal=[JournalEntry("s#1", "1")], events=["{}"])
    await store.append(record.id, owner="b", journal=[JournalEntry("s#1", "1")], events=["{}"])
    # Another connection parks the run: its holder's next append is refused.
    seen = await other.load_run(record.id)
    assert seen is not None
    await other.save_run(
        seen.model_copy(update={"status": RunStatus.interrupted, "lease_owner": None}), expected_version=seen.version
    )
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="b", events=["{}"])
    # A renewal that finds the lease gone, then a delete, leave nothing to skip the fence with.
    assert await store.renew_lease(record.id, owner="b", expires=200.0) is None
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="b", journal=[JournalEntry("s#2", "1")])
    assert await store.delete_run(record.id)
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="b", events=["{}"])
    assert [event.seq for event in await store.read_events(record.id)] == []
    assert list(await other.load_journal(record.id)) == []
    await store.close()
    await other.close()
