"""The embedded default store: one SQLite file in WAL mode, exact across processes.

Every write is one ``BEGIN IMMEDIATE`` transaction, which holds the file's write lock until it
commits: the compare-and-set is a conditional ``UPDATE`` on the run's version, the lease fence
a read of the run's owner, and each event's seq follows the run's last event. Two processes on
one file cannot both win, and a journaled step costs one commit.

Calls run on the event loop's thread: a WAL commit at ``synchronous=NORMAL`` takes
microseconds, far less than handing each call to a worker thread would cost. A writer that
waits for another process's lock waits up to ``busy_timeout`` (default 5 s).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ..errors import LeaseLost, RunConflict, RunNotFound
from ..records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ._codec import RUN_COLUMNS, journal_from_row, journal_row, list_filter, run_from_row, run_row
from .protocol import TICK_MEMORY

__all__ = ["SQLiteStore"]

DEFAULT_PATH = ".agent-unit/agent-unit.db"
_SYNCHRONOUS = {"off", "normal", "full", "extra"}

_SCHEMA = """
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
CREATE INDEX IF NOT EXISTS runs_due ON runs (due_at) WHERE due_at IS NOT NULL;
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
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (scope, key)
) WITHOUT ROWID;
"""
_SCHEMA_VERSION = 1
_COLUMNS = ", ".join(RUN_COLUMNS)
_SET_COLUMNS = ", ".join(f"{name} = ?" for name in RUN_COLUMNS[1:])


class SQLiteStore:
    """``sqlite:///path.db?synchronous=normal&busy_timeout=5000``."""

    def __init__(self, path: str | Path = DEFAULT_PATH, *, synchronous: str = "normal", busy_timeout_ms: int = 5000):
        if synchronous.lower() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous={synchronous!r}: use one of {', '.join(sorted(_SYNCHRONOUS))}")
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, cached_statements=256)
        self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        with self._write():
            if self._db.execute("PRAGMA user_version").fetchone()[0] < _SCHEMA_VERSION:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        parts = urlsplit(url)
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc:
            raise ValueError(f"invalid SQLite URL {url!r}: write sqlite:///relative.db or sqlite:////absolute.db")
        options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        unknown = set(options) - {"synchronous", "busy_timeout"}
        if unknown:
            raise ValueError(f"unknown SQLite option(s) {', '.join(sorted(unknown))} in {url!r}")
        return cls(
            path or DEFAULT_PATH,
            synchronous=options.get("synchronous", "normal"),
            busy_timeout_ms=int(options.get("busy_timeout", 5000)),
        )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _insert(
        self, db: sqlite3.Connection, run_id: str, journal: Sequence[JournalEntry], events: Sequence[str]
    ) -> int:
        """Write journal entries and events inside the caller's transaction; return the last seq.

        Seqs are minted here, under the write lock ``BEGIN IMMEDIATE`` holds: the next seq
        follows the run's last event (one index seek), so it never repeats, even after a restart.
        """
        for entry in journal:
            try:
                db.execute(
                    "INSERT INTO journal (run_id, key, value, error, meta) VALUES (?, ?, ?, ?, ?)",
                    journal_row(run_id, entry),
                )
            except sqlite3.IntegrityError:
                raise RunConflict(f"run {run_id} already has a journal entry for {entry.key}") from None
        last = db.execute("SELECT coalesce(max(seq), 0) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0]
        if events:
            db.executemany(
                "INSERT INTO events (run_id, seq, data) VALUES (?, ?, ?)",
                [(run_id, last + i, data) for i, data in enumerate(events, 1)],
            )
        return last + len(events)

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        with self._write() as db:
            try:
                db.execute(
                    f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})", run_row(record)
                )
            except sqlite3.IntegrityError:
                raise RunConflict(f"run {record.id} already exists") from None
            return self._insert(db, record.id, (), events)

    async def load_run(self, run_id: str) -> RunRecord | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else run_from_row(row)

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        row = run_row(record)
        values = (*row[1:4], expected_version + 1, *row[5:])
        with self._write() as db:
            updated = db.execute(
                f"UPDATE runs SET {_SET_COLUMNS} WHERE id = ? AND version = ?", (*values, record.id, expected_version)
            ).rowcount
            if updated != 1:
                if db.execute("SELECT 1 FROM runs WHERE id = ?", (record.id,)).fetchone() is None:
                    raise RunNotFound(f"run {record.id} does not exist")
                raise RunConflict(f"run {record.id} was changed by someone else: read it again and retry")
            return self._insert(db, record.id, journal, events)

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        db = self._db  # the hot path (one call per step): the transaction is spelled out, not a context manager
        db.execute("BEGIN IMMEDIATE")
        try:
            # The fence is a read: under BEGIN IMMEDIATE no other writer can change the row
            # before this transaction commits, and not writing it halves the pages a step dirties.
            held = db.execute(
                "SELECT 1 FROM runs WHERE id = ? AND lease_owner = ? AND status = 'running'", (run_id, owner)
            ).fetchone()
            if held is None:
                raise LeaseLost(f"run {run_id} is no longer held by this executor")
            last = self._insert(db, run_id, journal, events)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return last

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        with self._write() as db:
            found = db.execute(
                "UPDATE runs SET lease_expires = ?, due_at = ?, version = version + 1 "
                "WHERE id = ? AND lease_owner = ? AND status = 'running' RETURNING version",
                (expires, expires, run_id, owner),
            ).fetchone()
        return None if found is None else found[0]

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        rows = self._db.execute("SELECT key, value, error, meta FROM journal WHERE run_id = ?", (run_id,)).fetchall()
        return {row[0]: journal_from_row(*row) for row in rows}

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        rows = self._db.execute(
            "SELECT seq, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, after, -1 if limit is None else limit),
        ).fetchall()
        return [StoredEvent(seq, data) for seq, data in rows]

    async def last_seq(self, run_id: str) -> int:
        return self._db.execute("SELECT coalesce(max(seq), 0) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0]

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
        rows = self._db.execute(sql, (*params, limit + 1)).fetchall()
        runs = [run_from_row(row) for row in rows[:limit]]
        return RunPage(runs, runs[-1].id if len(rows) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM runs WHERE due_at <= ? ORDER BY due_at LIMIT ?", (before, limit)
        ).fetchall()
        return [run_from_row(row) for row in rows]

    async def delete_run(self, run_id: str) -> bool:
        with self._write() as db:
            deleted = db.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount
            db.execute("DELETE FROM journal WHERE run_id = ?", (run_id,))
            db.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
        return deleted == 1

    async def get_state(self, scope: str, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM state WHERE scope = ? AND key = ?", (scope, key)).fetchone()
        return None if row is None else row[0]

    async def set_state(self, scope: str, key: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO state (scope, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
                (scope, key, value),
            )

    async def delete_state(self, scope: str, key: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM state WHERE scope = ? AND key = ?", (scope, key))

    async def close(self) -> None:
        self._db.close()

    # -- scheduled tasks: one claim per (task, tick) -------------------------------------------
    # The table is made on the first claim (IF NOT EXISTS, under the write lock), so a file
    # that never runs a task has none, and no schema version is spent on it.

    async def claim_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        with self._write() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS ticks (task TEXT NOT NULL, scheduled_at REAL NOT NULL, "
                "owner TEXT NOT NULL, PRIMARY KEY (task, scheduled_at)) WITHOUT ROWID"
            )
            won = db.execute(
                "INSERT OR IGNORE INTO ticks (task, scheduled_at, owner) VALUES (?, ?, ?)", (task, scheduled_at, owner)
            ).rowcount
            db.execute("DELETE FROM ticks WHERE task = ? AND scheduled_at < ?", (task, scheduled_at - TICK_MEMORY))
        return won == 1
