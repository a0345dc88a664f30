"""The D1 store's own guarantees beyond the conformance suite (which holds it to the protocol)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_unit._records import JournalEntry, RunStatus
from agent_unit.errors import RunConflict, StoreConfigError, StoreUnavailable
from agent_unit.hosts.cloudflare.d1_store import D1Store
from agent_unit.stores import open_store

from ...stores.test_conformance import make_record
from .d1_sim import D1Database, D1Error


async def test_a_batch_in_the_simulation_is_one_transaction_rolled_back_whole(tmp_path: Path) -> None:
    database = D1Database(tmp_path / "d1.db")
    await database.exec("CREATE TABLE t (k TEXT PRIMARY KEY)")
    insert = database.prepare("INSERT INTO t (k) VALUES (?)")
    with pytest.raises(D1Error, match="UNIQUE constraint failed"):
        await database.batch([insert.bind("a"), insert.bind("b"), insert.bind("a")])
    assert (await database.prepare("SELECT count(*) AS n FROM t").first("n")) == 0


async def test_every_write_is_one_round_trip_to_d1(tmp_path: Path) -> None:
    database = D1Database(tmp_path / "d1.db")
    store = D1Store(database)
    record = make_record()
    await store.create_run(record, events=["{}"])  # the first call also makes the tables
    before = database.calls
    await store.append(record.id, owner="a", journal=[JournalEntry("step:a#0", "1", None, None)], events=["{}", "{}"])
    await store.save_run(record, expected_version=1, journal=[JournalEntry("k", None, None, None)], events=["{}"])
    assert database.calls - before == 2
    assert [event.seq for event in await store.read_events(record.id)] == [1, 2, 3, 4]


async def test_running_runs_are_left_out_of_runs_due_and_still_found_due(tmp_path: Path) -> None:
    """A lease renewal moves a running run's due time: kept out of ``runs_due``, it is one index row
    fewer that D1 bills per renewal, creation and park. A database made before keeps its wider index."""
    database = D1Database(tmp_path / "d1.db")
    store = D1Store(database)
    running = make_record(status=RunStatus.running, due_at=10.0)
    sleeping = make_record(status=RunStatus.sleeping, due_at=20.0, lease_owner=None)
    for record in (running, sleeping):
        await store.create_run(record)
    index = database.connection.execute("SELECT sql FROM sqlite_schema WHERE name = 'runs_due'").fetchone()[0]
    assert index.endswith("WHERE due_at IS NOT NULL AND status != 'running'")
    assert [run.id for run in await store.due_runs(before=99.0)] == [running.id, sleeping.id]

    database.connection.executescript(  # the index as databases made before have it
        "DROP INDEX runs_due; CREATE INDEX runs_due ON runs (due_at) WHERE due_at IS NOT NULL"
    )
    assert [run.id for run in await D1Store(database).due_runs(before=99.0)] == [running.id, sleeping.id]
    assert [run.id for run in await D1Store(database).due_runs(before=99.0, limit=1)] == [running.id]


async def test_a_conflict_on_d1_names_the_run_and_is_not_an_outage(tmp_path: Path) -> None:
    store = D1Store(D1Database(tmp_path / "d1.db"))
    record = make_record()
    await store.create_run(record)
    with pytest.raises(RunConflict, match=record.id) as caught:
        await store.save_run(record, expected_version=5)
    assert not isinstance(caught.value, StoreUnavailable)


def test_a_worker_without_the_binding_is_told_to_add_it_to_wrangler() -> None:
    with pytest.raises(StoreConfigError, match="d1_databases"):
        D1Store(None, binding="RUNS_DB")


def test_a_d1_url_outside_a_worker_says_only_a_worker_has_the_binding() -> None:
    with pytest.raises(StoreConfigError, match="--preset cloudflare"):
        open_store("d1://DB")
