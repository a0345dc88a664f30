"""``memory://``: the protocol in one process's memory, for tests and throwaway dev runs.

Each method runs without awaiting, so on one event loop every call is atomic. Records are
copied in and out, so a caller never holds the store's own object. A value the other stores
could not encode (a lone surrogate) is refused here too, so a test fails as production would.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ..errors import LeaseLost, RunConflict, RunNotFound
from .protocol import TICK_MEMORY
from .rows import check_text, check_writes, run_row

__all__ = ["MemoryStore"]


@dataclass
class _Run:
    record: RunRecord
    seq: int = 0
    journal: dict[str, JournalEntry] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)


def _check(record: RunRecord) -> None:
    """Refuse a record the other stores could not write (its JSON, or a column, is not valid Unicode)."""
    check_text(*(value for value in run_row(record) if isinstance(value, str)))


class MemoryStore:
    url = "memory://"

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._state: dict[tuple[str, str], str] = {}
        self._ticks: dict[str, dict[float, _Claim]] = {}

    def _write(self, run: _Run, journal: Sequence[JournalEntry], events: Sequence[str]) -> int:
        check_writes(journal, events)
        taken = [entry.key for entry in journal if entry.key in run.journal]
        if taken:
            raise RunConflict(f"run {run.record.id} already has a journal entry for {', '.join(taken)}")
        for entry in journal:
            run.journal[entry.key] = replace(entry)
        for data in events:
            run.seq += 1
            run.events.append(StoredEvent(run.seq, data))
        return run.seq

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        _check(record)
        check_writes((), events)
        if record.id in self._runs:
            raise RunConflict(f"run {record.id} already exists")
        run = self._runs[record.id] = _Run(record.model_copy(deep=True))
        return self._write(run, (), events)

    async def load_run(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        return None if run is None else run.record.model_copy(deep=True)

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        _check(record)
        run = self._runs.get(record.id)
        if run is None:
            raise RunNotFound(f"run {record.id} does not exist")
        if run.record.version != expected_version:
            raise RunConflict(f"run {record.id} was changed by someone else: read it again and retry")
        seq = self._write(run, journal, events)
        run.record = record.model_copy(update={"version": expected_version + 1}, deep=True)
        return seq

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        run = self._runs.get(run_id)
        if run is None or run.record.lease_owner != owner or run.record.status != RunStatus.running:
            raise LeaseLost(f"run {run_id} is no longer held by this executor")
        return self._write(run, journal, events)

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        run = self._runs.get(run_id)
        if run is None or run.record.lease_owner != owner or run.record.status != RunStatus.running:
            return None
        run.record.lease_expires = run.record.due_at = expires
        run.record.version += 1
        return run.record.version

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        run = self._runs.get(run_id)
        return {} if run is None else {key: replace(entry) for key, entry in run.journal.items()}

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        run = self._runs.get(run_id)
        if run is None:
            return []
        start = bisect.bisect_right([event.seq for event in run.events], after)
        return run.events[start : None if limit is None else start + limit]

    async def last_seq(self, run_id: str) -> int:
        run = self._runs.get(run_id)
        return 0 if run is None else run.seq

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        found = [
            run.record
            for run_id, run in sorted(self._runs.items(), reverse=True)
            if (status is None or run.record.status == status)
            and (agent is None or run.record.agent == agent)
            and (thread_id is None or run.record.thread_id == thread_id)
            and (cursor is None or run_id < cursor)
        ]
        runs = [record.model_copy(deep=True) for record in found[:limit]]
        return RunPage(runs, runs[-1].id if len(found) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        due = sorted(
            (
                run.record
                for run in self._runs.values()
                if run.record.due_at is not None and run.record.due_at <= before
            ),
            key=lambda record: record.due_at or 0.0,
        )
        return [record.model_copy(deep=True) for record in due[:limit]]

    async def delete_run(self, run_id: str) -> bool:
        return self._runs.pop(run_id, None) is not None

    async def get_state(self, scope: str, key: str) -> str | None:
        return self._state.get((scope, key))

    async def set_state(self, scope: str, key: str, value: str) -> None:
        check_text(scope, key, value)
        self._state[(scope, key)] = value

    async def delete_state(self, scope: str, key: str) -> None:
        self._state.pop((scope, key), None)

    async def close(self) -> None:
        pass

    # -- scheduled tasks: one claim per (task, tick), a lease until finished -----------------

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        ticks = self._ticks.setdefault(task, {})
        held = ticks.get(scheduled_at)
        if held is not None and (held.done or held.expires >= now):
            return False
        for old in [at for at in ticks if at < scheduled_at - TICK_MEMORY]:
            del ticks[old]
        ticks[scheduled_at] = _Claim(owner, expires)
        return True

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        held = self._ticks.get(task, {}).get(scheduled_at)
        if held is None or held.done or held.owner != owner:
            return False
        held.expires = expires
        return True

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        held = self._ticks.get(task, {}).get(scheduled_at)
        if held is None or held.done or held.owner != owner:
            return False
        held.done = True
        return True

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        ticks = self._ticks.get(task, {})
        return sorted(at for at, held in ticks.items() if at >= since and not held.done and held.expires < now)


@dataclass
class _Claim:
    owner: str
    expires: float
    done: bool = False
