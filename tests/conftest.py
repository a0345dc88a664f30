from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from agent_unit.stores import Store, open_store
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore

from .servers import PostgresServer, RedisServer

StoreFactory = Callable[[], Store]

# Every store joins the conformance suite here. A factory returns a new handle on the same
# backing store each call (two handles on SQLite are two connections, as two processes have).
# Redis and PostgreSQL are real servers, one per test session, on loopback ports.
STORES = ["memory", "sqlite", "redis", "postgres"]

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, with a key prefix of this test's own: tests never see each other's runs."""
    return f"{redis_server.url}?prefix=t{next(_prefixes)}:"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.remove()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The session's PostgreSQL, with a schema of this test's own: tests never see each other's runs."""
    import psycopg

    schema = f"t{next(_prefixes)}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(postgres_server.url, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            break
        except psycopg.OperationalError:  # still starting up
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return f"{postgres_server.url}?options=-csearch_path%3D{schema}"


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param == "memory":
        shared = MemoryStore()
        return lambda: shared
    if request.param in ("redis", "postgres"):
        url = request.getfixturevalue(f"{request.param}_url")
        return lambda: open_store(url)
    path = tmp_path / "agent-unit.db"
    return lambda: SQLiteStore(path)


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    opened = store_factory()
    yield opened
    await opened.close()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "agent-unit.db"
