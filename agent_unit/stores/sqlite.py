"""The embedded default store: one SQLite file in WAL mode, exact across processes.

Every write is one ``BEGIN IMMEDIATE`` transaction, which holds the file's write lock until it
commits: the compare-and-set is a conditional ``UPDATE`` on the run's version, the lease fence
a read of the run's owner (not repeated while it cannot have changed: see
:meth:`SQLiteStore._append`), and each event's seq follows the run's last event. Two processes
on one file cannot both win, and a journaled step costs one commit.

Calls run on the event loop's thread: a WAL commit at ``synchronous=NORMAL`` takes
microseconds, far less than handing each call to a worker thread would cost, and it needs no
thread at all (Pyodide has none). So SQLite itself never waits for a lock (``busy_timeout`` 0,
which would block the loop and every other request): a call that finds the file locked by
another process backs off with ``asyncio.sleep`` and tries again, up to ``busy_timeout``
(default 5 s), then fails as :class:`~agent_unit.errors.StoreUnavailable` (a 503). Each call is
one whole transaction, so trying it again is safe: a locked ``BEGIN IMMEDIATE`` wrote nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .._records import FINISHED, JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ..errors import LeaseLost, RunConflict, RunNotFound, StoreConfigError, StoreUnavailable
from . import DEFAULT_STORE_PATH
from ._checkpoint import BACKSTOP_PAGES, CHECKPOINT_EVERY, THREADS, WalCheckpointer
from .protocol import TICK_MEMORY
from .rows import (
    DUE_INDEX,
    DUE_RUNS,
    RUN_COLUMNS,
    VALUE_ERRORS,
    journal_from_row,
    journal_row,
    list_filter,
    run_from_row,
    run_row,
    value_error,
)
from .urls import number, options, unavailable

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_MAX_INT = 2**63 - 1  # SQLite's largest integer: a larger ``after`` means "after every event"
_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_TROUBLE = (sqlite3.Error, *VALUE_ERRORS)
_MISTAKES = (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.NotSupportedError, sqlite3.InternalError)
_FIRST_WAIT, _LONGEST_WAIT = 0.001, 0.025  # seconds between tries on a locked file (SQLite's own steps)

_SYNCHRONOUS = {"off", "normal", "full", "extra"}

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  status TEXT NOT NULL,
  version INTEGER NOT NULL,
  lease_owner TEXT,
  lease_expires REAL,
  due_at REAL,
  data TEXT NOT NULL
) WITHOUT ROWID;
{DUE_INDEX};
CREATE INDEX IF NOT EXISTS runs_status ON runs (status, id);
CREATE INDEX IF NOT EXISTS runs_agent ON runs (agent, id);
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, id);
CREATE TABLE IF NOT EXISTS journal (
  run_id TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT,
  error TEXT,
  meta TEXT,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  data TEXT NOT NULL,
  n INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (scope, key)
) WITHOUT ROWID;
"""
_SCHEMA_VERSION = 3
# Version 1 stored one event per row; version 2 adds ``n``, the events a row holds (see _insert).
# Version 3 leaves running runs out of ``runs_due`` (see :data:`~agent_unit.stores.rows.DUE_INDEX`).
_MIGRATIONS = {
    1: ("ALTER TABLE events ADD COLUMN n INTEGER NOT NULL DEFAULT 1",),
    2: ("DROP INDEX IF EXISTS runs_due", DUE_INDEX),
}
_COLUMNS = ", ".join(RUN_COLUMNS)
_EVENTS_ROW = "INSERT INTO events (run_id, seq, n, data) VALUES (?, ?, ?, ?)"
_FENCE = "SELECT 1 FROM runs WHERE id = ? AND lease_owner = ? AND status = 'running'"
_ENTRY = "INSERT INTO journal (run_id, key, value, error, meta) VALUES (?, ?, ?, ?, ?)"
_LAST_SEQ = "SELECT coalesce(max(seq), 0) FROM events WHERE run_id = ?"
_LOAD_RUN = f"SELECT {_COLUMNS} FROM runs WHERE id = ?"
_LOAD_JOURNAL = "SELECT key, value, error, meta FROM journal WHERE run_id = ?"
_MAX_TIPS = 10_000  # runs whose last seq a store remembers; past this it forgets them all (each is only a shortcut)
_FENCED_ENTRY = (
    "INSERT INTO journal (run_id, key, value, error, meta) SELECT ?, ?, ?, ?, ? "
    "FROM runs WHERE id = ? AND lease_owner = ? AND status = 'running'"
)
# A step's usual entry (a value, no error, no meta) names only the columns it fills: the two NULLs
# are the columns' default, not parameters, since sqlite3 looks for an adapter for every None it
# binds (measured: 3.5k instructions each, a tenth of a raw INSERT and COMMIT).
_VALUE_ENTRY = "INSERT INTO journal (run_id, key, value) VALUES (?, ?, ?)"
_FENCED_VALUE_ENTRY = (
    "INSERT INTO journal (run_id, key, value) SELECT ?, ?, ? "
    "FROM runs WHERE id = ? AND lease_owner = ? AND status = 'running'"
)
# A save sets what can change: a run's agent and thread never do, and naming their columns in the
# SET would make SQLite rewrite their index entries (two more pages per save, measured).
_CHANGING = RUN_COLUMNS[3:]
_SET_COLUMNS = ", ".join(f"{name} = ?" for name in _CHANGING)
_UPDATE_RUN = f"UPDATE runs SET {_SET_COLUMNS} WHERE id = ? AND version = ?"


def _to_wal(db: sqlite3.Connection, seconds: float) -> None:
    """``PRAGMA journal_mode = WAL``, waited for up to ``seconds`` like every other statement.

    While another connection turns a new file to WAL (two servers starting together on a fresh
    store), SQLite answers the pragma SQLITE_BUSY at once, without calling its busy handler."""
    deadline = time.monotonic() + seconds
    wait = _FIRST_WAIT
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(wait)  # at start, before any request: nothing else waits on this thread yet
        wait = min(wait * 2, _LONGEST_WAIT)


class SQLiteStore:
    """``sqlite:///path.db?synchronous=normal&busy_timeout=5000``."""

    def __init__(
        self, path: str | Path = DEFAULT_STORE_PATH, *, synchronous: str = "normal", busy_timeout_ms: int = 5000
    ):
        if synchronous.lower() not in _SYNCHRONOUS:
            raise StoreConfigError(
                f"invalid sqlite store URL: synchronous={synchronous!r}: use one of {', '.join(sorted(_SYNCHRONOUS))}"
            )
        if busy_timeout_ms < 0:
            raise StoreConfigError(f"invalid sqlite store URL: busy_timeout={busy_timeout_ms} is negative")
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.busy_timeout = busy_timeout_ms / 1000
        """Seconds a write waits for another process's lock (without blocking the loop) before a 503."""
        self._checkpoints: WalCheckpointer | None = None
        self._commits = 0
        self._tips: dict[str, int] = {}  # run id -> the last seq this connection wrote: see _known_last
        self._held: dict[str, str] = {}  # run id -> the owner whose fence passed in its last append: see _append
        self._data_version: int | None = None
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, cached_statements=256)
            # One cursor for every write: Connection.execute makes a new one per statement.
            self._cursor = self._db.cursor()
            # Opening waits in SQLite (once, at start: no request is waiting yet); every call after it waits in _retry.
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            _to_wal(self._db, self.busy_timeout)
            self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            if self._db.execute("PRAGMA user_version").fetchone()[0] < _SCHEMA_VERSION:  # a read: no lock taken
                with self._write():
                    version = self._db.execute("PRAGMA user_version").fetchone()[0]
                    if version < _SCHEMA_VERSION:
                        statements = (
                            _SCHEMA.split(";")
                            if version == 0
                            else [sql for step in range(version, _SCHEMA_VERSION) for sql in _MIGRATIONS[step]]
                        )
                        for statement in statements:
                            if statement.strip():
                                self._db.execute(statement)
                        self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            self._db.execute("PRAGMA busy_timeout = 0")
            # At FULL or EXTRA every commit syncs anyway, and a checkpoint syncing beside it only
            # slows it (measured: steps/s at FULL fell by a third): SQLite's inline default stays.
            if THREADS and self.path != ":memory:" and synchronous.lower() in ("off", "normal"):
                self._db.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
                self._checkpoints = WalCheckpointer(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise unavailable("sqlite", "cannot be opened", url=self.url, detail=str(exc)) from None

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        parts = urlsplit(url)
        if not url[len("sqlite:") :].startswith("//"):  # sqlite:/x.db would open x.db here, not /x.db
            name = parts.path.lstrip("/")
            raise StoreConfigError(
                f"invalid sqlite store URL: write sqlite:///{name} (relative) or sqlite:////{name} (absolute)"
            )
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc:
            raise StoreConfigError(
                "invalid sqlite store URL: it names a host; write sqlite:///relative.db or sqlite:////absolute.db"
            )
        found = options("sqlite", url, {"synchronous": "off|normal|full|extra", "busy_timeout": "milliseconds"})
        return cls(
            path or DEFAULT_STORE_PATH,
            synchronous=found.get("synchronous", "normal"),
            busy_timeout_ms=number("sqlite", "busy_timeout", found.get("busy_timeout", "5000")),
        )

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, one whole transaction (or read) on the loop's thread; a locked file is waited
        for in :meth:`_retry`, a value SQLite cannot take is a StoreValueError, other trouble an outage."""
        try:
            return fn(*args)
        except _TROUBLE as exc:
            return await self._retry(exc, fn, args)

    async def _retry(self, exc: BaseException, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        deadline = time.monotonic() + self.busy_timeout
        wait = _FIRST_WAIT
        while True:
            if isinstance(exc, (*VALUE_ERRORS, sqlite3.DataError)):
                raise value_error(exc) from None
            if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, _MISTAKES):
                raise exc  # a mistake in this module, not the store's trouble
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _BUSY:
                raise unavailable("sqlite", "cannot be used", url=self.url, detail=str(exc)) from None
            if time.monotonic() >= deadline:
                raise self._locked() from None
            await asyncio.sleep(wait)  # the loop serves other requests meanwhile
            wait = min(wait * 2, _LONGEST_WAIT)
            try:
                return fn(*args)
            except _TROUBLE as again:
                exc = again

    def _locked(self) -> StoreUnavailable:
        return unavailable(
            "sqlite",
            f"stayed locked by another process for {self.busy_timeout:g} s",
            url=self.url,
            detail="database is locked",
        )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        db = self._cursor
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
            self._committed()
        except BaseException:
            if self._db.in_transaction:  # a failed COMMIT may have ended it already
                db.execute("ROLLBACK")
            raise

    def _insert(
        self,
        run_id: str,
        journal: Sequence[JournalEntry],
        events: Sequence[str],
        last: int | None = None,
    ) -> int:
        """Write journal entries and events inside the caller's transaction; return the last seq.

        The events of one write are one row, keyed by its last seq, holding ``n`` events one per
        line (an event is compact JSON: no raw newline), so a step's STEP_STARTED and
        STEP_FINISHED cost one row, not two, in the events B-tree. Readers still get one event
        per seq (:meth:`read_events` splits the rows). A write with an event holding a newline
        (never one the engine makes) stores one row per event.

        Seqs are minted here, under the write lock ``BEGIN IMMEDIATE`` holds: the next seq
        follows the run's last event, so it never repeats, even after a restart. ``last`` is
        that seq when the caller knows it (0 for a run inserted in this transaction; see
        :meth:`_known_last`); otherwise it is sought in the events index.
        """
        db = self._cursor
        for entry in journal:
            try:
                db.execute(_ENTRY, journal_row(run_id, entry))
            except sqlite3.IntegrityError:
                raise RunConflict(f"run {run_id} already has a journal entry for {entry.key}") from None
        if last is None:
            last = int(db.execute(_LAST_SEQ, (run_id,)).fetchone()[0])
        # INSERT VALUES, not INSERT … SELECT max(seq) FROM events: reading the table it writes makes
        # SQLite copy the rows through a temporary table first, which cost more than the statement saved.
        if not events:
            return last
        joined = "\n".join(events)
        if joined.count("\n") == len(events) - 1:  # no event holds a newline (one check, not one per event)
            db.execute(_EVENTS_ROW, (run_id, last + len(events), len(events), joined))
        else:
            db.executemany(_EVENTS_ROW, [(run_id, last + i, 1, data) for i, data in enumerate(events, 1)])
        return last + len(events)

    def _known_last(self, run_id: str) -> int | None:
        """The run's last seq as this connection wrote it, if no other connection has written since.

        ``PRAGMA data_version`` changes when another connection (another store, another process)
        commits, read inside the caller's ``BEGIN IMMEDIATE`` after the write lock is taken: while it
        holds, no one else has written any event, so the last seq this connection wrote is the
        run's last, without the index seek (measured: a tenth of a step's store time).
        """
        version = self._cursor.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._tips.clear()
            self._held.clear()
            self._data_version = version
            return None
        # Taken out until this write commits: a tip is only ever what a committed write left.
        return self._tips.pop(run_id, None)

    def _remember(self, run_id: str, last: int, live: bool = True) -> None:
        """After a commit: keep the run's last seq for its next write, unless the run has finished.

        A parked run's (interrupted, sleeping) too: its next write is the claim of its resume or
        wake, which then seeks nothing in the events index (one statement of a resume's twelve)."""
        if not live:
            self._tips.pop(run_id, None)
            return
        if len(self._tips) >= _MAX_TIPS and run_id not in self._tips:
            self._tips.clear()
            self._held.clear()
        self._tips[run_id] = last

    # Each public method is ``_call`` of a synchronous one: a whole transaction that can be tried again.

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        return await self._call(self._create_run, record, events)

    def _create_run(self, record: RunRecord, events: Sequence[str]) -> int:
        self._held.pop(record.id, None)
        row = run_row(record)
        with self._write() as db:
            try:
                db.execute(f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})", row)
            except sqlite3.IntegrityError:
                raise RunConflict(f"run {record.id} already exists") from None
            last = self._insert(record.id, (), events, last=0)
        self._remember(record.id, last, record.status == RunStatus.running)
        return last

    # The three calls of every resume (and most requests) spell _call out, as append does: a
    # coroutine fewer each (measured with the resume path: see BENCHMARKS.md).

    async def load_run(self, run_id: str) -> RunRecord | None:
        try:
            row = self._fetchone(_LOAD_RUN, (run_id,))
        except _TROUBLE as exc:
            row = await self._retry(exc, self._fetchone, (_LOAD_RUN, (run_id,)))
        return None if row is None else run_from_row(row)

    def _fetchone(self, sql: str, params: tuple[Any, ...]) -> Any:
        return self._db.execute(sql, params).fetchone()

    def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self._db.execute(sql, params).fetchall()

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        try:
            return self._save_run(record, expected_version, journal, events)
        except _TROUBLE as exc:
            return await self._retry(exc, self._save_run, (record, expected_version, journal, events))

    def _save_run(
        self, record: RunRecord, expected_version: int, journal: Sequence[JournalEntry], events: Sequence[str]
    ) -> int:
        self._held.pop(record.id, None)  # this write may change the owner or status the fence reads
        row = run_row(record)
        values = (row[3], expected_version + 1, *row[5:])
        db = self._cursor  # two per resume: the transaction is spelled out, as in _append, not a context manager
        db.execute("BEGIN IMMEDIATE")
        try:
            updated = db.execute(_UPDATE_RUN, (*values, record.id, expected_version)).rowcount
            if updated != 1:
                if db.execute("SELECT 1 FROM runs WHERE id = ?", (record.id,)).fetchone() is None:
                    raise RunNotFound(f"run {record.id} does not exist")
                raise RunConflict(f"run {record.id} was changed by someone else: read it again and retry")
            last = self._insert(record.id, journal, events, last=self._known_last(record.id))
            db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # a failed COMMIT may have ended it already
                db.execute("ROLLBACK")
            raise
        self._committed()
        self._remember(record.id, last, record.status not in FINISHED)
        return last

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        try:  # _call spelled out: the hot path (one call per step), one call and one coroutine fewer
            return self._append(run_id, owner, journal, events)
        except _TROUBLE as exc:
            return await self._retry(exc, self._append, (run_id, owner, journal, events))

    def _append(self, run_id: str, owner: str, journal: Sequence[JournalEntry], events: Sequence[str]) -> int:
        """One step's write: its journal entry and the events waiting for it, in one transaction.

        The transaction is spelled out, and :meth:`_known_last` and :meth:`_remember` are
        inlined: each Python call is a measurable share of a step. The fence is a read: under BEGIN
        IMMEDIATE no other writer can change the row before this transaction commits, and not
        writing it halves the pages a step dirties. It is not read again while it cannot have
        changed: this connection's last append to the run passed it for the same owner, no other
        connection has committed since (``PRAGMA data_version``, read under the write lock, is the
        one this connection last saw), and this store's own writes to the row (create, save,
        renew, delete) took the entry out. Otherwise a step's one journal entry carries the
        fence in its INSERT … SELECT.
        """
        db = self._cursor
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA data_version").fetchone()[0]
            if version == self._data_version:
                # Both taken out until this write commits: they are only ever what a committed write left.
                last = self._tips.pop(run_id, None)
                passed = self._held.pop(run_id, None)
            else:
                self._tips.clear()
                self._held.clear()
                self._data_version = version
                last = passed = None
            fenced = last is None or passed != owner
            if journal:
                entry = journal[0]
                try:
                    if entry.error is None and entry.meta is None and entry.value is not None:
                        if fenced:
                            db.execute(_FENCED_VALUE_ENTRY, (run_id, entry.key, entry.value, run_id, owner))
                        else:
                            db.execute(_VALUE_ENTRY, (run_id, entry.key, entry.value))
                    elif fenced:
                        db.execute(_FENCED_ENTRY, (*journal_row(run_id, entry), run_id, owner))
                    else:
                        db.execute(_ENTRY, journal_row(run_id, entry))
                    held = db.rowcount == 1
                except sqlite3.IntegrityError:
                    raise RunConflict(f"run {run_id} already has a journal entry for {entry.key}") from None
            else:
                held = not fenced or db.execute(_FENCE, (run_id, owner)).fetchone() is not None
            if not held:
                raise LeaseLost(f"run {run_id} is no longer held by this executor")
            last = self._insert(run_id, journal[1:], events, last)
            db.execute("COMMIT")
            tips = self._tips
            if len(tips) >= _MAX_TIPS:
                tips.clear()
                self._held.clear()
            tips[run_id] = last
            self._held[run_id] = owner
        except BaseException:
            if self._db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self._committed()
        return last

    def _committed(self) -> None:
        """Count a commit; every ``CHECKPOINT_EVERY`` ask the worker thread for a WAL checkpoint."""
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY and self._checkpoints is not None:
            self._commits = 0
            self._checkpoints.request()

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        return await self._call(self._renew_lease, run_id, owner, expires)

    def _renew_lease(self, run_id: str, owner: str, expires: float) -> int | None:
        self._held.pop(run_id, None)
        with self._write() as db:
            found = db.execute(
                "UPDATE runs SET lease_expires = ?, due_at = ?, version = version + 1 "
                "WHERE id = ? AND lease_owner = ? AND status = 'running' RETURNING version",
                (expires, expires, run_id, owner),
            ).fetchone()
        return None if found is None else found[0]

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        try:
            rows = self._fetchall(_LOAD_JOURNAL, (run_id,))
        except _TROUBLE as exc:
            rows = await self._retry(exc, self._fetchall, (_LOAD_JOURNAL, (run_id,)))
        return {row[0]: journal_from_row(*row) for row in rows}

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        # A row's key is its last seq, so the rows past ``after`` hold every event past it, and
        # each holds at least one: ``limit`` rows are enough for ``limit`` events.
        rows = await self._call(
            self._fetchall,
            "SELECT seq, n, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, min(after, _MAX_INT), -1 if limit is None else min(limit, _MAX_INT)),
        )
        found: list[StoredEvent] = []
        for last, n, data in rows:
            if n == 1:
                found.append(StoredEvent(last, data))
            else:
                first = last - n + 1
                found += [StoredEvent(first + i, text) for i, text in enumerate(data.split("\n"))]
        if found and found[0].seq <= after:
            found = [event for event in found if event.seq > after]
        return found if limit is None else found[:limit]

    async def last_seq(self, run_id: str) -> int:
        row = await self._call(self._fetchone, _LAST_SEQ, (run_id,))
        return int(row[0])

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        clause, params = list_filter("?", status=status, agent=agent, thread_id=thread_id, cursor=cursor)
        sql = f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY id DESC LIMIT ?"
        rows = await self._call(self._fetchall, sql, (*params, limit + 1))
        runs = [run_from_row(row) for row in rows[:limit]]
        return RunPage(runs, runs[-1].id if len(rows) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        rows = await self._call(self._fetchall, DUE_RUNS, (before, limit, before, limit))
        return [run_from_row(row) for row in rows]

    async def delete_run(self, run_id: str) -> bool:
        return await self._call(self._delete_run, run_id)

    def _delete_run(self, run_id: str) -> bool:
        self._tips.pop(run_id, None)
        self._held.pop(run_id, None)
        with self._write() as db:
            deleted = db.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount
            db.execute("DELETE FROM journal WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
        return deleted == 1

    async def get_state(self, scope: str, key: str) -> str | None:
        row = await self._call(self._fetchone, "SELECT value FROM state WHERE scope = ? AND key = ?", (scope, key))
        return None if row is None else row[0]

    async def set_state(self, scope: str, key: str, value: str) -> None:
        await self._call(
            self._change,
            "INSERT INTO state (scope, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            (scope, key, value),
        )

    async def delete_state(self, scope: str, key: str) -> None:
        await self._call(self._change, "DELETE FROM state WHERE scope = ? AND key = ?", (scope, key))

    def _change(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._write() as db:
            db.execute(sql, params)

    async def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        self._db.close()

    # -- scheduled tasks: one claim per (task, tick), a lease until finished -----------------
    # The table is made on the first tick write (IF NOT EXISTS, under the write lock), so a file
    # that never runs a task has none, and no schema version is spent on it. A table from before
    # claims were leases gets the two columns; its claims have no ``expires`` and never lapse.

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        return await self._call(self._claim_tick, task, scheduled_at, owner, now, expires)

    def _claim_tick(self, task: str, scheduled_at: float, owner: str, now: float, expires: float) -> bool:
        with self._write() as db:
            self._tick_table(db)
            won = db.execute(_CLAIM_TICK, (task, scheduled_at, owner, expires, now)).rowcount
            db.execute("DELETE FROM ticks WHERE task = ? AND scheduled_at < ?", (task, scheduled_at - TICK_MEMORY))
        return won == 1

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        sql = "UPDATE ticks SET expires = ? WHERE task = ? AND scheduled_at = ? AND owner = ? AND done = 0"
        return await self._call(self._tick_update, sql, (expires, task, scheduled_at, owner))

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        sql = "UPDATE ticks SET done = 1 WHERE task = ? AND scheduled_at = ? AND owner = ? AND done = 0"
        return await self._call(self._tick_update, sql, (task, scheduled_at, owner))

    def _tick_update(self, sql: str, params: tuple[Any, ...]) -> bool:
        with self._write() as db:
            self._tick_table(db)
            return bool(db.execute(sql, params).rowcount == 1)

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        return await self._call(self._lapsed_ticks, task, since, now)

    def _lapsed_ticks(self, task: str, since: float, now: float) -> list[float]:
        if "done" not in self._tick_columns():
            return []  # no table, or one from before leases: no claim can lapse
        rows = self._db.execute(
            "SELECT scheduled_at FROM ticks WHERE task = ? AND scheduled_at >= ? AND done = 0 AND expires < ? "
            "ORDER BY scheduled_at",
            (task, since, now),
        ).fetchall()
        return [float(row[0]) for row in rows]

    def _tick_columns(self) -> set[str]:
        return {row[1] for row in self._db.execute("PRAGMA table_info(ticks)").fetchall()}

    def _tick_table(self, db: sqlite3.Cursor) -> None:
        """Make (or bring up to date) the ticks table, inside the caller's write: two cheap
        statements a tick, against a flag that a rolled-back write would leave wrong."""
        db.execute(
            "CREATE TABLE IF NOT EXISTS ticks (task TEXT NOT NULL, scheduled_at REAL NOT NULL, owner TEXT NOT NULL, "
            "expires REAL, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (task, scheduled_at)) WITHOUT ROWID"
        )
        if "done" not in self._tick_columns():
            db.execute("ALTER TABLE ticks ADD COLUMN expires REAL")
            db.execute("ALTER TABLE ticks ADD COLUMN done INTEGER NOT NULL DEFAULT 0")


_CLAIM_TICK = (
    "INSERT INTO ticks (task, scheduled_at, owner, expires) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (task, scheduled_at) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
    "WHERE ticks.done = 0 AND ticks.expires < ?"
)
"""Insert the claim, or take over one whose lease lapsed (a claim without ``expires`` never lapses)."""
