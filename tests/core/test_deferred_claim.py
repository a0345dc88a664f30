"""A resume that waits writes its claim with the execution's first write (``DeferredClaim``).

What must hold: the answer is saved before any new work runs, before a state write, and at the
latest after ``CLAIM_WAIT``; a resume that only replays is one write; a resume that loses its
race saves nothing and is refused, even when the winner parked at the next interrupt; a store
outage before the write is an error and the run still waits for its answer; a shutdown hands the
run on with its answer saved; a framework's agent is claimed before it runs, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import agent_unit._execution
from agent_unit import NotInterrupted, Run, RunConflict, RunEngine, RunStatus, define_agent
from agent_unit._agent import Agent
from agent_unit._clock import ManualClock
from agent_unit._records import JournalEntry, RunRecord
from agent_unit.errors import StoreUnavailable
from agent_unit.stores.sqlite import SQLiteStore

EFFECTS: list[str] = []
HOLD: dict[str, asyncio.Event] = {}  # run id -> what the agent waits for after its answer, outside any step
SEEN: dict[str, tuple[str, list[str]]] = {}  # run id -> (stored status, journal keys) as a step found them
STORES: list[SQLiteStore] = []  # the store the test opened last, for a step to read


class CountingStore(SQLiteStore):
    """The SQLite store, counting the writes of an execution; ``refuse`` fails the next save_run."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.saves = 0
        self.appends = 0
        self.refuse = False

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        if self.refuse:
            self.refuse = False
            raise StoreUnavailable("the store is out of reach")
        self.saves += 1
        return await super().save_run(record, expected_version=expected_version, journal=journal, events=events)

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        self.appends += 1
        return await super().append(run_id, owner=owner, journal=journal, events=events)


@define_agent
async def approve(input: None, run: Run) -> str:
    await run.step("work", lambda: 1)
    approved = await run.interrupt("approve", answer=bool)
    return "ok" if approved else "declined"


@define_agent
async def charge(input: None, run: Run) -> str:
    answer = await run.interrupt("approve", answer=str)
    store = STORES[-1]

    async def pay() -> str:  # reads what the store holds while the new work runs
        record = await store.load_run(run.id)
        assert record is not None
        SEEN[run.id] = (record.status.value, sorted(await store.load_journal(run.id)))
        EFFECTS.append(f"{run.id} {answer}")
        return answer

    return await run.step("pay", pay)


@define_agent
async def twice(input: None, run: Run) -> list[str]:
    first = await run.interrupt("approve", answer=str)
    second = await run.interrupt("approve", answer=str)
    return [first, second]


@define_agent
async def keeps(input: None, run: Run) -> str:
    answer = await run.interrupt("approve", answer=str)
    await run.state.set("answer", answer)  # a write outside the journal
    await HOLD[run.id].wait()
    return answer


@define_agent
async def holds(input: None, run: Run) -> str:
    answer = await run.interrupt("approve", answer=str)
    await HOLD[run.id].wait()  # not a step: nothing in the journal, no write
    return await run.step("after", lambda: EFFECTS.append(f"{run.id} {answer}") or answer)


async def _framed(input: None, run: Run) -> bool:
    return bool(await run.interrupt("approve", answer=bool))


@define_agent
async def deadline(input: None, run: Run) -> str:
    return "ok" if await run.interrupt("approve", answer=bool, timeout=0.5, default=False) else "declined"


framed = Agent(_framed, name="framed")
framed.framework = "some-framework"  # as an adapter's agent says; its adapter may write outside the journal

AGENTS = {
    "approve": approve,
    "charge": charge,
    "holds": holds,
    "twice": twice,
    "keeps": keeps,
    "framed": framed,
    "deadline": deadline,
}


def _engine(store: SQLiteStore) -> RunEngine:
    STORES.append(store)
    return RunEngine(AGENTS, store, background_sweep=False)


async def _resuming(engine: RunEngine, run_id: str, answer: str) -> asyncio.Future[RunRecord]:
    """A waited resume, given time to replay up to where its agent holds (its claim unwritten)."""
    resuming = asyncio.ensure_future(engine.resume(run_id, answer, wait=True))
    await asyncio.sleep(0.05)
    return resuming


async def _parked(engine: RunEngine, agent: str) -> RunRecord:
    record = await engine.start(agent, None, wait=True)
    assert record.status == RunStatus.interrupted
    HOLD[record.id] = asyncio.Event()
    return record


async def test_a_waited_resume_that_replays_to_its_end_writes_once(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "approve")
    store.saves = store.appends = 0
    done = await engine.resume(parked.id, True, wait=True)
    assert done.status == RunStatus.completed and done.output == "ok"
    assert (store.saves, store.appends) == (1, 0)  # the claim, the answer and the end: one transaction
    stored = await store.load_run(parked.id)
    assert stored is not None and stored.status == RunStatus.completed and stored.version == done.version
    assert sorted(await store.load_journal(parked.id)) == ["interrupt:approve#0", "step:work#0"]
    types = [event.to_dict()["type"] for event in await engine.events(parked.id)]
    assert types[-2:] == ["RUN_STARTED", "RUN_FINISHED"]
    await engine.aclose()


async def test_a_waited_resume_saves_the_answer_before_any_new_work_runs(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "charge")
    done = await engine.resume(parked.id, "yes", wait=True)
    assert done.status == RunStatus.completed and done.output == "yes"
    assert SEEN[parked.id] == ("running", ["interrupt:approve#0"])
    await engine.aclose()


async def test_a_waited_resume_saves_the_answer_within_the_claim_wait_while_its_agent_does_other_things(
    tmp_path: Path,
) -> None:
    store = CountingStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "holds")
    resuming = asyncio.ensure_future(engine.resume(parked.id, "yes", wait=True))
    for _ in range(200):  # CLAIM_WAIT is 50 ms
        await asyncio.sleep(0.01)
        stored = await store.load_run(parked.id)
        assert stored is not None
        if stored.status == RunStatus.running:
            break
    assert stored.status == RunStatus.running and not resuming.done()
    assert "interrupt:approve#0" in await store.load_journal(parked.id)
    HOLD[parked.id].set()
    assert (await resuming).output == "yes"
    await engine.aclose()


async def test_a_waited_resume_that_loses_the_race_saves_nothing_and_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_unit._execution, "CLAIM_WAIT", 60.0)  # the first resume stays unwritten
    store = SQLiteStore(tmp_path / "runs.db")
    first, second = _engine(store), _engine(SQLiteStore(tmp_path / "runs.db"))
    parked = await _parked(first, "holds")
    resuming = await _resuming(first, parked.id, "first")
    stored = await store.load_run(parked.id)
    assert stored is not None and stored.status == RunStatus.interrupted  # nothing written yet
    await second.resume(parked.id, "second")  # another process answers, and it is written at once
    await asyncio.sleep(0.05)
    HOLD[parked.id].set()
    done = await second.wait(parked.id)
    assert done.status == RunStatus.completed and done.output == "second"
    with pytest.raises(NotInterrupted):
        await resuming
    assert EFFECTS.count(f"{parked.id} second") == 1 and f"{parked.id} first" not in EFFECTS
    journal = await store.load_journal(parked.id)
    assert journal["interrupt:approve#0"].value == '"second"'
    await first.aclose()
    await second.aclose()


async def test_a_waited_resume_that_loses_to_an_answer_taken_in_the_same_microsecond_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two answers by nobody known, taken at the same moment, are equal ``Answer`` records: the loser
    must not take the winner's for its own."""
    monkeypatch.setattr(agent_unit._execution, "CLAIM_WAIT", 60.0)
    clock = ManualClock()  # both engines read one time
    store = SQLiteStore(tmp_path / "runs.db")
    first = RunEngine(AGENTS, store, clock=clock, background_sweep=False)
    second = RunEngine(AGENTS, SQLiteStore(tmp_path / "runs.db"), clock=clock, background_sweep=False)
    STORES.append(store)
    parked = await _parked(first, "holds")
    resuming = await _resuming(first, parked.id, "first")
    await second.resume(parked.id, "second")
    HOLD[parked.id].set()
    assert (await second.wait(parked.id)).output == "second"
    with pytest.raises(NotInterrupted):
        await resuming
    await first.aclose()
    await second.aclose()


async def test_a_waited_resume_that_loses_to_a_winner_now_at_the_next_interrupt_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The winner's one write parks the run at its second interrupt: the loser's answer, meant for the
    first, must not land on the second."""
    store = CountingStore(tmp_path / "runs.db")
    first, second = _engine(store), _engine(SQLiteStore(tmp_path / "runs.db"))
    parked = await _parked(first, "twice")
    real = store.save_run
    gate = asyncio.Event()

    async def late_save(record: RunRecord, **kwargs: Any) -> int:
        await gate.wait()  # the first resume's one write waits until the second has won
        return await real(record, **kwargs)

    monkeypatch.setattr(store, "save_run", late_save)
    resuming = await _resuming(first, parked.id, "from-first")
    won = await second.resume(parked.id, "from-second", wait=True)
    assert won.status == RunStatus.interrupted and won.interrupt is not None
    gate.set()
    with pytest.raises(RunConflict, match="no longer waits at interrupt:approve#0"):  # a 409
        await resuming
    stored = await second.get(parked.id)
    assert stored.status == RunStatus.interrupted and stored.interrupt is not None
    assert stored.interrupt.key == "interrupt:approve#1"
    assert [answer.key for answer in stored.answers] == ["interrupt:approve#0"]
    journal = await store.load_journal(parked.id)
    assert {key: entry.value for key, entry in journal.items()} == {"interrupt:approve#0": '"from-second"'}
    await first.aclose()
    await second.aclose()


async def test_a_waited_resume_writes_its_claim_before_a_state_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_unit._execution, "CLAIM_WAIT", 60.0)  # only the state write can claim it
    store = SQLiteStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "keeps")
    resuming = asyncio.ensure_future(engine.resume(parked.id, "yes", wait=True))
    for _ in range(100):
        await asyncio.sleep(0.01)
        if await store.get_state(f"thread:{parked.thread_id}", "answer") is not None:
            break
    stored = await store.load_run(parked.id)
    assert stored is not None and stored.status == RunStatus.running
    assert "interrupt:approve#0" in await store.load_journal(parked.id)
    HOLD[parked.id].set()
    assert (await resuming).output == "yes"
    await engine.aclose()


async def test_a_framework_agent_is_claimed_before_it_runs(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await engine.start("framed", None, wait=True)
    store.saves = 0
    done = await engine.resume(parked.id, True, wait=True)
    assert done.status == RunStatus.completed and done.output is True
    assert store.saves == 2  # the claim, then the end: nothing deferred
    await engine.aclose()


async def test_a_waited_resume_cancelled_before_its_write_is_refused_and_saves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_unit._execution, "CLAIM_WAIT", 60.0)
    store = SQLiteStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "holds")
    resuming = await _resuming(engine, parked.id, "yes")
    cancelled = await engine.cancel(parked.id)
    assert cancelled.status == RunStatus.cancelled
    with pytest.raises(NotInterrupted):
        await resuming
    assert "interrupt:approve#0" not in await store.load_journal(parked.id)
    assert f"{parked.id} yes" not in EFFECTS
    await engine.aclose()


async def test_a_waited_resume_given_a_stale_record_still_lands(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "approve")
    stale = await engine.get(parked.id)
    await store.save_run(stale.model_copy(), expected_version=stale.version)  # the stored version moves on
    done = await engine.resume(parked.id, True, wait=True, record=stale)
    assert done.status == RunStatus.completed and done.output == "ok"
    await engine.aclose()


async def test_a_waited_resume_whose_write_meets_an_outage_fails_and_the_run_still_waits(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "approve")
    store.refuse = True
    with pytest.raises(StoreUnavailable):
        await engine.resume(parked.id, True, wait=True)
    stored = await engine.get(parked.id)
    assert stored.status == RunStatus.interrupted and stored.version == parked.version
    assert "interrupt:approve#0" not in await store.load_journal(parked.id)
    done = await engine.resume(parked.id, True, wait=True)  # sent again, it lands
    assert done.status == RunStatus.completed
    await engine.aclose()


async def test_an_interrupt_whose_waited_resume_meets_an_outage_still_expires_on_its_timer(tmp_path: Path) -> None:
    """The claim disarms the deadline's timer; a claim not written arms it again (the sweep is an hour off)."""
    store = CountingStore(tmp_path / "runs.db")
    STORES.append(store)
    engine = RunEngine(AGENTS, store, sweep_interval="1h", background_sweep=True)
    parked = await _parked(engine, "deadline")
    store.refuse = True
    with pytest.raises(StoreUnavailable):
        await engine.resume(parked.id, True, wait=True)
    assert (await engine.get(parked.id)).status == RunStatus.interrupted
    for _ in range(100):  # expired at its deadline (0.5 s): the default answers
        ended = await engine.get(parked.id)
        if ended.status != RunStatus.interrupted:
            break
        await asyncio.sleep(0.05)
    assert ended.status == RunStatus.completed and ended.output == "declined"
    assert ended.answers[-1].expired
    await engine.aclose()


async def test_a_shutdown_before_a_waited_resume_is_written_hands_the_run_on_with_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_unit._execution, "CLAIM_WAIT", 60.0)
    store = SQLiteStore(tmp_path / "runs.db")
    engine = _engine(store)
    parked = await _parked(engine, "holds")
    resuming = await _resuming(engine, parked.id, "yes")
    await engine.aclose()
    handed = await resuming
    assert handed.status == RunStatus.queued  # released: any process's sweep goes on with it
    assert (await store.load_journal(parked.id))["interrupt:approve#0"].value == '"yes"'
    again = _engine(SQLiteStore(tmp_path / "runs.db"))
    HOLD[parked.id].set()
    done = await again.advance(parked.id)
    assert done.status == RunStatus.completed and done.output == "yes"
    assert EFFECTS.count(f"{parked.id} yes") == 1
    await again.aclose()
