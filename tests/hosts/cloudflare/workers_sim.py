"""A simulation of Cloudflare's Python Workers runtime: the ``workers`` and ``js`` modules.

Python Workers cannot run on a test machine (workerd downloads its Pyodide bundle when it
starts), so the Worker entry and both Durable Object classes run here against this stand-in.
It follows the API Cloudflare documents, and only that:

- ``workers``: ``DurableObject``, ``WorkerEntrypoint``, ``Request``, ``Response`` and
  ``workers.asgi.fetch(app, request, env, ctx)`` (as workers-py's adapter: the app's lifespan
  runs around every request, the body streams).
- Durable Object storage: ``ctx.storage.sql.exec(query, *bindings)`` returning a cursor
  (iterate rows, ``toArray()``, ``one()``, ``raw()``, ``columnNames``, ``rowsRead``,
  ``rowsWritten``) over a real SQLite database, ``transactionSync(fn)``, the key-value
  ``get``/``put``/``delete``/``list`` (kept in the same database, as Cloudflare does),
  ``setAlarm``/``getAlarm``/``deleteAlarm``, and ``alarm(info)`` delivered at least once and
  retried after it raises (``info.retryCount``, ``info.isRetry``).
- ``ctx.blockConcurrencyWhile(fn)``, ``ctx.waitUntil(promise)``, ``ctx.id`` (``toString()``,
  ``name``), namespaces' ``idFromName``/``newUniqueId``/``idFromString``/``get``, stubs'
  ``fetch`` and RPC methods, ``scheduled(controller, env, ctx)`` with ``controller.cron`` and
  ``controller.scheduledTime`` (milliseconds).
- ``js``: ``Object.keys``, ``Date.now``, ``URL.new``.

What it does not model: CPU limits, eviction timing, input/output gates beyond
``blockConcurrencyWhile``, and JS proxies (values cross as Python objects).

An *isolate* is one set of live instances. :meth:`WorkersSim.isolate` starts a new one over
the same storage (the old one's handles stop working, as a dead isolate's would); storage
persists across isolates and can be serialized (:meth:`WorkersSim.dump`/:meth:`WorkersSim.load`).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import sqlite3
import sys
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["WorkersSim"]


# -- HTTP ------------------------------------------------------------------------------------


class Headers:
    def __init__(self, values: Mapping[str, str] | Iterable[tuple[str, str]] | None = None) -> None:
        items = values.items() if isinstance(values, Mapping) else (values or [])
        self._items = [(str(k).lower(), str(v)) for k, v in items]

    def get(self, name: str, default: str | None = None) -> str | None:
        for key, value in self._items:
            if key == name.lower():
                return value
        return default

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def set(self, name: str, value: str) -> None:
        self._items = [(k, v) for k, v in self._items if k != name.lower()] + [(name.lower(), value)]


class Request:
    """``workers.Request``: ``url``, ``method``, ``headers`` and a body read once."""

    def __init__(
        self, url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None, body: bytes | str = b""
    ) -> None:
        self.url = url
        self.method = method
        self.headers = Headers(headers)
        self._body = body.encode() if isinstance(body, str) else body
        self.js_object = self

    async def bytes(self) -> bytes:
        return self._body

    async def text(self) -> str:
        return self._body.decode()

    async def json(self) -> Any:
        return json.loads(self._body)


class Response:
    """``workers.Response``: a body that is bytes, text, or streamed from an async iterator."""

    def __init__(
        self,
        body: bytes | str | AsyncIterator[bytes] | None = None,
        status: int = 200,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> None:
        self.status = status
        self.headers = Headers(headers)
        self._body = body.encode() if isinstance(body, str) else body

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._body is None:
            return
        if isinstance(self._body, bytes):
            yield self._body
            return
        async for chunk in self._body:
            yield chunk

    async def bytes(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def text(self) -> str:
        return (await self.bytes()).decode()

    async def json(self) -> Any:
        return json.loads(await self.bytes())


# -- workers.asgi: the adapter, as workers-py's ----------------------------------------------


async def asgi_fetch(app: Any, req: Request, env: Any, ctx: Any = None) -> Response:
    """Serve ``req`` with the ASGI ``app``: lifespan startup, the request, lifespan shutdown."""
    shutdown = await _start_application(app)
    url = urlsplit(req.url)
    scope = {
        "asgi": {"spec_version": "2.0", "version": "3.0"},
        "headers": [(k.encode(), v.encode()) for k, v in req.headers.items()],
        "http_version": "1.1",
        "method": req.method,
        "scheme": url.scheme,
        "path": unquote(url.path),
        "raw_path": url.path.encode(),
        "query_string": url.query.encode(),
        "type": "http",
        "env": env,
        "server": (url.hostname, url.port or 443),
        "client": ("127.0.0.1", 0),
        "root_path": "",
    }
    body = await req.bytes()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # a disconnect never comes while the response streams
        return {"type": "http.disconnect"}

    started: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.set_result(message)
        elif message["type"] == "http.response.body":
            if message.get("body"):
                await queue.put(message["body"])
            if not message.get("more_body"):
                await queue.put(None)

    async def serve() -> None:
        try:
            await app(scope, receive, send)
        finally:
            if not started.done():
                started.set_exception(RuntimeError("the ASGI app sent no response"))
            await queue.put(None)
            await shutdown()

    task = asyncio.ensure_future(serve())
    head = await started

    async def stream() -> AsyncIterator[bytes]:
        while (chunk := await queue.get()) is not None:
            yield chunk
        await task

    headers = [(k.decode(), v.decode()) for k, v in head.get("headers", [])]
    return Response(stream(), status=head["status"], headers=headers)


async def _start_application(app: Any) -> Callable[[], Awaitable[None]]:
    """Run the lifespan's startup; the returned coroutine function runs its shutdown."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    startup: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    await inbox.put({"type": "lifespan.startup"})

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            startup.set_result(True)
        elif message["type"] == "lifespan.startup.failed":
            startup.set_exception(RuntimeError(message.get("message", "lifespan startup failed")))
        elif message["type"].startswith("lifespan.shutdown") and not finished.done():
            finished.set_result(None)

    async def run() -> None:
        try:
            await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, send)
        except Exception:  # noqa: BLE001 - as workers-py: an app without lifespan support raises
            if not startup.done():
                startup.set_result(False)  # an app without lifespan support
        if not finished.done():
            finished.set_result(None)

    task = asyncio.ensure_future(run())
    if not await startup:
        return _nothing

    async def shutdown() -> None:
        await inbox.put({"type": "lifespan.shutdown"})
        await finished
        await task

    return shutdown


async def _nothing() -> None:
    return None


# -- Durable Object storage -------------------------------------------------------------------


class SqlCursor:
    """The cursor ``sql.exec`` returns: rows as objects keyed by column name."""

    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]], written: int) -> None:
        self.columnNames = columns
        self._rows = rows
        self.rowsRead = len(rows)
        self.rowsWritten = written

    def __iter__(self) -> Any:
        return (dict(zip(self.columnNames, row, strict=True)) for row in self._rows)

    def toArray(self) -> list[dict[str, Any]]:  # noqa: N802 - Cloudflare's name
        return list(self)

    def one(self) -> dict[str, Any]:
        if len(self._rows) != 1:
            raise RuntimeError(f"Expected exactly one result from SQL query, but got {len(self._rows)}.")
        return next(iter(self))

    def raw(self) -> Any:
        return (list(row) for row in self._rows)


class _Persistent:
    """One object's storage as it outlives isolates: a SQLite database and its alarm."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS _cf_KV (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID")
        self.alarm: float | None = None  # epoch milliseconds
        self.retries = 0


class IsolateGone(RuntimeError):
    """A handle of an isolate that is no longer running was used."""


class SqlStorage:
    def __init__(self, handle: Storage) -> None:
        self._handle = handle

    def exec(self, query: str, *bindings: Any) -> SqlCursor:
        db = self._handle._db()
        statements = [part for part in query.split(";") if part.strip()]
        if len(statements) > 1 and not bindings:
            before = db.total_changes
            for statement in statements:
                db.execute(statement)
            return SqlCursor([], [], db.total_changes - before)
        before = db.total_changes
        cursor = db.execute(query, bindings)
        rows = cursor.fetchall()
        columns = [column[0] for column in cursor.description or ()]
        return SqlCursor(columns, rows, db.total_changes - before)

    @property
    def databaseSize(self) -> int:  # noqa: N802 - Cloudflare's name
        db = self._handle._db()
        return int(db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0])


class Storage:
    """``ctx.storage`` of one object in one isolate."""

    def __init__(self, persistent: _Persistent, isolate: Isolate) -> None:
        self._persistent = persistent
        self._isolate = isolate
        self.sql = SqlStorage(self)

    def _db(self) -> sqlite3.Connection:
        if not self._isolate.alive:
            raise IsolateGone("this isolate was terminated")
        return self._persistent.db

    def transactionSync(self, fn: Callable[[], Any]) -> Any:  # noqa: N802 - Cloudflare's name
        db = self._db()
        db.execute("SAVEPOINT tx")
        try:
            result = fn()
        except BaseException:
            db.execute("ROLLBACK TO tx")
            db.execute("RELEASE tx")
            raise
        db.execute("RELEASE tx")
        return result

    async def get(self, key: str) -> Any:
        row = self._db().execute("SELECT value FROM _cf_KV WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    async def put(self, key: str, value: Any) -> None:
        self._db().execute("INSERT OR REPLACE INTO _cf_KV (key, value) VALUES (?, ?)", (key, json.dumps(value)))

    async def delete(self, key: str) -> bool:
        return self._db().execute("DELETE FROM _cf_KV WHERE key = ?", (key,)).rowcount == 1

    async def list(self, prefix: str = "") -> dict[str, Any]:
        rows = self._db().execute("SELECT key, value FROM _cf_KV WHERE key >= ? ORDER BY key", (prefix,))
        return {key: json.loads(value) for key, value in rows if key.startswith(prefix)}

    async def setAlarm(self, when: float) -> None:  # noqa: N802 - Cloudflare's name
        self._db()
        self._persistent.alarm = float(when)

    async def getAlarm(self) -> float | None:  # noqa: N802 - Cloudflare's name
        self._db()
        return self._persistent.alarm

    async def deleteAlarm(self) -> None:  # noqa: N802 - Cloudflare's name
        self._db()
        self._persistent.alarm = None


# -- Durable Objects --------------------------------------------------------------------------


@dataclass(frozen=True)
class DurableObjectId:
    hex: str
    name: str | None = None

    def toString(self) -> str:  # noqa: N802 - Cloudflare's name
        return self.hex

    def equals(self, other: DurableObjectId) -> bool:
        return self.hex == other.hex


class DurableObjectState:
    def __init__(self, object_id: DurableObjectId, storage: Storage) -> None:
        self.id = object_id
        self.storage = storage
        self._blocked: list[Awaitable[Any]] = []
        self._kept: list[asyncio.Future[Any]] = []

    def blockConcurrencyWhile(self, fn: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:  # noqa: N802
        future = asyncio.ensure_future(fn())
        self._blocked.append(future)
        return future

    def waitUntil(self, promise: Awaitable[Any]) -> None:  # noqa: N802 - Cloudflare's name
        self._kept.append(asyncio.ensure_future(promise))

    async def ready(self) -> None:
        """Events wait until every ``blockConcurrencyWhile`` callback has finished."""
        while self._blocked:
            await self._blocked.pop(0)


class DurableObject:
    """``workers.DurableObject``: subclasses get ``self.ctx`` and ``self.env``."""

    def __init__(self, ctx: DurableObjectState, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class WorkerEntrypoint:
    """``workers.WorkerEntrypoint``: subclasses get ``self.ctx`` and ``self.env``."""

    def __init__(self, ctx: ExecutionContext, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class Stub:
    def __init__(self, namespace: Namespace, object_id: DurableObjectId) -> None:
        self._namespace = namespace
        self.id = object_id

    async def fetch(self, request: Request | str, init: Mapping[str, Any] | None = None) -> Response:
        if isinstance(request, str):
            init = dict(init or {})
            request = Request(
                request, method=init.get("method", "GET"), headers=init.get("headers"), body=init.get("body", b"")
            )
        instance = await self._namespace.instance(self.id)
        response: Response = await instance.fetch(request)
        return response

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any) -> Any:
            instance = await self._namespace.instance(self.id)
            result = getattr(instance, name)(*args)
            return await result if inspect.isawaitable(result) else result

        return call


class Namespace:
    """A Durable Object binding (``env.AGENT_UNIT_RUNS``) in one isolate."""

    def __init__(self, isolate: Isolate, class_name: str) -> None:
        self._isolate = isolate
        self.class_name = class_name

    def idFromName(self, name: str) -> DurableObjectId:  # noqa: N802 - Cloudflare's name
        return DurableObjectId(hashlib.sha256(f"{self.class_name}:{name}".encode()).hexdigest(), name)

    def newUniqueId(self) -> DurableObjectId:  # noqa: N802 - Cloudflare's name
        return DurableObjectId(os.urandom(32).hex())

    def idFromString(self, hex_id: str) -> DurableObjectId:  # noqa: N802 - Cloudflare's name
        if len(hex_id) != 64:
            raise TypeError("Invalid Durable Object ID: must be 64 hex digits")
        return DurableObjectId(hex_id)

    def get(self, object_id: DurableObjectId) -> Stub:
        return Stub(self, object_id)

    async def instance(self, object_id: DurableObjectId) -> Any:
        return await self._isolate.instance(self.class_name, object_id)


# -- invocations ------------------------------------------------------------------------------


class ExecutionContext:
    def __init__(self) -> None:
        self.promises: list[asyncio.Future[Any]] = []

    def waitUntil(self, promise: Awaitable[Any]) -> None:  # noqa: N802 - Cloudflare's name
        self.promises.append(asyncio.ensure_future(promise))

    def passThroughOnException(self) -> None:  # noqa: N802 - Cloudflare's name
        pass

    async def settle(self) -> None:
        while waiting := [p for p in self.promises if not p.done()]:
            await asyncio.wait(waiting)
        for promise in self.promises:
            if not promise.cancelled() and promise.exception() is not None:
                raise promise.exception()  # type: ignore[misc]


@dataclass
class ScheduledController:
    scheduledTime: float  # noqa: N815 - Cloudflare's name
    cron: str
    retried: bool = False

    def noRetry(self) -> None:  # noqa: N802 - Cloudflare's name
        self.retried = False


@dataclass
class AlarmInvocationInfo:
    retryCount: int  # noqa: N815 - Cloudflare's name
    isRetry: bool  # noqa: N815 - Cloudflare's name


class Env(types.SimpleNamespace):
    """The Worker's ``env``: bindings and variables as attributes."""


@dataclass
class Isolate:
    sim: WorkersSim
    entry: type
    classes: dict[str, type]
    env: Env = field(default_factory=Env)
    alive: bool = True
    instances: dict[tuple[str, str], Any] = field(default_factory=dict)

    async def instance(self, class_name: str, object_id: DurableObjectId) -> Any:
        key = (class_name, object_id.hex)
        if key not in self.instances:
            persistent = self.sim.storage.setdefault(key, _Persistent())
            state = DurableObjectState(object_id, Storage(persistent, self))
            self.instances[key] = self.classes[class_name](state, self.env)
        found = self.instances[key]
        await found.ctx.ready()
        return found


class WorkersSim:
    """One Worker's deployment: its storage outlives isolates; tests drive requests, crons and alarms.

    ``clock`` gives the time (``.time()`` in seconds): alarms fire when it reaches them.
    """

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.storage: dict[tuple[str, str], _Persistent] = {}
        self.current: Isolate | None = None
        install(self)

    def isolate(
        self, entry: type, classes: Mapping[str, type], bindings: Mapping[str, str], variables: Mapping[str, Any] = {}
    ) -> Isolate:
        """A new isolate over the same storage: ``bindings`` maps a binding name to a class name.

        Nothing an earlier isolate set carries over: agent-unit keeps no process-wide binding
        (each invocation runs inside its own host).
        """
        if self.current is not None:
            self.current.alive = False
        isolate = Isolate(self, entry, dict(classes))
        for binding, class_name in bindings.items():
            setattr(isolate.env, binding, Namespace(isolate, class_name))
        for name, value in variables.items():
            setattr(isolate.env, name, value)
        self.current = isolate
        return isolate

    def now_ms(self) -> float:
        return float(self.clock.time() * 1000)

    async def fetch(self, request: Request) -> Response:
        """One request to the Worker; its ``waitUntil`` work finishes before this returns."""
        isolate = self._live()
        ctx = ExecutionContext()
        response: Response = await isolate.entry(ctx, isolate.env).fetch(request)
        body = await response.bytes()
        await ctx.settle()
        return Response(body, status=response.status, headers=response.headers.items())

    async def scheduled(self, cron: str, scheduled_time_ms: float | None = None) -> None:
        isolate = self._live()
        ctx = ExecutionContext()
        when = self.now_ms() if scheduled_time_ms is None else scheduled_time_ms
        await isolate.entry(ctx, isolate.env).scheduled(ScheduledController(when, cron), isolate.env, ctx)
        await ctx.settle()

    def alarms(self) -> dict[tuple[str, str], float]:
        return {key: p.alarm for key, p in self.storage.items() if p.alarm is not None}

    async def deliver_alarms(self, *, again: bool = False) -> int:
        """Run every alarm that is due now; ``again`` delivers each a second time too (at least once).

        An alarm that raises is set again and counted as a retry, as Cloudflare retries it.
        Returns how many alarm handlers ran.
        """
        isolate = self._live()
        ran = 0
        for (class_name, hex_id), persistent in list(self.storage.items()):
            if persistent.alarm is None or persistent.alarm > self.now_ms():
                continue
            when = persistent.alarm
            persistent.alarm = None  # cleared as the handler starts; one set inside it stays
            for _ in range(2 if again else 1):
                instance = await isolate.instance(class_name, DurableObjectId(hex_id))
                info = AlarmInvocationInfo(persistent.retries, persistent.retries > 0)
                ran += 1
                try:
                    await instance.alarm(info)
                except Exception:  # noqa: BLE001 - Cloudflare retries an alarm that raised anything
                    persistent.retries += 1
                    if persistent.alarm is None:
                        persistent.alarm = when
                    break
                persistent.retries = 0
        return ran

    def dump(self) -> dict[str, Any]:
        """Every object's storage as plain data (SQLite's serialized bytes and the alarm)."""
        return {f"{c}/{h}": [p.db.serialize().hex(), p.alarm] for (c, h), p in self.storage.items()}

    def load(self, dumped: Mapping[str, Any]) -> None:
        for key, (data, alarm) in dumped.items():
            class_name, hex_id = key.split("/")
            persistent = _Persistent()
            persistent.db.deserialize(bytes.fromhex(data))
            persistent.alarm = alarm
            self.storage[(class_name, hex_id)] = persistent

    def _live(self) -> Isolate:
        if self.current is None:
            raise RuntimeError("start an isolate first: sim.isolate(...)")
        return self.current


def install(sim: WorkersSim) -> None:
    """Put the ``workers`` and ``js`` modules into ``sys.modules`` (as Pyodide's runtime does)."""
    workers = types.ModuleType("workers")
    workers.DurableObject = DurableObject  # type: ignore[attr-defined]
    workers.WorkerEntrypoint = WorkerEntrypoint  # type: ignore[attr-defined]
    workers.Request = Request  # type: ignore[attr-defined]
    workers.Response = Response  # type: ignore[attr-defined]
    asgi = types.ModuleType("workers.asgi")
    asgi.fetch = asgi_fetch  # type: ignore[attr-defined]
    workers.asgi = asgi  # type: ignore[attr-defined]
    js = types.ModuleType("js")
    js.Object = types.SimpleNamespace(keys=lambda value: list(vars(value)))  # type: ignore[attr-defined]
    js.Date = types.SimpleNamespace(now=sim.now_ms)  # type: ignore[attr-defined]
    js.URL = types.SimpleNamespace(new=urlsplit)  # type: ignore[attr-defined]
    sys.modules["workers"] = workers
    sys.modules["workers.asgi"] = asgi
    sys.modules["js"] = js


def uninstall() -> None:
    for name in ("workers", "workers.asgi", "js"):
        sys.modules.pop(name, None)
