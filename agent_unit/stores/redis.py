"""``redis://`` (and ``rediss://``): many processes over one Redis or Valkey, exact.

Every write that must be atomic is one Lua script, which Redis runs with nothing else in
between: the compare-and-set on ``version``, the lease fence, the journal's one-entry-per-key
rule and seq minting all happen inside it, never as a read followed by a write. A run is a
hash (the codec's columns, plus its last ``seq``); its journal a hash; its events a sorted
set scored by seq. Sorted sets index the runs by id (newest first), status, agent and
thread, and by ``due_at`` for the sweep. Every script that stores events publishes the run's
id, so a reader in another process wakes at once.

Keys share a prefix (``?prefix=``, default ``agent-unit:``). A script names keys it builds
from that prefix, so this store needs a single Redis (or Valkey) server, not a cluster.

Commands share a pool of ``?max_connections=`` (default 50) connections. A burst larger than
the pool queues for one (redis-py's ``BlockingConnectionPool``) for up to ``?pool_timeout=``
seconds (default 10), then fails as :class:`StoreUnavailable` (a 503 with ``Retry-After``):
never at once, as redis-py's default pool does when it is full. The live tail's subscription
has a connection of its own, outside the pool, and wakes every reader of the process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from .._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ..errors import LeaseLost, RunConflict, RunNotFound, StoreConfigError
from ._listen import HEARING, Listener
from .protocol import TICK_MEMORY
from .rows import VALUE_ERRORS, run_from_row, run_row, value_error
from .urls import number, options, safe_url, seconds, unavailable, unreachable

__all__ = ["RedisStore"]

log = logging.getLogger("agent_unit.stores.redis")

T = TypeVar("T")

_Row = list[str | None]
"""A reply, as the client reads it: redis-py's hints say ``bytes | str``, and with ``decode_responses``
every reply is ``str``, so the reads below ``cast`` to what it is."""
_FIELDS = ("agent", "thread_id", "status", "version", "lease_owner", "lease_expires", "due_at", "data")

_PRELUDE = """
local p, id = ARGV[1], ARGV[2]
local run, journal, events = KEYS[1], KEYS[2], KEYS[3]

local function taken(first)
  for k = 0, tonumber(ARGV[first]) - 1 do
    local key = ARGV[first + 1 + 2 * k]
    if redis.call('HEXISTS', journal, key) == 1 then return key end
  end
  return nil
end

local function write(first)
  local n = tonumber(ARGV[first])
  for k = 0, n - 1 do
    redis.call('HSET', journal, ARGV[first + 1 + 2 * k], ARGV[first + 2 + 2 * k])
  end
  local at = first + 1 + 2 * n
  local count = tonumber(ARGV[at])
  local seq = tonumber(redis.call('HGET', run, 'seq') or '0')
  for k = 1, count do
    seq = seq + 1
    redis.call('ZADD', events, seq, seq .. ':' .. ARGV[at + k])
  end
  if count > 0 then
    redis.call('HSET', run, 'seq', seq)
    redis.call('PUBLISH', p .. 'tail', id)
  end
  return seq
end

local function due(at)
  if at == '' then redis.call('ZREM', p .. 'due', id) else redis.call('ZADD', p .. 'due', at, id) end
end
"""

# ARGV: prefix, id, agent, thread_id, status, version, lease_owner, lease_expires, due_at, data, 0, n, events...
_CREATE = (
    _PRELUDE
    + """
if redis.call('EXISTS', run) == 1 then return {1} end
redis.call('HSET', run, 'agent', ARGV[3], 'thread_id', ARGV[4], 'status', ARGV[5], 'version', ARGV[6],
  'lease_owner', ARGV[7], 'lease_expires', ARGV[8], 'due_at', ARGV[9], 'data', ARGV[10], 'seq', 0)
redis.call('ZADD', p .. 'runs', 0, id)
redis.call('ZADD', p .. 'agent:' .. ARGV[3], 0, id)
redis.call('ZADD', p .. 'thread:' .. ARGV[4], 0, id)
redis.call('ZADD', p .. 'status:' .. ARGV[5], 0, id)
due(ARGV[9])
return {0, write(11)}
"""
)

# ARGV: prefix, id, expected_version, status, lease_owner, lease_expires, due_at, data, journal..., events...
_SAVE = (
    _PRELUDE
    + """
local found = redis.call('HMGET', run, 'version', 'status')
if not found[1] then return {1} end
if found[1] ~= ARGV[3] then return {2} end
local key = taken(9)
if key then return {3, key} end
redis.call('HSET', run, 'version', tonumber(ARGV[3]) + 1, 'status', ARGV[4], 'lease_owner', ARGV[5],
  'lease_expires', ARGV[6], 'due_at', ARGV[7], 'data', ARGV[8])
if found[2] ~= ARGV[4] then
  redis.call('ZREM', p .. 'status:' .. found[2], id)
  redis.call('ZADD', p .. 'status:' .. ARGV[4], 0, id)
end
due(ARGV[7])
return {0, write(9)}
"""
)

# ARGV: prefix, id, owner, journal..., events...
_APPEND = (
    _PRELUDE
    + """
local found = redis.call('HMGET', run, 'lease_owner', 'status')
if found[1] ~= ARGV[3] or found[2] ~= 'running' then return {4} end
local key = taken(4)
if key then return {3, key} end
return {0, write(4)}
"""
)

# ARGV: prefix, id, owner, expires
_RENEW = (
    _PRELUDE
    + """
local found = redis.call('HMGET', run, 'lease_owner', 'status')
if found[1] ~= ARGV[3] or found[2] ~= 'running' then return {4} end
redis.call('HSET', run, 'lease_expires', ARGV[4], 'due_at', ARGV[4])
due(ARGV[4])
return {0, redis.call('HINCRBY', run, 'version', 1)}
"""
)

# ARGV: prefix, id
_DELETE = (
    _PRELUDE
    + """
local found = redis.call('HMGET', run, 'agent', 'thread_id', 'status')
if not found[1] then return {1} end
redis.call('DEL', run, journal, events)
redis.call('ZREM', p .. 'runs', id)
redis.call('ZREM', p .. 'agent:' .. found[1], id)
redis.call('ZREM', p .. 'thread:' .. found[2], id)
redis.call('ZREM', p .. 'status:' .. found[3], id)
redis.call('ZREM', p .. 'due', id)
return {0}
"""
)


# Scheduled tasks: a tick's claim is the hash ``tick:{task}:{at}`` (owner, expires, done); a
# string there is a claim from before leases, which never lapses. ``ticks-open:{task}`` holds the
# unfinished claims by tick, so listing the lapsed ones reads only those.
_CLAIM_TICK = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'string' then return 0 end
if kind == 'hash' then
  local held = redis.call('HMGET', KEYS[1], 'expires', 'done')
  if held[2] == '1' or tonumber(held[1]) >= tonumber(ARGV[3]) then return 0 end
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expires', ARGV[2], 'done', '0')
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tonumber(ARGV[4]) - tonumber(ARGV[5])))
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
"""

_HOLD_TICK = """
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local held = redis.call('HMGET', KEYS[1], 'owner', 'done')
if held[1] ~= ARGV[1] or held[2] == '1' then return 0 end
if ARGV[2] == 'done' then
  redis.call('HSET', KEYS[1], 'done', '1')
  redis.call('ZREM', KEYS[2], ARGV[3])
else
  redis.call('HSET', KEYS[1], 'expires', ARGV[2])
end
return 1
"""
"""Renew (``ARGV[2]`` the new expiry) or finish (``ARGV[2]`` = ``done``) the owner's claim."""

_LAPSED_TICKS = """
local found = {}
for _, at in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], '+inf')) do
  local held = redis.call('HMGET', ARGV[1] .. at, 'expires', 'done')
  if held[1] and held[2] ~= '1' and tonumber(held[1]) < tonumber(ARGV[3]) then table.insert(found, at) end
end
return found
"""


_SSL_OPTIONS: tuple[str, ...] = (
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_ca_data",
    "ssl_certfile",
    "ssl_keyfile",
)
_SSL_OPTIONS += ("ssl_password", "client_name", "username", "password")
_OURS = frozenset({"prefix", "max_connections", "pool_timeout"})
"""The URL's options this store takes itself; redis-py gets the rest."""

MAX_CONNECTIONS = 50
"""Connections in the pool, by default: a burst beyond them queues (``?max_connections=``)."""
POOL_TIMEOUT = 10.0
"""Seconds a command waits for a free connection before it fails as a 503, by default (``?pool_timeout=``)."""


def _busy_errors() -> tuple[type[Exception], ...]:
    from redis.exceptions import BusyLoadingError, MasterDownError, OutOfMemoryError, ReadOnlyError, TryAgainError

    return (BusyLoadingError, MasterDownError, OutOfMemoryError, ReadOnlyError, TryAgainError)


def _waited_in_vain(exc: BaseException) -> bool:
    """The pool had no free connection within ``pool_timeout``: busy, not unreachable.

    redis-py's ``BlockingConnectionPool`` raises a ``ConnectionError`` from the ``TimeoutError``
    of its wait; no other ``ConnectionError`` has a ``TimeoutError`` as its cause (a connect that
    times out is redis-py's own ``TimeoutError``). ``MaxConnectionsError`` is the full pool of
    redis-py's default pool, which this store does not use, named here should a pool raise it.
    """
    from redis.exceptions import MaxConnectionsError

    return isinstance(exc, MaxConnectionsError) or isinstance(exc.__cause__, TimeoutError)


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def _entries(journal: Sequence[JournalEntry]) -> list[str]:
    args = [str(len(journal))]
    for entry in journal:
        # ensure_ascii=False: a lone surrogate fails when redis-py encodes it (a StoreValueError), as in every store
        args += [
            entry.key,
            json.dumps([entry.value, entry.error, entry.meta], separators=(",", ":"), ensure_ascii=False),
        ]
    return args


def _events(events: Sequence[str]) -> list[str]:
    return [str(len(events)), *events]


class RedisStore:
    """``redis://[:password@]host:6379/0?prefix=agent-unit:`` (``rediss://`` for TLS)."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "agent-unit:",
        max_connections: int = MAX_CONNECTIONS,
        pool_timeout: float = POOL_TIMEOUT,
    ) -> None:
        import redis.asyncio as redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.url = safe_url(url)
        self._prefix = prefix
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        # No blind retries: a write whose reply was lost may have landed, so it fails as
        # StoreUnavailable (the run is recovered from its journal); reads retry once in _read.
        retry = Retry(NoBackoff(), 0)
        pool = redis.BlockingConnectionPool.from_url(
            url, decode_responses=True, retry=retry, max_connections=max_connections, timeout=pool_timeout
        )
        self._redis = redis.Redis.from_pool(pool)  # closes the pool when it closes
        # The live tail's subscription holds a connection for as long as the process listens:
        # one of its own, so it never takes one of the pool's from a burst of reads.
        self._subscriber = redis.Redis.from_url(url, decode_responses=True, retry=retry, max_connections=1)
        self._scripts = {
            name: self._redis.register_script(source)
            for name, source in (
                ("create", _CREATE),
                ("save", _SAVE),
                ("append", _APPEND),
                ("renew", _RENEW),
                ("delete", _DELETE),
                ("claim_tick", _CLAIM_TICK),
                ("hold_tick", _HOLD_TICK),
                ("lapsed_ticks", _LAPSED_TICKS),
            )
        }
        self._listener = Listener(self.url, self._notifications)

    @classmethod
    def from_url(cls, url: str) -> RedisStore:
        from redis.connection import URL_QUERY_ARGUMENT_PARSERS

        allowed = {"prefix": "key prefix", **{name: "redis-py option" for name in URL_QUERY_ARGUMENT_PARSERS}}
        allowed |= {name: "redis-py option" for name in _SSL_OPTIONS}
        allowed |= {"max_connections": "connections in the pool", "pool_timeout": "seconds to wait for one"}
        allowed.pop("timeout", None)  # redis-py's name for the pool's wait: pool_timeout says which timeout it is
        found = options("redis", url, allowed)
        prefix = found.pop("prefix", "agent-unit:")
        pool: dict[str, Any] = {}
        if "max_connections" in found:
            pool["max_connections"] = number("redis", "max_connections", found.pop("max_connections"))
            if pool["max_connections"] < 1:
                raise StoreConfigError(
                    f"invalid redis store URL: max_connections={pool['max_connections']} must be at least 1"
                )
        if "pool_timeout" in found:
            pool["pool_timeout"] = seconds("redis", "pool_timeout", found.pop("pool_timeout"))
        parts = urlsplit(url)
        rest = urlencode({key: values[-1] for key, values in parse_qs(parts.query).items() if key not in _OURS})
        try:
            return cls(urlunsplit((parts.scheme, parts.netloc, parts.path, rest, "")), prefix=prefix, **pool)
        except ValueError as exc:  # redis-py's own check of an option's value; it never repeats the password
            raise StoreConfigError(f"invalid redis store URL: {exc}") from None

    def _keys(self, run_id: str) -> list[str]:
        p = self._prefix
        return [f"{p}run:{run_id}", f"{p}journal:{run_id}", f"{p}events:{run_id}"]

    @contextlib.contextmanager
    def _reachable(self) -> Iterator[None]:
        """Connection trouble (refused, timed out, a wrong password) as one error naming the store safely."""
        from redis.exceptions import AuthenticationError, ConnectionError, DataError, TimeoutError

        busy = _busy_errors()
        try:
            yield
        except AuthenticationError:
            raise unavailable("redis", "refused the password", url=self.url, then="check the store URL") from None
        except (ConnectionError, TimeoutError, OSError) as exc:
            if _waited_in_vain(exc):
                detail = (
                    f"none of its {self.max_connections} connections was free within {self.pool_timeout:g} s "
                    "(if this goes on, raise max_connections or pool_timeout in the store URL)"
                )
                raise unavailable("redis", "is busy", url=self.url, detail=detail) from None
            raise unreachable("redis", url=self.url, detail=repr(exc)) from None
        except busy as exc:  # the server is up but will not take writes now (out of memory, a replica...)
            raise unavailable("redis", "refused the write for now", url=self.url, detail=repr(exc)) from None
        except (DataError, *VALUE_ERRORS) as exc:  # a value redis-py cannot encode: nothing was sent
            raise value_error(exc) from None

    async def _read(self, read: Callable[[], Awaitable[T]]) -> T:
        """A read, tried again once on a fresh connection (after a server restart the pooled one is dead)."""
        from redis.exceptions import AuthenticationError, ConnectionError, TimeoutError

        with self._reachable():  # a value error (a key that is not valid Unicode) on the first try too
            try:
                return await read()
            except AuthenticationError:
                pass  # the same answer again: report it below
            except (ConnectionError, TimeoutError, OSError) as exc:
                if _waited_in_vain(exc):
                    raise  # it waited its bound for a connection already: not twice
            return await read()

    async def _call(self, script: str, run_id: str, args: list[str]) -> list[Any]:
        with self._reachable():
            return list(await self._scripts[script](keys=self._keys(run_id), args=[self._prefix, run_id, *args]))

    async def check(self) -> None:
        """One round trip: a clear error now, naming the store, instead of on the first request."""
        with self._reachable():
            await self._redis.ping()

    # runs

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        _, agent, thread_id, status, version, owner, expires, due_at, data = run_row(record)
        args = [agent, thread_id, status, str(version), owner or "", _number(expires), _number(due_at), data]
        result = await self._call("create", record.id, [*args, "0", *_events(events)])
        if result[0] == 1:
            raise RunConflict(f"run {record.id} already exists")
        return int(result[1])

    async def load_run(self, run_id: str) -> RunRecord | None:
        found = cast(_Row, await self._read(lambda: self._redis.hmget(self._keys(run_id)[0], _FIELDS)))
        return _record(run_id, found)

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        _, _, _, status, _, owner, expires, due_at, data = run_row(record)
        args = [str(expected_version), status, owner or "", _number(expires), _number(due_at), data]
        result = await self._call("save", record.id, [*args, *_entries(journal), *_events(events)])
        return self._outcome(record.id, result)

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        result = await self._call("append", run_id, [owner, *_entries(journal), *_events(events)])
        return self._outcome(run_id, result)

    @staticmethod
    def _outcome(run_id: str, result: list[Any]) -> int:
        code = result[0]
        if code == 0:
            return int(result[1])
        if code == 1:
            raise RunNotFound(f"run {run_id} does not exist")
        if code == 2:
            raise RunConflict(f"run {run_id} was changed by someone else: read it again and retry")
        if code == 3:
            raise RunConflict(f"run {run_id} already has a journal entry for {result[1]}")
        raise LeaseLost(f"run {run_id} is no longer held by this executor")

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        result = await self._call("renew", run_id, [owner, repr(expires)])
        return int(result[1]) if result[0] == 0 else None

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        found = cast(dict[str, str], await self._read(lambda: self._redis.hgetall(self._keys(run_id)[1])))
        journal = {}
        for key, text in found.items():
            value, error, meta = json.loads(text)
            journal[key] = JournalEntry(key, value, error, meta)
        return journal

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        members = cast(
            list[str],
            await self._read(
                lambda: self._redis.zrangebyscore(
                    self._keys(run_id)[2], f"({after}", "+inf", start=0 if limit is not None else None, num=limit
                )
            ),
        )
        stored = []
        for member in members:
            seq, _, data = member.partition(":")
            stored.append(StoredEvent(int(seq), data))
        return stored

    async def last_seq(self, run_id: str) -> int:
        return int(await self._read(lambda: self._redis.hget(self._keys(run_id)[0], "seq")) or 0)

    async def _load_many(self, run_ids: Sequence[str]) -> list[RunRecord]:
        async def load() -> list[Any]:
            async with self._redis.pipeline(transaction=False) as pipe:
                for run_id in run_ids:
                    pipe.hmget(self._keys(run_id)[0], _FIELDS)
                return list(await pipe.execute())

        rows = await self._read(load)
        return [record for run_id, row in zip(run_ids, rows, strict=True) if (record := _record(run_id, row))]

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        p = self._prefix
        # Read the narrowest index; check the other conditions on the records.
        if thread_id is not None:
            index = f"{p}thread:{thread_id}"
        elif agent is not None:
            index = f"{p}agent:{agent}"
        elif status is not None:
            index = f"{p}status:{status}"
        else:
            index = f"{p}runs"
        found: list[RunRecord] = []
        upper = f"({cursor}" if cursor else "+"
        while len(found) <= limit:
            read = functools.partial(self._redis.zrevrangebylex, index, upper, "-", start=0, num=max(limit + 1, 50))
            ids = cast(list[str], await self._read(read))
            if not ids:
                break
            for record in await self._load_many(ids):
                if (
                    (status is None or record.status == status)
                    and (agent is None or record.agent == agent)
                    and (thread_id is None or record.thread_id == thread_id)
                ):
                    found.append(record)
            upper = f"({ids[-1]}"
        runs = found[:limit]
        return RunPage(runs, runs[-1].id if len(found) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        ids = cast(
            list[str],
            await self._read(
                lambda: self._redis.zrangebyscore(f"{self._prefix}due", "-inf", repr(before), start=0, num=limit)
            ),
        )
        records = await self._load_many(ids)
        return sorted(records, key=lambda record: record.due_at or 0.0)

    async def delete_run(self, run_id: str) -> bool:
        return bool((await self._call("delete", run_id, []))[0] == 0)

    # state

    async def get_state(self, scope: str, key: str) -> str | None:
        return cast(str | None, await self._read(lambda: self._redis.hget(f"{self._prefix}state:{scope}", key)))

    async def set_state(self, scope: str, key: str, value: str) -> None:
        with self._reachable():
            await self._redis.hset(f"{self._prefix}state:{scope}", key, value)

    async def delete_state(self, scope: str, key: str) -> None:
        with self._reachable():
            await self._redis.hdel(f"{self._prefix}state:{scope}", key)

    # live tails

    def watch(self, notify: Callable[[str], None], hearing: Callable[[bool], None]) -> None:
        """Call ``notify(run_id)`` whenever any process stores events (Redis pub/sub), until closed;
        ``hearing(True)`` once subscribed, ``hearing(False)`` when the subscription is lost."""
        self._listener.start(notify, hearing)

    async def _notifications(self) -> AsyncIterator[str]:
        async with self._subscriber.pubsub() as pubsub:
            await pubsub.subscribe(f"{self._prefix}tail")
            async for message in pubsub.listen():
                if message["type"] == "subscribe":  # Redis confirms once it is in effect: every write after is heard
                    yield HEARING
                elif message["type"] == "message":
                    yield message["data"]

    async def close(self) -> None:
        await self._listener.close()
        await self._subscriber.aclose()
        await self._redis.aclose()

    # -- scheduled tasks: one claim per (task, tick), a lease until finished -----------------

    def _tick_keys(self, task: str, scheduled_at: float) -> list[str]:
        return [f"{self._prefix}tick:{task}:{scheduled_at!r}", f"{self._prefix}ticks-open:{task}"]

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        """One script: create the claim, or take over a lapsed one; Redis forgets it after :data:`TICK_MEMORY`."""
        args: list[str | int] = [owner, repr(expires), repr(now), repr(scheduled_at), int(TICK_MEMORY)]
        with self._reachable():
            won = await self._scripts["claim_tick"](keys=self._tick_keys(task, scheduled_at), args=args)
        return bool(won)

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        args = [owner, repr(expires), repr(scheduled_at)]
        with self._reachable():
            return bool(await self._scripts["hold_tick"](keys=self._tick_keys(task, scheduled_at), args=args))

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        args = [owner, "done", repr(scheduled_at)]
        with self._reachable():
            return bool(await self._scripts["hold_tick"](keys=self._tick_keys(task, scheduled_at), args=args))

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        keys = [f"{self._prefix}ticks-open:{task}"]
        args = [f"{self._prefix}tick:{task}:", repr(since), repr(now)]
        found = await self._read(lambda: self._scripts["lapsed_ticks"](keys=keys, args=args))
        return [float(at) for at in found]


def _record(run_id: str, row: Sequence[str | None]) -> RunRecord | None:
    agent, thread_id, status, version, owner, expires, due_at, data = row
    if agent is None:
        return None
    return run_from_row(
        (
            run_id,
            agent,
            thread_id,
            status,
            int(version or 0),
            owner or None,
            float(expires) if expires else None,
            float(due_at) if due_at else None,
            data,
        )
    )
