"""``postgres://``: many processes over one PostgreSQL, exact, with psycopg 3 (async, a pool).

Each write is one statement, so one round trip, and atomic on its own: data-modifying CTEs
update the run and insert its journal entries and events together. The run's row is the
fence and the seq counter at once: ``UPDATE … WHERE version = $expected`` (a save) or
``WHERE lease_owner = $owner AND status = 'running'`` (an append) takes the row lock, bumps
``seq`` by the number of events and returns it, and the events are inserted with the seqs
just minted. Two writers on one run queue on that row lock; a loser of the compare-and-set
updates nothing and writes nothing. A journal key written twice violates the primary key
and the whole statement rolls back. ``pg_notify`` in the same statement wakes readers in
every process once the write commits.

The schema is created and migrated through a small ledger (``agent_unit_migrations``): a
start with nothing to do reads one row and takes no lock.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from .._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ..errors import LeaseLost, RunConflict, RunNotFound, StoreConfigError
from ._listen import HEARING, Listener
from ._pg_pool import Connections
from .protocol import TICK_MEMORY
from .rows import RUN_COLUMNS, VALUE_ERRORS, journal_from_row, list_filter, run_from_row, run_row, value_error
from .urls import number, options, safe_url, unavailable, unreachable

__all__ = ["PostgresStore"]

log = logging.getLogger("agent_unit.stores.postgres")

CHANNEL = "agent_unit_events"
_LOCK = 0x6167656E74  # the advisory lock migrations take ("agent")

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE agent_unit_runs (
      id text PRIMARY KEY,
      agent text NOT NULL,
      thread_id text NOT NULL,
      status text NOT NULL,
      version bigint NOT NULL,
      lease_owner text,
      lease_expires double precision,
      due_at double precision,
      data text NOT NULL,
      seq bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX agent_unit_runs_due ON agent_unit_runs (due_at) WHERE due_at IS NOT NULL;
    CREATE INDEX agent_unit_runs_status ON agent_unit_runs (status, id);
    CREATE INDEX agent_unit_runs_agent ON agent_unit_runs (agent, id);
    CREATE INDEX agent_unit_runs_thread ON agent_unit_runs (thread_id, id);
    CREATE TABLE agent_unit_journal (
      run_id text NOT NULL,
      key text NOT NULL,
      value text,
      error text,
      meta text,
      PRIMARY KEY (run_id, key)
    );
    CREATE TABLE agent_unit_events (
      run_id text NOT NULL,
      seq bigint NOT NULL,
      data text NOT NULL,
      PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE agent_unit_state (
      scope text NOT NULL,
      key text NOT NULL,
      value text NOT NULL,
      PRIMARY KEY (scope, key)
    );
    """,
    # scheduled tasks: one claim per (task, tick)
    """
    CREATE TABLE agent_unit_ticks (
      task text NOT NULL,
      scheduled_at double precision NOT NULL,
      owner text NOT NULL,
      PRIMARY KEY (task, scheduled_at)
    );
    """,
    # a tick's claim is a lease until finished: a claim made before has no expiry and never lapses
    """
    ALTER TABLE agent_unit_ticks ADD COLUMN expires double precision, ADD COLUMN done boolean NOT NULL DEFAULT false;
    """,
)

_COLUMNS = ", ".join(RUN_COLUMNS)

# The journal entries and events of one write, inserted only if the run's row was updated. They
# travel as one JSON text each: Python's C encoder makes that faster than psycopg adapting text
# arrays (a regular expression per element), and it is one parameter whatever the count.
_WRITES = (
    """
, journal AS (
  INSERT INTO agent_unit_journal (run_id, key, value, error, meta)
  SELECT %(id)s, key, value, error, meta FROM fence,
    json_to_recordset(%(journal)s::json) AS entry(key text, value text, error text, meta text)
), events AS (
  INSERT INTO agent_unit_events (run_id, seq, data)
  SELECT %(id)s, fence.seq - %(count)s + ordinal, data FROM fence,
    json_array_elements_text(%(events)s::json) WITH ORDINALITY AS event(data, ordinal)
)
SELECT seq, CASE WHEN %(count)s > 0 THEN pg_notify('"""
    + CHANNEL
    + """', %(id)s) END FROM fence
"""
)

_CREATE = (
    f"""
WITH fence AS (
  INSERT INTO agent_unit_runs ({_COLUMNS}, seq)
  VALUES (%(id)s, %(agent)s, %(thread_id)s, %(status)s, %(version)s, %(lease_owner)s, %(lease_expires)s,
          %(due_at)s, %(data)s, %(count)s)
  RETURNING seq
)"""
    + _WRITES
)

_SAVE = (
    """
WITH fence AS (
  UPDATE agent_unit_runs SET status = %(status)s, version = version + 1, lease_owner = %(lease_owner)s,
    lease_expires = %(lease_expires)s, due_at = %(due_at)s, data = %(data)s, seq = seq + %(count)s
  WHERE id = %(id)s AND version = %(expected)s
  RETURNING seq
)"""
    + _WRITES
)

_APPEND = (
    """
WITH fence AS (
  UPDATE agent_unit_runs SET seq = seq + %(count)s
  WHERE id = %(id)s AND lease_owner = %(owner)s AND status = 'running'
  RETURNING seq
)"""
    + _WRITES
)


def _writes(run_id: str, journal: Sequence[JournalEntry], events: Sequence[str]) -> dict[str, Any]:
    entries = [
        {
            "key": entry.key,
            "value": entry.value,
            "error": None if entry.error is None else json.dumps(entry.error, ensure_ascii=False),
            "meta": None if entry.meta is None else json.dumps(entry.meta, ensure_ascii=False),
        }
        for entry in journal
    ]
    # ensure_ascii=False: a lone surrogate fails when psycopg encodes the text (a StoreValueError)
    # rather than reaching the server escaped.
    return {
        "id": run_id,
        "keys": [entry.key for entry in journal],
        "journal": json.dumps(entries, ensure_ascii=False),
        "events": json.dumps(list(events), ensure_ascii=False),
        "count": len(events),
    }


def _columns(record: RunRecord) -> dict[str, Any]:
    return dict(zip(RUN_COLUMNS, run_row(record), strict=True))


class PostgresStore:
    """``postgres://user:password@host:5432/db?pool_max=10`` (``postgresql://`` too)."""

    def __init__(self, url: str, *, pool_max: int = 10) -> None:
        self.url = safe_url(url)
        self._conninfo = url
        self._secret = _password(url)
        self._pool = Connections(url, pool_max)
        self._ready = False
        self._opening = asyncio.Lock()
        self._listener = Listener(self.url, self._notifications)

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        found = options("postgres", url, None)  # a port that is not a number; libpq checks the rest below
        parts = urlsplit(url)
        pool = {"pool_max": number("postgres", "pool_max", found.pop("pool_max"))} if "pool_max" in found else {}
        if pool and pool["pool_max"] < 1:
            raise StoreConfigError(f"invalid postgres store URL: pool_max={pool['pool_max']} must be at least 1")
        query = urlencode({key: values[-1] for key, values in parse_qs(parts.query).items() if key != "pool_max"})
        scheme = "postgresql" if parts.scheme in ("postgres", "postgresql") else parts.scheme
        conninfo = urlunsplit((scheme, parts.netloc, parts.path, query, ""))
        try:
            conninfo_to_dict(conninfo)  # libpq's own parser: an unknown option is named here, not at connect
        except ProgrammingError as exc:
            raise StoreConfigError(f"invalid postgres store URL: {_reason(exc)}") from None
        return cls(conninfo, **pool)

    async def _open(self) -> None:
        """Connect once (the real reason when that fails: no server, a wrong password), migrate, open the pool."""
        import psycopg

        async with self._opening:
            if self._ready:
                return
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, connect_timeout=5)
                async with conn:
                    await _migrate(conn)
            except psycopg.Error as exc:
                reason = _reason(exc, self._secret)
                if "password" in reason:
                    raise unavailable(
                        "postgres", "refused the password", url=self.url, detail=reason, then="check the store URL"
                    ) from None
                if isinstance(exc, psycopg.OperationalError):
                    raise unreachable("postgres", url=self.url, detail=reason) from None
                raise unavailable("postgres", "cannot be used", url=self.url, detail=reason) from None
            self._ready = True

    async def check(self) -> None:
        """Connect and migrate now: a clear error at start, naming the store without its password."""
        await self._open()

    async def _fetch(self, sql: str, params: Any = None, *, read: bool = False) -> list[tuple[Any, ...]]:
        """One statement on a pooled connection. A read is tried again once: after a server
        restart the pooled connections are dead, and the pool replaces them. A write is not: its
        reply may have been lost after it committed, so it fails as StoreUnavailable and the run
        is recovered from its journal."""
        import psycopg

        if not self._ready:
            await self._open()
        for attempt in (1, 2):
            try:
                async with self._pool.connection() as conn:
                    cursor = await conn.execute(sql, params)
                    return await cursor.fetchall() if cursor.description else []
            except psycopg.OperationalError as exc:
                await self._pool.drop_idle()  # after a restart they are all dead: not one failure at a time
                if not read or attempt == 2:
                    reason = _reason(exc, self._secret)
                    raise unreachable("postgres", url=self.url, detail=reason) from None
            except (psycopg.DataError, *VALUE_ERRORS) as exc:
                # The value, not the server: text psycopg cannot encode, a NUL, JSON or a number
                # PostgreSQL refuses (SQLSTATE class 22). Nothing was written; it would fail again.
                raise value_error(exc) from None
        raise AssertionError("unreachable")

    async def _write(self, sql: str, params: dict[str, Any], run_id: str) -> int | None:
        """One write statement; the run's new last seq, or None when the fence let nothing through."""
        import psycopg

        try:
            rows = await self._fetch(sql, params)
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.table_name == "agent_unit_runs":
                raise RunConflict(f"run {run_id} already exists") from None
            raise RunConflict(f"run {run_id} already has a journal entry for one of {params['keys']}") from None
        return int(rows[0][0]) if rows else None

    # runs

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        params = {**_writes(record.id, (), events), **_columns(record)}
        seq = await self._write(_CREATE, params, record.id)
        return seq or 0

    async def load_run(self, run_id: str) -> RunRecord | None:
        rows = await self._fetch(f"SELECT {_COLUMNS} FROM agent_unit_runs WHERE id = %s", (run_id,), read=True)
        return run_from_row(rows[0]) if rows else None

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        params = {**_writes(record.id, journal, events), **_columns(record), "expected": expected_version}
        seq = await self._write(_SAVE, params, record.id)
        if seq is None:
            if not await self._fetch("SELECT 1 FROM agent_unit_runs WHERE id = %s", (record.id,), read=True):
                raise RunNotFound(f"run {record.id} does not exist")
            raise RunConflict(f"run {record.id} was changed by someone else: read it again and retry")
        return seq

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        seq = await self._write(_APPEND, {**_writes(run_id, journal, events), "owner": owner}, run_id)
        if seq is None:
            raise LeaseLost(f"run {run_id} is no longer held by this executor")
        return seq

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        rows = await self._fetch(
            "UPDATE agent_unit_runs SET lease_expires = %(expires)s, due_at = %(expires)s, version = version + 1 "
            "WHERE id = %(id)s AND lease_owner = %(owner)s AND status = 'running' RETURNING version",
            {"id": run_id, "owner": owner, "expires": expires},
        )
        return int(rows[0][0]) if rows else None

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        rows = await self._fetch(
            "SELECT key, value, error, meta FROM agent_unit_journal WHERE run_id = %s", (run_id,), read=True
        )
        return {row[0]: journal_from_row(*row) for row in rows}

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        rows = await self._fetch(
            "SELECT seq, data FROM agent_unit_events WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s",
            (run_id, after, limit),
            read=True,
        )
        return [StoredEvent(int(seq), data) for seq, data in rows]

    async def last_seq(self, run_id: str) -> int:
        rows = await self._fetch("SELECT seq FROM agent_unit_runs WHERE id = %s", (run_id,), read=True)
        return int(rows[0][0]) if rows else 0

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        clause, params = list_filter("%s", status=status, agent=agent, thread_id=thread_id, cursor=cursor)
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM agent_unit_runs {clause} ORDER BY id DESC LIMIT %s",
            (*params, limit + 1),
            read=True,
        )
        runs = [run_from_row(row) for row in rows[:limit]]
        return RunPage(runs, runs[-1].id if len(rows) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM agent_unit_runs WHERE due_at <= %s ORDER BY due_at LIMIT %s",
            (before, limit),
            read=True,
        )
        return [run_from_row(row) for row in rows]

    async def delete_run(self, run_id: str) -> bool:
        rows = await self._fetch(
            "WITH gone AS (DELETE FROM agent_unit_runs WHERE id = %(id)s RETURNING id), "
            "journal AS (DELETE FROM agent_unit_journal WHERE run_id = %(id)s), "
            "events AS (DELETE FROM agent_unit_events WHERE run_id = %(id)s) "
            "SELECT count(*) FROM gone",
            {"id": run_id},
        )
        return bool(rows and rows[0][0])

    # state

    async def get_state(self, scope: str, key: str) -> str | None:
        rows = await self._fetch(
            "SELECT value FROM agent_unit_state WHERE scope = %s AND key = %s", (scope, key), read=True
        )
        return rows[0][0] if rows else None

    async def set_state(self, scope: str, key: str, value: str) -> None:
        await self._fetch(
            "INSERT INTO agent_unit_state (scope, key, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            (scope, key, value),
        )

    async def delete_state(self, scope: str, key: str) -> None:
        await self._fetch("DELETE FROM agent_unit_state WHERE scope = %s AND key = %s", (scope, key))

    # live tails

    def watch(self, notify: Callable[[str], None], hearing: Callable[[bool], None]) -> None:
        """Call ``notify(run_id)`` whenever any process stores events (LISTEN/NOTIFY), until closed;
        ``hearing(True)`` once listening, ``hearing(False)`` when the connection is lost."""
        self._listener.start(notify, hearing)

    async def _notifications(self) -> AsyncIterator[str]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            yield HEARING  # in effect once it returns: every write after it is heard
            async for message in conn.notifies():
                yield message.payload

    async def close(self) -> None:
        await self._listener.close()
        await self._pool.close()

    # -- scheduled tasks: one claim per (task, tick), a lease until finished -----------------

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        """An upsert that takes over only a lapsed unfinished claim, forgetting the task's old
        claims in the same statement."""
        rows = await self._fetch(
            "WITH old AS (DELETE FROM agent_unit_ticks WHERE task = %(task)s AND scheduled_at < %(before)s) "
            "INSERT INTO agent_unit_ticks AS t (task, scheduled_at, owner, expires) "
            "VALUES (%(task)s, %(at)s, %(owner)s, %(expires)s) "
            "ON CONFLICT (task, scheduled_at) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
            "WHERE NOT t.done AND t.expires < %(now)s RETURNING 1",
            {
                "task": task,
                "at": scheduled_at,
                "owner": owner,
                "expires": expires,
                "now": now,
                "before": scheduled_at - TICK_MEMORY,
            },
        )
        return bool(rows)

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        rows = await self._fetch(
            "UPDATE agent_unit_ticks SET expires = %s WHERE task = %s AND scheduled_at = %s AND owner = %s "
            "AND NOT done RETURNING 1",
            (expires, task, scheduled_at, owner),
        )
        return bool(rows)

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        rows = await self._fetch(
            "UPDATE agent_unit_ticks SET done = true WHERE task = %s AND scheduled_at = %s AND owner = %s "
            "AND NOT done RETURNING 1",
            (task, scheduled_at, owner),
        )
        return bool(rows)

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        rows = await self._fetch(
            "SELECT scheduled_at FROM agent_unit_ticks WHERE task = %s AND scheduled_at >= %s AND NOT done "
            "AND expires < %s ORDER BY scheduled_at",
            (task, since, now),
            read=True,
        )
        return [float(row[0]) for row in rows]


async def _migrate(conn: Any) -> None:
    """Bring the schema up to date; with nothing to do, one read and no lock."""

    async def applied() -> int:
        cursor = await conn.execute("SELECT to_regclass('agent_unit_migrations') IS NOT NULL")
        row = await cursor.fetchone()
        if not row[0]:
            return 0
        cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM agent_unit_migrations")
        return int((await cursor.fetchone())[0])

    if await applied() >= len(MIGRATIONS):
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS agent_unit_migrations "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = await applied()  # another process may have migrated while we waited for the lock
        for version, sql in enumerate(MIGRATIONS[done:], done + 1):
            await conn.execute(sql)
            await conn.execute("INSERT INTO agent_unit_migrations (version) VALUES (%s)", (version,))


def _password(url: str) -> str | None:
    """The password in ``url`` (its user part, or ``?password=``), to blot out of the driver's messages."""
    from urllib.parse import parse_qs, unquote, urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password or parse_qs(parts.query).get("password", [None])[-1]
    except ValueError:
        return None
    return unquote(password) if password else None


def _reason(exc: BaseException, secret: str | None = None) -> str:
    """The driver's reason, first line only, with the password blotted out if the driver echoed it."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.replace(secret, "***") if secret else text
