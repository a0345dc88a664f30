"""The store conformance suite: every store must pass it, unchanged, to ship.

Written against the protocol only; ``store_factory`` (tests/conftest.py) gives each store.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from agent_unit._ids import new_id
from agent_unit._records import JournalEntry, RunRecord, RunStatus
from agent_unit.errors import LeaseLost, RunConflict, RunNotFound, StoreUnavailable, StoreValueError
from agent_unit.stores import Store
from agent_unit.stores.urls import safe_url

from ..conftest import StoreFactory

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def make_record(**fields: object) -> RunRecord:
    values: dict[str, object] = {
        "id": new_id("run"),
        "agent": "refund",
        "thread_id": "t1",
        "status": RunStatus.running,
        "input": {"order_id": "o_1"},
        "created_at": NOW,
        "updated_at": NOW,
        "version": 1,
        "lease_owner": "a",
        "lease_expires": 100.0,
        "due_at": 100.0,
    }
    values.update(fields)
    return RunRecord.model_validate(values)


async def test_create_and_load_round_trip(store: Store) -> None:
    record = make_record(usage=[{"provider": "p", "model": "m", "inputTokens": 3}])
    assert await store.create_run(record, events=['{"type":"RUN_STARTED"}']) == 1
    loaded = await store.load_run(record.id)
    assert loaded == record
    assert await store.load_run("run_missing") is None


async def test_a_runs_trace_context_is_kept_through_create_save_and_every_read(store: Store) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    record = make_record(trace={"traceparent": traceparent, "tracestate": "k=v"})
    await store.create_run(record)
    assert (await store.load_run(record.id)).trace == record.trace  # type: ignore[union-attr]
    record.status = RunStatus.interrupted
    await store.save_run(record, expected_version=1)
    listed = (await store.list_runs()).runs
    assert [run.trace for run in listed if run.id == record.id] == [record.trace]
    assert "trace" not in record.public()  # bookkeeping, like the lease: not in the API's record


async def test_create_refuses_an_existing_id(store: Store) -> None:
    record = make_record()
    await store.create_run(record)
    with pytest.raises(RunConflict):
        await store.create_run(record)


async def test_save_is_compare_and_set(store: Store) -> None:
    record = make_record()
    await store.create_run(record)
    record.status = RunStatus.interrupted
    await store.save_run(record, expected_version=1)
    assert (await store.load_run(record.id)).version == 2  # type: ignore[union-attr]
    stale = record.model_copy(update={"status": RunStatus.cancelled})
    with pytest.raises(RunConflict):
        await store.save_run(stale, expected_version=1)
    loaded = await store.load_run(record.id)
    assert loaded is not None and loaded.status == RunStatus.interrupted and loaded.version == 2
    with pytest.raises(RunNotFound):
        await store.save_run(make_record(), expected_version=1)


async def test_a_failed_save_writes_nothing(store: Store) -> None:
    record = make_record()
    await store.create_run(record, events=["{}"])
    with pytest.raises(RunConflict):
        await store.save_run(record, expected_version=7, journal=[JournalEntry("k", "1")], events=["{}"])
    assert await store.load_journal(record.id) == {}
    assert [event.seq for event in await store.read_events(record.id)] == [1]


async def test_two_handles_racing_one_version_exactly_one_wins(store_factory: StoreFactory) -> None:
    first, second = store_factory(), store_factory()
    record = make_record()
    await first.create_run(record)
    results = []
    for handle in (first, second):
        try:
            await handle.save_run(record, expected_version=1, journal=[JournalEntry("interrupt:x#0", "true")])
            results.append("won")
        except RunConflict:
            results.append("conflict")
    assert sorted(results) == ["conflict", "won"]
    assert list(await first.load_journal(record.id)) == ["interrupt:x#0"]


async def test_append_is_fenced_by_the_lease(store: Store) -> None:
    record = make_record(lease_owner="a")
    await store.create_run(record)
    await store.append(record.id, owner="a", journal=[JournalEntry("step:a#0", "1")], events=["{}"])
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="b", journal=[JournalEntry("step:b#0", "2")])
    record.lease_owner = "b"
    await store.save_run(record, expected_version=1)
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="a", events=["{}"])
    record.status = RunStatus.cancelled
    await store.save_run(record, expected_version=2)
    with pytest.raises(LeaseLost):
        await store.append(record.id, owner="b", events=["{}"])
    with pytest.raises(LeaseLost):  # the owner of a run that is no longer running
        await store.append(record.id, owner="b", journal=[JournalEntry("step:c#0", "3")])
    assert list(await store.load_journal(record.id)) == ["step:a#0"]


async def test_journal_keys_are_unique(store: Store) -> None:
    record = make_record()
    await store.create_run(record)
    await store.append(record.id, owner="a", journal=[JournalEntry("step:a#0", "1")])
    with pytest.raises(RunConflict):
        await store.append(record.id, owner="a", journal=[JournalEntry("step:a#0", "2")], events=["{}"])
    journal = await store.load_journal(record.id)
    assert journal["step:a#0"].value == "1"
    assert await store.read_events(record.id) == []


async def test_journal_entries_keep_values_errors_and_meta(store: Store) -> None:
    record = make_record()
    await store.create_run(record)
    entries = [
        JournalEntry("step:ok#0", '{"a":[1,2]}', meta={"hash": "abc"}),
        JournalEntry("step:bad#0", error={"type": "builtins.ValueError", "message": "no", "step": "bad"}),
    ]
    await store.append(record.id, owner="a", journal=entries)
    assert await store.load_journal(record.id) == {entry.key: entry for entry in entries}


async def test_seqs_strictly_increase_across_every_kind_of_write(store: Store) -> None:
    record = make_record()
    await store.create_run(record, events=["{}", "{}"])
    await store.append(record.id, owner="a", events=["{}"])
    await store.append(record.id, owner="a", journal=[JournalEntry("k", "1")])  # no events: no seq
    record.status = RunStatus.interrupted
    last = await store.save_run(record, expected_version=1, events=["{}", "{}"])
    assert last == 5
    assert [event.seq for event in await store.read_events(record.id)] == [1, 2, 3, 4, 5]
    assert [event.seq for event in await store.read_events(record.id, after=3)] == [4, 5]
    assert [event.seq for event in await store.read_events(record.id, after=1, limit=2)] == [2, 3]
    assert await store.last_seq(record.id) == 5
    assert await store.last_seq("run_missing") == 0


async def test_each_event_of_one_write_reads_back_as_written_under_its_own_seq(store: Store) -> None:
    # A store may keep the events of one write together (SQLite keeps them in one row); readers
    # still get each event, exactly as written, under its own seq, from any point.
    record = make_record()
    await store.create_run(record, events=['{"type":"RUN_STARTED"}'])
    await store.append(record.id, owner="a", journal=[JournalEntry("k", "1")], events=['{"a":1}', '{"b":"x"}'])
    await store.append(record.id, owner="a", events=['{\n  "c": 2\n}', '{"d":3}', "{}"])  # an event holding a newline
    written = ['{"type":"RUN_STARTED"}', '{"a":1}', '{"b":"x"}', '{\n  "c": 2\n}', '{"d":3}', "{}"]
    assert [(event.seq, event.data) for event in await store.read_events(record.id)] == list(enumerate(written, 1))
    for after in range(7):
        for limit in (None, 1, 2):
            expected = list(enumerate(written, 1))[after:][:limit]
            read = await store.read_events(record.id, after=after, limit=limit)
            assert [(event.seq, event.data) for event in read] == expected, (after, limit)


async def test_concurrent_appends_never_repeat_a_seq(store_factory: StoreFactory) -> None:
    handles = [store_factory() for _ in range(3)]
    record = make_record()
    await handles[0].create_run(record)

    async def writer(handle: Store, n: int) -> None:
        for i in range(50):
            await handle.append(record.id, owner="a", journal=[JournalEntry(f"w{n}:{i}", "1")], events=["{}"] * 2)
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(handle, n) for n, handle in enumerate(handles)))
    seqs = [event.seq for event in await handles[0].read_events(record.id)]
    assert seqs == list(range(1, 301))


async def test_renew_lease_bumps_the_version(store: Store) -> None:
    record = make_record(lease_owner="a")
    await store.create_run(record)
    assert await store.renew_lease(record.id, owner="a", expires=500.0) == 2
    loaded = await store.load_run(record.id)
    assert loaded is not None and loaded.lease_expires == 500.0 and loaded.due_at == 500.0 and loaded.version == 2
    assert await store.renew_lease(record.id, owner="b", expires=900.0) is None
    assert await store.renew_lease("run_missing", owner="a", expires=900.0) is None


async def test_a_takeover_read_before_a_renewal_loses(store_factory: StoreFactory) -> None:
    holder, taker = store_factory(), store_factory()
    record = make_record(lease_owner="a", lease_expires=10.0, due_at=10.0)
    await holder.create_run(record)
    seen = await taker.load_run(record.id)  # the sweep sees a lapsed lease...
    assert seen is not None
    await holder.renew_lease(record.id, owner="a", expires=40.0)  # ...but the holder renews first
    seen.lease_owner = "b"
    with pytest.raises(RunConflict):
        await taker.save_run(seen, expected_version=seen.version)
    loaded = await holder.load_run(record.id)
    assert loaded is not None and loaded.lease_owner == "a"


async def test_due_runs_reads_only_what_is_due(store: Store) -> None:
    records = [
        make_record(status=RunStatus.sleeping, due_at=50.0, lease_owner=None),
        make_record(status=RunStatus.running, due_at=10.0),
        make_record(status=RunStatus.interrupted, due_at=None, lease_owner=None),
        make_record(status=RunStatus.sleeping, due_at=500.0, lease_owner=None),
        make_record(status=RunStatus.running, due_at=55.0),
        make_record(status=RunStatus.interrupted, due_at=5.0, lease_owner=None),
        make_record(status=RunStatus.running, due_at=700.0),
    ]
    for record in records:
        await store.create_run(record)
    due = await store.due_runs(before=60.0)
    assert [record.id for record in due] == [records[i].id for i in (5, 1, 0, 4)]
    assert [record.id for record in await store.due_runs(before=60.0, limit=1)] == [records[5].id]
    assert [record.id for record in await store.due_runs(before=60.0, limit=2)] == [records[5].id, records[1].id]
    # a running run's due time moves with its lease; a run parked is due as its new status says
    assert await store.renew_lease(records[1].id, owner="a", expires=600.0) is not None
    parked = records[4].model_copy(update={"status": RunStatus.sleeping, "due_at": 1.0, "lease_owner": None})
    await store.save_run(parked, expected_version=records[4].version)
    due = await store.due_runs(before=60.0)
    assert [record.id for record in due] == [records[i].id for i in (4, 5, 0)]
    assert [record.id for record in await store.due_runs(before=650.0)] == [records[i].id for i in (4, 5, 0, 3, 1)]


async def test_list_filters_and_pages_newest_first(store: Store) -> None:
    created = []
    for i in range(5):
        record = make_record(
            agent="a" if i % 2 else "b",
            thread_id=f"t{i % 2}",
            status=RunStatus.interrupted if i < 3 else RunStatus.completed,
        )
        await store.create_run(record)
        created.append(record.id)
        await asyncio.sleep(0.002)  # ids sort by creation time in milliseconds
    page = await store.list_runs(limit=2)
    assert [run.id for run in page.runs] == created[::-1][:2]
    rest = await store.list_runs(limit=10, cursor=page.next_cursor)
    assert [run.id for run in rest.runs] == created[::-1][2:] and rest.next_cursor is None
    assert {run.id for run in (await store.list_runs(status=RunStatus.interrupted)).runs} == set(created[:3])
    assert {run.id for run in (await store.list_runs(agent="a")).runs} == {created[1], created[3]}
    assert {run.id for run in (await store.list_runs(thread_id="t0", agent="b")).runs} == {
        created[0],
        created[2],
        created[4],
    }


async def test_delete_removes_run_journal_and_events(store: Store) -> None:
    record = make_record()
    await store.create_run(record, events=["{}"])
    await store.append(record.id, owner="a", journal=[JournalEntry("k", "1")])
    assert await store.delete_run(record.id)
    assert await store.load_run(record.id) is None
    assert await store.load_journal(record.id) == {}
    assert await store.read_events(record.id) == []
    assert not await store.delete_run(record.id)


async def test_state(store: Store) -> None:
    assert await store.get_state("thread:t1", "k") is None
    await store.set_state("thread:t1", "k", "1")
    await store.set_state("thread:t1", "k", "2")
    await store.set_state("app", "k", "3")
    assert await store.get_state("thread:t1", "k") == "2"
    assert await store.get_state("app", "k") == "3"
    await store.delete_state("thread:t1", "k")
    assert await store.get_state("thread:t1", "k") is None
    await store.delete_state("thread:t1", "missing")


async def test_url_has_no_password(store: Store) -> None:
    assert isinstance(store.url, str) and urlsplit(store.url).password in (None, "***")


def test_safe_url_hides_passwords() -> None:
    assert safe_url("redis://:s3cret@cache:6379/0") == "redis://***@cache:6379/0"
    assert safe_url("postgresql://app:s3cret@db/runs?sslmode=require") == "postgresql://***@db/runs?sslmode=require"
    assert safe_url("postgresql://app@db/runs") == "postgresql://***@db/runs"
    assert safe_url("sqlite:///runs.db") == "sqlite:///runs.db"
    assert safe_url("redis://cache:6379/0?password=s3cret&db=1") == "redis://cache:6379/0?password=***&db=1"
    assert safe_url("postgresql://app@db/runs?sslmode=require&password=s3cret") == (
        "postgresql://***@db/runs?sslmode=require&password=***"
    )


# -- scheduled tasks ------------------------------------------------------------------------------


TICK = 1_767_225_600.0  # 2026-01-01 00:00 UTC
LEASE = 60.0


async def connected(handles: list[Store]) -> list[Store]:
    for handle in handles:  # each handle connected first: a DynamoDB table is made once
        check = getattr(handle, "check", None)
        if check is not None:
            await check()
    return handles


async def close_all(handles: list[Store]) -> None:
    for handle in {id(h): h for h in handles}.values():
        await handle.close()


async def test_a_tick_is_claimed_once_across_handles(store_factory: StoreFactory) -> None:
    handles = await connected([store_factory(), store_factory(), store_factory()])
    claims = (
        handle.claim_tick("digest", TICK, f"server-{i}", now=TICK, expires=TICK + LEASE)
        for i, handle in enumerate(handles)
    )
    won = await asyncio.gather(*claims)
    assert sorted(won) == [False, False, True]
    assert not await handles[0].claim_tick("digest", TICK, "late", now=TICK + 1, expires=TICK + 61)
    # the next tick, and the same tick of another task, are claims of their own
    assert await handles[1].claim_tick("digest", TICK + 60, "server-1", now=TICK, expires=TICK + LEASE)
    assert await handles[2].claim_tick("cleanup", TICK, "server-2", now=TICK, expires=TICK + LEASE)
    await close_all(handles)


async def test_a_lapsed_tick_claim_is_taken_over_once_and_its_old_holder_can_no_longer_renew_or_finish_it(
    store_factory: StoreFactory,
) -> None:
    handles = await connected([store_factory(), store_factory(), store_factory()])
    assert await handles[0].claim_tick("digest", TICK, "dead", now=TICK, expires=TICK + LEASE)
    assert await handles[1].lapsed_ticks("digest", since=TICK - 3600, now=TICK + LEASE - 1) == []
    assert not await handles[1].claim_tick("digest", TICK, "early", now=TICK + LEASE - 1, expires=TICK + 2 * LEASE)
    later = TICK + LEASE + 1  # the holder died: its lease lapsed
    assert await handles[1].lapsed_ticks("digest", since=TICK - 3600, now=later) == [TICK]
    claims = (
        handle.claim_tick("digest", TICK, f"server-{i}", now=later, expires=later + LEASE)
        for i, handle in enumerate(handles)
    )
    won = await asyncio.gather(*claims)
    assert sorted(won) == [False, False, True]
    winner = f"server-{won.index(True)}"
    assert await handles[0].lapsed_ticks("digest", since=TICK - 3600, now=later) == []  # held again
    assert not await handles[0].renew_tick("digest", TICK, "dead", expires=later + 600)
    assert not await handles[0].finish_tick("digest", TICK, "dead")
    assert await handles[2].renew_tick("digest", TICK, winner, expires=later + 600)
    assert not await handles[2].claim_tick("digest", TICK, "other", now=later + LEASE + 1, expires=later + 700)
    assert await handles[1].finish_tick("digest", TICK, winner)
    await close_all(handles)


async def test_a_finished_tick_is_never_claimed_again_nor_renewed(store: Store) -> None:
    assert await store.claim_tick("digest", TICK, "a", now=TICK, expires=TICK + LEASE)
    assert await store.finish_tick("digest", TICK, "a")
    much_later = TICK + 86_400
    assert await store.lapsed_ticks("digest", since=TICK - 1, now=much_later) == []
    assert not await store.claim_tick("digest", TICK, "b", now=much_later, expires=much_later + LEASE)
    assert not await store.renew_tick("digest", TICK, "a", expires=much_later + LEASE)
    assert not await store.finish_tick("digest", TICK, "a")  # once
    assert not await store.finish_tick("digest", TICK + 60, "a")  # never claimed


async def test_lapsed_ticks_lists_one_tasks_unfinished_lapsed_claims_since_a_time_oldest_first(store: Store) -> None:
    for minutes in (3, 0, 1, 2):
        at = TICK + 60 * minutes
        assert await store.claim_tick("beat", at, "a", now=at, expires=at + LEASE)
    assert await store.claim_tick("other", TICK, "a", now=TICK, expires=TICK + LEASE)
    assert await store.finish_tick("beat", TICK + 120, "a")
    assert await store.renew_tick("beat", TICK + 180, "a", expires=TICK + 3600)
    listed = await store.lapsed_ticks("beat", since=TICK + 60, now=TICK + 600)
    assert listed == [TICK + 60]  # not before since, not finished, not still leased, not another task's
    assert await store.lapsed_ticks("beat", since=TICK, now=TICK + 600) == [TICK, TICK + 60]


LONE = "a\ud800b"  # a lone surrogate: a Python str that is not valid Unicode text, so no store can encode it

_BAD_WRITES = {
    "a journal value": lambda store, run: store.append(run.id, owner="a", journal=[JournalEntry("k", LONE)]),
    "a journal error": lambda store, run: store.append(
        run.id, owner="a", journal=[JournalEntry("k", error={"type": "ValueError", "message": LONE})]
    ),
    "a journal key": lambda store, run: store.append(run.id, owner="a", journal=[JournalEntry(LONE, "1")]),
    "an event": lambda store, run: store.append(run.id, owner="a", events=["{}", LONE]),
    "a saved output": lambda store, run: store.save_run(
        run.model_copy(update={"output": LONE, "status": RunStatus.completed}),
        expected_version=1,
        journal=[JournalEntry("k", "1")],
        events=["{}"],
    ),
    "a saved event": lambda store, run: store.save_run(run, expected_version=1, events=[LONE]),
    "a new run's thread": lambda store, run: store.create_run(make_record(id="run_bad", thread_id=LONE)),
    "a new run's input": lambda store, run: store.create_run(make_record(id="run_bad", input={"x": LONE})),
    "a new run's event": lambda store, run: store.create_run(make_record(id="run_bad"), events=[LONE]),
    "a state value": lambda store, run: store.set_state("app", "k", LONE),
    "a state key": lambda store, run: store.set_state("app", LONE, "1"),
}


@pytest.mark.parametrize("where", list(_BAD_WRITES))
async def test_a_value_that_is_not_valid_unicode_is_a_value_error_and_writes_nothing(store: Store, where: str) -> None:
    record = make_record()
    await store.create_run(record, events=["{}"])
    with pytest.raises(StoreValueError, match="not valid Unicode") as caught:
        await _BAD_WRITES[where](store, record)
    assert not isinstance(caught.value, StoreUnavailable)  # the value's fault: the run's error, never an outage
    assert await store.load_run(record.id) == record
    assert await store.load_journal(record.id) == {}
    assert [event.seq for event in await store.read_events(record.id)] == [1]
    assert await store.load_run("run_bad") is None
    assert await store.get_state("app", "k") is None
    # the store still works, and the next seq follows the last one stored: none was spent
    assert await store.append(record.id, owner="a", journal=[JournalEntry("k", "1")], events=["{}"]) == 2


async def test_reading_after_a_seq_beyond_any_integer_reads_nothing(store: Store) -> None:
    record = make_record()
    await store.create_run(record, events=["{}"])
    assert await store.read_events(record.id, after=2**70) == []
