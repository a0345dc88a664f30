"""Cloudflare D1 (``storage = "d1://BINDING"`` in a Python Worker): SQLite behind a binding.

D1 has no interactive transactions: each call is one, and ``batch([...])`` runs its statements
in order as one transaction that is rolled back whole when any statement fails. So every write
here is one ``batch``, and a condition is checked inside it by a guard statement that fails
when the condition does not hold: an insert into ``guard``, whose named CHECK constraints
refuse it (``agent_unit_conflict``, ``agent_unit_missing``, ``agent_unit_lease``). The guard
runs first, so a lost compare-and-set or lease writes nothing; the error's message names the
constraint, which is how the store tells a conflict from an outage. Seqs are minted by the
insert that stores each event (``max(seq) + 1`` inside the batch's transaction), so they never
repeat. A write costs one round trip.

The tables are made the first time a statement finds them missing (then the call is made
again), so a Worker pays nothing for them on its other requests.

Under Pyodide the binding's results are JavaScript objects (converted with ``to_py()``), and a
Python ``None`` would reach D1 as ``undefined``, which it refuses: a ``None`` is written as SQL
``NULL`` in the statement instead of bound, as Cloudflare's own D1 backend for Django does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ...errors import LeaseLost, RunConflict, RunNotFound, StoreConfigError
from ...stores.protocol import TICK_MEMORY
from ...stores.rows import (
    DUE_INDEX,
    DUE_RUNS,
    RUN_COLUMNS,
    check_text,
    check_writes,
    journal_from_row,
    journal_row,
    list_filter,
    run_from_row,
    run_row,
)
from ...stores.urls import unavailable

__all__ = ["D1Store"]

_MAX_INT = 2**53 - 1  # the largest integer a JavaScript number holds exactly: a larger ``after`` reads nothing

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, agent TEXT NOT NULL, thread_id TEXT NOT NULL, "
    "status TEXT NOT NULL, version INTEGER NOT NULL, lease_owner TEXT, lease_expires REAL, due_at REAL, "
    "data TEXT NOT NULL) WITHOUT ROWID",
    DUE_INDEX,  # a database made before keeps its wider index, which DUE_RUNS reads as well
    "CREATE INDEX IF NOT EXISTS runs_status ON runs (status, id)",
    "CREATE INDEX IF NOT EXISTS runs_agent ON runs (agent, id)",
    "CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, id)",
    "CREATE TABLE IF NOT EXISTS journal (run_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT, error TEXT, "
    "meta TEXT, PRIMARY KEY (run_id, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, "
    "PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS state (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
    "PRIMARY KEY (scope, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS ticks (task TEXT NOT NULL, scheduled_at REAL NOT NULL, owner TEXT NOT NULL, "
    "expires REAL, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (task, scheduled_at)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS guard (failure TEXT NOT NULL, "
    "CONSTRAINT agent_unit_conflict CHECK (failure <> 'conflict'), "
    "CONSTRAINT agent_unit_missing CHECK (failure <> 'missing'), "
    "CONSTRAINT agent_unit_lease CHECK (failure <> 'lease'))",
)
"""The guard table never holds a row: an insert into it is made only to fail."""

_COLUMNS = ", ".join(RUN_COLUMNS)
_SET_COLUMNS = ", ".join(f"{name} = ?" for name in RUN_COLUMNS[1:])
_VERSION_GUARD = (
    "INSERT INTO guard (failure) SELECT CASE WHEN EXISTS (SELECT 1 FROM runs WHERE id = ?) "
    "THEN 'conflict' ELSE 'missing' END WHERE NOT EXISTS (SELECT 1 FROM runs WHERE id = ? AND version = ?)"
)
_LEASE_GUARD = (
    "INSERT INTO guard (failure) SELECT 'lease' "
    "WHERE NOT EXISTS (SELECT 1 FROM runs WHERE id = ? AND lease_owner = ? AND status = 'running')"
)
_EVENT = "INSERT INTO events (run_id, seq, data) SELECT ?, coalesce(max(seq), 0) + 1, ? FROM events WHERE run_id = ?"
_LAST_SEQ = "SELECT coalesce(max(seq), 0) AS seq FROM events WHERE run_id = ?"


class D1Store:
    """A D1 database as the store: ``D1Store(env.DB)``; ``binding`` names it in the URL (``d1://DB``)."""

    def __init__(self, database: Any, *, binding: str = "DB") -> None:
        if database is None:
            raise StoreConfigError(
                f"d1://{binding}: the Worker has no D1 binding named {binding}: add it to d1_databases in "
                "wrangler.jsonc ([cloudflare.wrangler] in agent-unit.toml)"
            )
        self.database = database
        self.url = f"d1://{binding}"

    # -- the binding ------------------------------------------------------------------------

    def _statement(self, sql: str, *params: Any) -> Any:
        """``sql`` prepared and bound; each ``None`` is written into the SQL as ``NULL`` (see the module)."""
        if None in params:
            parts = sql.split("?")
            sql = parts[0] + "".join(
                ("NULL" if value is None else "?") + part for value, part in zip(params, parts[1:], strict=True)
            )
            params = tuple(value for value in params if value is not None)
        prepared = self.database.prepare(sql)
        return prepared.bind(*params) if params else prepared

    async def _batch(self, statements: list[tuple[Any, ...]], run_id: str = "") -> list[list[dict[str, Any]]]:
        """One transaction (one round trip): each statement's rows, in order."""
        return await self._call(lambda: self.database.batch([self._statement(*item) for item in statements]), run_id)

    async def _rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        results = await self._call(lambda: self._single(sql, params))
        return results[0]

    async def _single(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return [await self._statement(sql, *params).all()]

    async def _call(self, make: Callable[[], Awaitable[Sequence[Any]]], run_id: str = "") -> list[list[dict[str, Any]]]:
        """Await ``make()``; make the tables and try again when they are missing; D1's errors as ours."""
        for attempt in (1, 2):
            try:
                return [_rows_of(result) for result in await make()]
            except Exception as exc:
                if not _from_d1(exc):
                    raise  # a mistake in this module, not the store's trouble
                message = str(exc)
                if "no such table" in message and attempt == 1:
                    await self._create_tables()
                    continue
                if "no such column" in message and attempt == 1:  # a ticks table from before leases
                    await self._add_tick_columns()
                    continue
                raise _error(message, self.url, run_id) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _create_tables(self) -> None:
        try:
            await self.database.batch([self.database.prepare(sql) for sql in _SCHEMA])
        except Exception as exc:  # noqa: BLE001 - a JavaScript error from the binding
            raise unavailable("d1", "cannot be used", url=self.url, detail=str(exc)) from None

    async def _add_tick_columns(self) -> None:
        """Give a ticks table from before leases its two columns: its claims have no expiry and
        never lapse. Another Worker may have added them first."""
        for sql in (
            "ALTER TABLE ticks ADD COLUMN expires REAL",
            "ALTER TABLE ticks ADD COLUMN done INTEGER NOT NULL DEFAULT 0",
        ):
            try:
                await self.database.prepare(sql).run()
            except Exception as exc:  # noqa: BLE001 - a JavaScript error from the binding
                if "duplicate column" not in str(exc):
                    raise unavailable("d1", "cannot be used", url=self.url, detail=str(exc)) from None

    def _inserts(self, run_id: str, journal: Sequence[JournalEntry], events: Sequence[str]) -> list[tuple[Any, ...]]:
        """The statements that write ``journal`` and ``events``, then read the run's last seq."""
        found: list[tuple[Any, ...]] = [
            (
                "INSERT INTO journal (run_id, key, value, error, meta) VALUES (?, ?, ?, ?, ?)",
                *journal_row(run_id, entry),
            )
            for entry in journal
        ]
        found += [(_EVENT, run_id, data, run_id) for data in events]
        return [*found, (_LAST_SEQ, run_id)]

    # -- the protocol -----------------------------------------------------------------------

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        row = _row(record)
        check_writes((), events)
        insert = f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})"
        results = await self._batch([(insert, *row), *self._inserts(record.id, (), events)], record.id)
        return int(results[-1][0]["seq"])

    async def load_run(self, run_id: str) -> RunRecord | None:
        rows = await self._rows(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", run_id)
        return run_from_row(_run_values(rows[0])) if rows else None

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        row = _row(record)
        check_writes(journal, events)
        values = (*row[1:4], expected_version + 1, *row[5:])
        results = await self._batch(
            [
                (_VERSION_GUARD, record.id, record.id, expected_version),
                (f"UPDATE runs SET {_SET_COLUMNS} WHERE id = ?", *values, record.id),
                *self._inserts(record.id, journal, events),
            ],
            record.id,
        )
        return int(results[-1][0]["seq"])

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        check_writes(journal, events)
        results = await self._batch([(_LEASE_GUARD, run_id, owner), *self._inserts(run_id, journal, events)], run_id)
        return int(results[-1][0]["seq"])

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        rows = await self._rows(
            "UPDATE runs SET lease_expires = ?, due_at = ?, version = version + 1 "
            "WHERE id = ? AND lease_owner = ? AND status = 'running' RETURNING version",
            expires,
            expires,
            run_id,
            owner,
        )
        return int(rows[0]["version"]) if rows else None

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        rows = await self._rows("SELECT key, value, error, meta FROM journal WHERE run_id = ?", run_id)
        return {row["key"]: journal_from_row(row["key"], row["value"], row["error"], row["meta"]) for row in rows}

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        if after >= _MAX_INT:
            return []
        rows = await self._rows(
            "SELECT seq, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            run_id,
            after,
            -1 if limit is None else min(limit, _MAX_INT),
        )
        return [StoredEvent(int(row["seq"]), row["data"]) for row in rows]

    async def last_seq(self, run_id: str) -> int:
        rows = await self._rows(_LAST_SEQ, run_id)
        return int(rows[0]["seq"])

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
        rows = await self._rows(f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY id DESC LIMIT ?", *params, limit + 1)
        runs = [run_from_row(_run_values(row)) for row in rows[:limit]]
        return RunPage(runs, runs[-1].id if len(rows) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        rows = await self._rows(DUE_RUNS, before, limit, before, limit)
        return [run_from_row(_run_values(row)) for row in rows]

    async def delete_run(self, run_id: str) -> bool:
        results = await self._batch(
            [
                ("DELETE FROM runs WHERE id = ? RETURNING id", run_id),
                ("DELETE FROM journal WHERE run_id = ?", run_id),
                ("DELETE FROM events WHERE run_id = ?", run_id),
            ]
        )
        return bool(results[0])

    async def get_state(self, scope: str, key: str) -> str | None:
        rows = await self._rows("SELECT value FROM state WHERE scope = ? AND key = ?", scope, key)
        return rows[0]["value"] if rows else None

    async def set_state(self, scope: str, key: str, value: str) -> None:
        check_text(scope, key, value)
        await self._rows(
            "INSERT INTO state (scope, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            scope,
            key,
            value,
        )

    async def delete_state(self, scope: str, key: str) -> None:
        await self._rows("DELETE FROM state WHERE scope = ? AND key = ?", scope, key)

    async def close(self) -> None:
        """Nothing to close: the binding belongs to the Worker."""

    # -- scheduled tasks: one claim per (task, tick), a lease until finished -----------------

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        """Insert the claim, or take over one whose lease lapsed (a claim without an expiry never lapses)."""
        results = await self._batch(
            [
                (
                    "INSERT INTO ticks (task, scheduled_at, owner, expires) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (task, scheduled_at) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
                    "WHERE ticks.done = 0 AND ticks.expires < ? RETURNING owner",
                    task,
                    scheduled_at,
                    owner,
                    expires,
                    now,
                ),
                ("DELETE FROM ticks WHERE task = ? AND scheduled_at < ?", task, scheduled_at - TICK_MEMORY),
            ]
        )
        return bool(results[0])

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        return bool(
            await self._rows(
                "UPDATE ticks SET expires = ? WHERE task = ? AND scheduled_at = ? AND owner = ? AND done = 0 "
                "RETURNING owner",
                expires,
                task,
                scheduled_at,
                owner,
            )
        )

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        return bool(
            await self._rows(
                "UPDATE ticks SET done = 1 WHERE task = ? AND scheduled_at = ? AND owner = ? AND done = 0 "
                "RETURNING owner",
                task,
                scheduled_at,
                owner,
            )
        )

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        rows = await self._rows(
            "SELECT scheduled_at FROM ticks WHERE task = ? AND scheduled_at >= ? AND done = 0 AND expires < ? "
            "ORDER BY scheduled_at",
            task,
            since,
            now,
        )
        return [float(row["scheduled_at"]) for row in rows]


def _row(record: RunRecord) -> tuple[Any, ...]:
    """The record's columns, refused before anything is sent when any text is not valid Unicode."""
    row = run_row(record)
    check_text(*(value for value in row if isinstance(value, str)))
    return row


def _rows_of(result: Any) -> list[dict[str, Any]]:
    """A D1 result's rows as Python dicts (a Pyodide proxy is converted; JavaScript ``null`` is None)."""
    value = result.to_py() if hasattr(result, "to_py") else result
    rows = value["results"] if isinstance(value, dict) else value.results
    null = _jsnull()
    return [
        {name: (None if null is not None and item is null else item) for name, item in dict(row).items()}
        for row in (rows or [])
    ]


def _jsnull() -> Any:
    """Pyodide's JavaScript ``null`` (None outside Pyodide)."""
    try:
        from pyodide.ffi import jsnull  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return jsnull


def _run_values(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in RUN_COLUMNS)


def _from_d1(exc: Exception) -> bool:
    """Whether ``exc`` came from the binding: D1's errors (``D1_ERROR: ...``) arrive as Pyodide's JsException."""
    return type(exc).__name__ == "JsException" or str(exc).startswith("D1_")


def _error(message: str, url: str, run_id: str) -> Exception:
    """A D1 error as the protocol's: a failed guard or unique key is a conflict, anything else an outage."""
    run = f"run {run_id}" if run_id else "the run"
    if "agent_unit_conflict" in message:
        return RunConflict(f"{run} was changed by someone else: read it again and retry")
    if "agent_unit_missing" in message:
        return RunNotFound(f"{run} does not exist")
    if "agent_unit_lease" in message:
        return LeaseLost(f"{run} is no longer held by this executor")
    if "UNIQUE constraint failed: runs.id" in message:
        return RunConflict(f"{run} already exists")
    if "UNIQUE constraint failed: journal." in message:
        return RunConflict(f"{run} already has a journal entry for that key")
    return unavailable("d1", "cannot be used", url=url, detail=message)
