"""The store over Cloudflare Durable Objects: each run in its own object, lists in an index object.

Used by the Durable Objects runtime (:mod:`.durable_objects_runtime`), which says how
runs execute and wake. Here: :class:`RunStorage` keeps one run (record, journal, events) in its
object's SQLite storage and sets the object's alarm to the run's ``due_at`` in the same write;
:class:`IndexStorage` keeps a copy of every run's record for ``GET /runs``, which object holds
which run, state and tick claims; :class:`DurableObjectsStore` is the store protocol over both.
Inside a run's object its own run is read and written locally, any other run through that
run's object, lists and state through the index. Objects talk through one RPC method,
``agent_unit_rpc(op, payload)``, taking and returning JSON text (:func:`answer` makes it).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ...errors import LeaseLost, RunConflict, RunNotFound, StoreUnavailable, StoreValueError
from ...stores.protocol import TICK_MEMORY
from ...stores.rows import (
    RUN_COLUMNS,
    check_text,
    check_writes,
    journal_from_row,
    journal_row,
    list_filter,
    run_from_row,
    run_row,
)

__all__ = [
    "INDEX_BINDING",
    "INDEX_NAME",
    "RELIST_AFTER",
    "RUNS_BINDING",
    "DurableObjectsStore",
    "IndexStorage",
    "RunStorage",
    "answer",
]

RUNS_BINDING = "AGENT_UNIT_RUNS"
INDEX_BINDING = "AGENT_UNIT_INDEX"
INDEX_NAME = "agent-unit"
"""The name of the one index object (``idFromName``)."""

log = logging.getLogger("agent_unit.stores.durable_objects")

_COLUMNS = ", ".join(RUN_COLUMNS)
_SET_COLUMNS = ", ".join(f"{name} = ?" for name in RUN_COLUMNS[1:])
_RUN_TABLE = """CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY, agent TEXT NOT NULL, thread_id TEXT NOT NULL, status TEXT NOT NULL,
  version INTEGER NOT NULL, lease_owner TEXT, lease_expires REAL, due_at REAL, data TEXT NOT NULL{extra}
)"""
_RUN_SCHEMA = (
    _RUN_TABLE.format(extra=""),
    "CREATE TABLE IF NOT EXISTS journal (key TEXT PRIMARY KEY, value TEXT, error TEXT, meta TEXT)",
    "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)",
)
_INDEX_SCHEMA = (
    _RUN_TABLE.format(extra=", object TEXT NOT NULL"),
    "CREATE INDEX IF NOT EXISTS runs_status ON runs (status, id)",
    "CREATE INDEX IF NOT EXISTS runs_agent ON runs (agent, id)",
    "CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, id)",
    "CREATE TABLE IF NOT EXISTS state (scope TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
    "PRIMARY KEY (scope, key))",
    "CREATE TABLE IF NOT EXISTS ticks (task TEXT NOT NULL, at REAL NOT NULL, owner TEXT NOT NULL, "
    "expires REAL, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (task, at))",
)
_MAX_INT = 2**63 - 1
RELIST_AFTER = 60.0
"""Seconds after a save the index missed before the run's alarm lists it again."""


def _rows(cursor: Any) -> list[dict[str, Any]]:
    """A ``sql.exec`` cursor's rows as dicts (under Pyodide they are JS objects: ``to_py``)."""
    rows = cursor.toArray()
    return list(rows.to_py() if hasattr(rows, "to_py") else rows)


def _values(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in RUN_COLUMNS)


class RunStorage:
    """One run in its object's SQLite storage (``ctx.storage``); the alarm follows ``due_at``.

    Each write is synchronous SQL with its checks made before anything is written, inside
    ``transactionSync``: a Durable Object runs one event at a time, so nothing interleaves.
    """

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self.sql = storage.sql
        for statement in _RUN_SCHEMA:
            self.sql.exec(statement)
        found = _rows(self.sql.exec("SELECT id FROM runs LIMIT 1"))
        self.run_id: str | None = found[0]["id"] if found else None
        """The run this object holds (None until one is created here)."""

    def _transaction(self, fn: Callable[[], Any]) -> Any:
        sync = getattr(self.storage, "transactionSync", None)
        return fn() if sync is None else sync(fn)

    async def alarm_by(self, at: float) -> None:
        """Make sure the alarm fires by ``at`` (an earlier one stays)."""
        current = await self.storage.getAlarm()
        if current is None or float(current) > math.ceil(at * 1000):
            await self.storage.setAlarm(math.ceil(at * 1000))

    async def _alarm(self, due_at: float | None) -> None:
        if due_at is None:
            await self.storage.deleteAlarm()
        else:
            await self.storage.setAlarm(math.ceil(due_at * 1000))  # never before due_at: it would find nothing due

    def _insert(self, journal: Sequence[JournalEntry], events: Sequence[str]) -> int:
        for entry in journal:
            self.sql.exec(
                "INSERT INTO journal (key, value, error, meta) VALUES (?, ?, ?, ?)", *journal_row("", entry)[1:]
            )
        last = int(_rows(self.sql.exec("SELECT coalesce(max(seq), 0) AS last FROM events"))[0]["last"])
        for i, data in enumerate(events, 1):
            self.sql.exec("INSERT INTO events (seq, data) VALUES (?, ?)", last + i, data)
        return last + len(events)

    def _taken(self, journal: Sequence[JournalEntry]) -> list[str]:
        return [
            entry.key
            for entry in journal
            if _rows(self.sql.exec("SELECT 1 AS x FROM journal WHERE key = ?", entry.key))
        ]

    async def create(self, record: RunRecord, events: Sequence[str]) -> int:
        row = run_row(record)
        check_text(*(value for value in row if isinstance(value, str)))
        check_writes((), events)
        if self.run_id is not None:
            raise RunConflict(f"run {record.id} already exists" if self.run_id == record.id else "object is taken")

        def write() -> int:
            self.sql.exec(f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})", *row)
            return self._insert((), events)

        last = int(self._transaction(write))
        self.run_id = record.id
        await self._alarm(record.due_at)
        return last

    def load(self, run_id: str) -> RunRecord | None:
        found = _rows(self.sql.exec(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", run_id))
        return run_from_row(_values(found[0])) if found else None

    async def save(
        self, record: RunRecord, expected_version: int, journal: Sequence[JournalEntry], events: Sequence[str]
    ) -> tuple[int, RunRecord]:
        row = run_row(record)
        check_text(*(value for value in row if isinstance(value, str)))
        check_writes(journal, events)
        stored = self.load(record.id)
        if stored is None:
            raise RunNotFound(f"run {record.id} does not exist")
        if stored.version != expected_version:
            raise RunConflict(f"run {record.id} was changed by someone else: read it again and retry")
        if taken := self._taken(journal):
            raise RunConflict(f"run {record.id} already has a journal entry for {', '.join(taken)}")
        values = (*row[1:4], expected_version + 1, *row[5:])

        def write() -> int:
            self.sql.exec(f"UPDATE runs SET {_SET_COLUMNS} WHERE id = ?", *values, record.id)
            return self._insert(journal, events)

        last = int(self._transaction(write))
        await self._alarm(record.due_at)
        return last, record.model_copy(update={"version": expected_version + 1})

    def append(self, run_id: str, owner: str, journal: Sequence[JournalEntry], events: Sequence[str]) -> int:
        check_writes(journal, events)
        stored = self.load(run_id)
        if stored is None or stored.lease_owner != owner or stored.status != RunStatus.running:
            raise LeaseLost(f"run {run_id} is no longer held by this executor")
        if taken := self._taken(journal):
            raise RunConflict(f"run {run_id} already has a journal entry for {', '.join(taken)}")
        return int(self._transaction(lambda: self._insert(journal, events)))

    async def renew(self, run_id: str, owner: str, expires: float) -> int | None:
        stored = self.load(run_id)
        if stored is None or stored.lease_owner != owner or stored.status != RunStatus.running:
            return None
        self.sql.exec(
            "UPDATE runs SET lease_expires = ?, due_at = ?, version = version + 1 WHERE id = ?",
            expires,
            expires,
            run_id,
        )
        await self._alarm(expires)
        return stored.version + 1

    def journal(self, run_id: str) -> dict[str, JournalEntry]:
        if run_id != self.run_id:
            return {}
        rows = _rows(self.sql.exec("SELECT key, value, error, meta FROM journal"))
        return {row["key"]: journal_from_row(row["key"], row["value"], row["error"], row["meta"]) for row in rows}

    def events(self, run_id: str, after: int, limit: int | None) -> list[StoredEvent]:
        if run_id != self.run_id:
            return []
        rows = _rows(
            self.sql.exec(
                "SELECT seq, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                min(after, _MAX_INT),
                -1 if limit is None else min(limit, _MAX_INT),
            )
        )
        return [StoredEvent(int(row["seq"]), row["data"]) for row in rows]

    def last_seq(self, run_id: str) -> int:
        if run_id != self.run_id:
            return 0
        return int(_rows(self.sql.exec("SELECT coalesce(max(seq), 0) AS last FROM events"))[0]["last"])

    async def delete(self, run_id: str) -> bool:
        if run_id != self.run_id:
            return False

        def write() -> None:
            for table in ("runs", "journal", "events"):
                self.sql.exec(f"DELETE FROM {table}")

        self._transaction(write)
        self.run_id = None
        await self.storage.deleteAlarm()
        return True


class IndexStorage:
    """The index object's tables: a copy of every run's record, state, and tick claims."""

    def __init__(self, storage: Any) -> None:
        self.sql = storage.sql
        for statement in _INDEX_SCHEMA:
            self.sql.exec(statement)
        if "done" not in {row["name"] for row in _rows(self.sql.exec("PRAGMA table_info(ticks)"))}:
            # a ticks table from before leases: its claims have no expiry and never lapse
            self.sql.exec("ALTER TABLE ticks ADD COLUMN expires REAL")
            self.sql.exec("ALTER TABLE ticks ADD COLUMN done INTEGER NOT NULL DEFAULT 0")

    def put_run(self, obj: str, row: Sequence[Any]) -> None:
        """Keep the newest copy: a save that arrives after a later one changes nothing."""
        self.sql.exec(
            f"INSERT INTO runs ({_COLUMNS}, object) VALUES ({', '.join('?' * (len(RUN_COLUMNS) + 1))}) "
            f"ON CONFLICT (id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in RUN_COLUMNS[1:])} "
            "WHERE excluded.version >= runs.version",
            *row,
            obj,
        )

    def add_run(self, obj: str, row: Sequence[Any]) -> None:
        """List a new run: an id listed already is a conflict (ids are unique across objects)."""
        if self.object_of(str(row[0])) is not None:
            raise RunConflict(f"run {row[0]} already exists")
        self.put_run(obj, row)

    def drop_run(self, run_id: str) -> None:
        self.sql.exec("DELETE FROM runs WHERE id = ?", run_id)

    def object_of(self, run_id: str) -> str | None:
        found = _rows(self.sql.exec("SELECT object FROM runs WHERE id = ?", run_id))
        return found[0]["object"] if found else None

    def list_runs(
        self, status: str | None, agent: str | None, thread_id: str | None, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        clause, params = list_filter("?", status=status, agent=agent, thread_id=thread_id, cursor=cursor)
        rows = _rows(
            self.sql.exec(f"SELECT {_COLUMNS} FROM runs {clause} ORDER BY id DESC LIMIT ?", *params, limit + 1)
        )
        return {"rows": [list(_values(row)) for row in rows[:limit]], "more": len(rows) > limit}

    def get_state(self, scope: str, key: str) -> str | None:
        found = _rows(self.sql.exec("SELECT value FROM state WHERE scope = ? AND key = ?", scope, key))
        return found[0]["value"] if found else None

    def set_state(self, scope: str, key: str, value: str) -> None:
        self.sql.exec(
            "INSERT INTO state (scope, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            scope,
            key,
            value,
        )

    def delete_state(self, scope: str, key: str) -> None:
        self.sql.exec("DELETE FROM state WHERE scope = ? AND key = ?", scope, key)

    def claim_tick(self, task: str, at: float, owner: str, now: float, expires: float) -> bool:
        self.sql.exec("DELETE FROM ticks WHERE task = ? AND at < ?", task, at - TICK_MEMORY)
        found = _rows(
            self.sql.exec(
                "INSERT INTO ticks (task, at, owner, expires) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (task, at) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
                "WHERE ticks.done = 0 AND ticks.expires < ? RETURNING 1 AS x",
                task,
                at,
                owner,
                expires,
                now,
            )
        )
        return bool(found)

    def hold_tick(self, task: str, at: float, owner: str, expires: float | None) -> bool:
        """Renew the owner's claim to ``expires``, or finish it when ``expires`` is None."""
        change = "done = 1" if expires is None else "expires = ?"
        found = _rows(
            self.sql.exec(
                f"UPDATE ticks SET {change} WHERE task = ? AND at = ? AND owner = ? AND done = 0 RETURNING 1 AS x",
                *(() if expires is None else (expires,)),
                task,
                at,
                owner,
            )
        )
        return bool(found)

    def lapsed_ticks(self, task: str, since: float, now: float) -> list[float]:
        rows = _rows(
            self.sql.exec(
                "SELECT at FROM ticks WHERE task = ? AND at >= ? AND done = 0 AND expires < ? ORDER BY at",
                task,
                since,
                now,
            )
        )
        return [float(row["at"]) for row in rows]

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        """One RPC from another object or the Worker (``op`` is one of this class's methods)."""
        if op not in _INDEX_OPS:
            raise ValueError(f"unknown index operation {op!r}")
        return getattr(self, op)(**args)


_INDEX_OPS = frozenset(
    {
        "add_run",
        "put_run",
        "drop_run",
        "object_of",
        "list_runs",
        "get_state",
        "set_state",
        "delete_state",
        "claim_tick",
        "hold_tick",
        "lapsed_ticks",
    }
)
_ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (LeaseLost, RunConflict, RunNotFound, StoreValueError, StoreUnavailable)
}


def _answer(result: Any = None, error: Exception | None = None) -> str:
    if error is not None:
        return json.dumps({"error": [type(error).__name__, str(error)]})
    return json.dumps({"ok": result})


async def _remote(call: Awaitable[Any]) -> Any:
    """The result of an RPC answered with :func:`_answer`; the callee's store error is raised here."""
    try:
        answer = json.loads(str(await call))
    except Exception as exc:  # noqa: BLE001 - the object could not be reached (overloaded, reset, a network fault)
        raise StoreUnavailable(f"the durable-objects store cannot be reached ({type(exc).__name__})") from None
    if "error" in answer:
        name, message = answer["error"]
        raise _ERRORS.get(name, StoreUnavailable)(message)
    return answer["ok"]


def _check(record: RunRecord, events: Sequence[str], journal: Sequence[JournalEntry] = ()) -> None:
    """Refuse what no object could store before any object is asked (StoreValueError)."""
    check_text(*(value for value in run_row(record) if isinstance(value, str)))
    check_writes(journal, events)


class DurableObjectsStore:
    """The store protocol over run objects and the index (see the module's docstring).

    ``env`` holds the two bindings; ``home`` is the object's own :class:`RunStorage` when this
    store serves inside a run's object (its run is read and written here, without an RPC).
    ``object_id`` is that object's id (``ctx.id.toString()``).
    """

    url = "durable-objects://"

    def __init__(self, env: Any, *, home: RunStorage | None = None, object_id: str | None = None) -> None:
        self._runs = getattr(env, RUNS_BINDING)
        self._index_ns = getattr(env, INDEX_BINDING)
        self.home = home
        self.object_id = object_id
        self._objects: dict[str, str] = {}  # run id -> its object's id: never changes once made

    # -- talking to other objects --------------------------------------------------------

    async def index(self, op: str, **args: Any) -> Any:
        stub = self._index_ns.get(self._index_ns.idFromName(INDEX_NAME))
        return await _remote(stub.agent_unit_rpc(op, json.dumps(args)))

    def fresh_stub(self) -> Any:
        """A stub of a new, empty run object: a request that may start a run is served there."""
        return self._runs.get(self._runs.newUniqueId())

    async def stub_for(self, run_id: str) -> Any:
        """A stub of the object holding ``run_id``; None when no object holds it."""
        obj = await self._object(run_id)
        return None if obj is None else self._runs.get(self._runs.idFromString(obj))

    async def _object(self, run_id: str) -> str | None:
        if run_id not in self._objects:
            found = await self.index("object_of", run_id=run_id)
            if found is None:
                return None
            self._objects[run_id] = found
        return self._objects[run_id]

    async def _at(self, run_id: str, op: str, missing: Any, **args: Any) -> Any:
        """``op`` at the object holding ``run_id``; ``missing`` when no object holds it."""
        stub = await self.stub_for(run_id)
        if stub is None:
            return missing
        return await _remote(stub.agent_unit_rpc(op, json.dumps({"run_id": run_id, **args})))

    def _local(self, run_id: str) -> RunStorage | None:
        return self.home if self.home is not None and self.home.run_id == run_id else None

    async def _register(self, record: RunRecord, *, new: bool = False) -> None:
        await self.index("add_run" if new else "put_run", obj=self.object_id, row=list(run_row(record)))

    async def relist(self, record: RunRecord) -> None:
        """Update the run's copy in the index after a save here. The save stands if the index
        cannot be reached (this object is the run's truth): the list is stale until the run's
        next save or alarm, which lists it again."""
        try:
            await self._register(record)
        except StoreUnavailable:
            log.warning("the run list could not be updated for run %s; its next save or alarm does it", record.id)
            if self.home is not None:
                await self.home.alarm_by(record.updated_at.timestamp() + RELIST_AFTER)

    # -- the protocol ----------------------------------------------------------------------

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        _check(record, events)
        if self.home is not None and self.home.run_id is None:
            # Listed first: a run the index cannot find could never be reached by its id, and
            # the index refuses an id that exists in another object.
            await self._register(record, new=True)
            return await self.home.create(record, events)
        # Not in an empty run object: the run gets an object of its own.
        stub = self.fresh_stub()
        payload = {"record": list(run_row(record)), "events": list(events)}
        return int(await _remote(stub.agent_unit_rpc("create_run", json.dumps(payload))))

    async def load_run(self, run_id: str) -> RunRecord | None:
        if (local := self._local(run_id)) is not None:
            return local.load(run_id)
        row = await self._at(run_id, "load_run", None)
        return None if row is None else run_from_row(tuple(row))

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        _check(record, events, journal)
        if (local := self._local(record.id)) is not None:
            last, saved = await local.save(record, expected_version, journal, events)
            await self.relist(saved)
            return last
        payload = {
            "record": list(run_row(record)),
            "expected_version": expected_version,
            "journal": [list(journal_row("", entry)[1:]) for entry in journal],
            "events": list(events),
        }
        found = await self._at(record.id, "save_run", None, **payload)
        if found is None:
            raise RunNotFound(f"run {record.id} does not exist")
        return int(found)

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        if (local := self._local(run_id)) is not None:
            return local.append(run_id, owner, journal, events)
        rows = [list(journal_row("", entry)[1:]) for entry in journal]
        found = await self._at(run_id, "append", None, owner=owner, journal=rows, events=list(events))
        if found is None:
            raise LeaseLost(f"run {run_id} is no longer held by this executor")
        return int(found)

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        if (local := self._local(run_id)) is not None:
            return await local.renew(run_id, owner, expires)
        found = await self._at(run_id, "renew_lease", None, owner=owner, expires=expires)
        return None if found is None else int(found)

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        if (local := self._local(run_id)) is not None:
            return local.journal(run_id)
        rows = await self._at(run_id, "load_journal", [])
        return {row[0]: journal_from_row(*row) for row in rows}

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        if (local := self._local(run_id)) is not None:
            return local.events(run_id, after, limit)
        rows = await self._at(run_id, "read_events", [], after=min(after, _MAX_INT), limit=limit)
        return [StoredEvent(int(seq), data) for seq, data in rows]

    async def last_seq(self, run_id: str) -> int:
        if (local := self._local(run_id)) is not None:
            return local.last_seq(run_id)
        return int(await self._at(run_id, "last_seq", 0))

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        page = await self.index(
            "list_runs",
            status=None if status is None else RunStatus(status).value,
            agent=agent,
            thread_id=thread_id,
            limit=limit,
            cursor=cursor,
        )
        runs = [run_from_row(tuple(row)) for row in page["rows"]]
        return RunPage(runs, runs[-1].id if page["more"] else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        """This object's own run when it is due: each run's alarm sweeps it, nothing else does."""
        if self.home is None or self.home.run_id is None:
            return []
        record = self.home.load(self.home.run_id)
        if record is None or record.due_at is None or record.due_at > before or limit < 1:
            return []
        return [record]

    async def delete_run(self, run_id: str) -> bool:
        if (local := self._local(run_id)) is not None:
            deleted = await local.delete(run_id)
        else:
            deleted = bool(await self._at(run_id, "delete_run", False))
        await self.index("drop_run", run_id=run_id)
        self._objects.pop(run_id, None)
        return deleted

    async def alarm_by(self, run_id: str, at: float) -> None:
        """Make sure the alarm of the object holding ``run_id`` fires by ``at`` (epoch seconds)."""
        if (local := self._local(run_id)) is not None:
            await local.alarm_by(at)
        else:
            await self._at(run_id, "alarm_by", None, at=at)

    async def get_state(self, scope: str, key: str) -> str | None:
        found = await self.index("get_state", scope=scope, key=key)
        return None if found is None else str(found)

    async def set_state(self, scope: str, key: str, value: str) -> None:
        check_text(scope, key, value)
        await self.index("set_state", scope=scope, key=key, value=value)

    async def delete_state(self, scope: str, key: str) -> None:
        await self.index("delete_state", scope=scope, key=key)

    async def close(self) -> None:
        pass

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        found = await self.index("claim_tick", task=task, at=scheduled_at, owner=owner, now=now, expires=expires)
        return bool(found)

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        return bool(await self.index("hold_tick", task=task, at=scheduled_at, owner=owner, expires=expires))

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        return bool(await self.index("hold_tick", task=task, at=scheduled_at, owner=owner, expires=None))

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        found = await self.index("lapsed_ticks", task=task, since=since, now=now)
        return [float(at) for at in found or []]

    # -- serving another object's calls for this object's run ------------------------------

    async def serve(self, op: str, args: dict[str, Any]) -> Any:
        """Answer a run operation another object (or the Worker) sent to this run's object."""
        home = self.home
        if home is None:
            raise RuntimeError("only a run's object serves run operations")
        if op == "create_run":
            record = run_from_row(tuple(args["record"]))
            return await self.create_run(record, events=args["events"])
        run_id = args["run_id"]
        if home.run_id != run_id:
            return None if op != "delete_run" else False
        journal = [journal_from_row(*row) for row in args.get("journal", ())]
        if op == "load_run":
            found = home.load(run_id)
            return None if found is None else list(run_row(found))
        if op == "save_run":
            record = run_from_row(tuple(args["record"]))
            return await self.save_run(
                record, expected_version=args["expected_version"], journal=journal, events=args["events"]
            )
        if op == "append":
            return home.append(run_id, args["owner"], journal, args["events"])
        if op == "renew_lease":
            return await home.renew(run_id, args["owner"], args["expires"])
        if op == "load_journal":
            return [journal_row("", entry)[1:] for entry in home.journal(run_id).values()]
        if op == "read_events":
            return [[event.seq, event.data] for event in home.events(run_id, args["after"], args["limit"])]
        if op == "last_seq":
            return home.last_seq(run_id)
        if op == "delete_run":
            return await home.delete(run_id)
        if op == "alarm_by":
            return await home.alarm_by(args["at"])
        raise ValueError(f"unknown run operation {op!r}")


async def answer(call: Awaitable[Any]) -> str:
    """``call``'s result as RPC text; a store error travels as its class name and message."""
    try:
        return _answer(await call)
    except tuple(_ERRORS.values()) as exc:
        return _answer(error=exc)
