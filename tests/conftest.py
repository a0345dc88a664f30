from __future__ import annotations

import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from agent_unit.stores import Store, open_store
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore

from .support.servers import DynamoDBEmulator, PostgresServer, RedisServer
from .support.temporal import TemporalServer

StoreFactory = Callable[[], Store]

# The builds the tests run vendor with uv (a project with a uv.lock does by default): it resolves
# from a cache, where pip fetched the same index pages and wheels again for every build (this
# machine's index sends no caching headers, so pip's cache keeps nothing). The pip path keeps a
# test of its own (tests/hosts/test_build_deps.py).
os.environ.setdefault("AGENT_UNIT_INSTALLER", "uv")

# Every store joins the conformance suite here. A factory returns a new handle on the same
# backing store each call (two handles on SQLite are two connections, as two processes have).
# Redis and PostgreSQL are real servers, one per test session, on loopback ports.
# DynamoDB runs on moto's server mode: an emulator, not AWS (no AWS account is reachable here).
# D1 runs on workerd's own D1 (through Miniflare, from the wrangler npm package: a JavaScript
# Worker serves the binding to the tests) and on its simulation (tests/hosts/cloudflare/d1_sim.py:
# real SQLite with D1's batch semantics), which needs no node.
STORES = ["memory", "sqlite", "redis", "postgres", "dynamodb-emulator", "d1-workerd", "d1-simulation"]

_prefixes = itertools.count()


# A test that reaches one of these servers is slow: `make check` leaves it out.
SERVER_FIXTURES = {"redis_server", "postgres_server", "dynamodb_endpoint", "d1_workerd", "temporal_server"}
SERVER_STORES = {"redis", "postgres", "dynamodb-emulator", "d1-workerd"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())) or params.get("store_factory") in SERVER_STORES:
            item.add_marker(pytest.mark.slow)
    items[:] = heaviest_first(items)


# The modules that take a minute or more in one worker (they build with pip, start servers in
# subprocesses, run the examples' matrix), heaviest first, as measured with `--durations`. `make
# test` hands modules to its workers in collection order (`--dist loadscope --no-loadscope-reorder`):
# these go first, then the other `slow` modules (a build, a server, Node or a browser: seconds a
# test), then the rest, so that the run ends on short modules, not with one worker busy on a long
# one while the others wait. (pytest-xdist's own order, most tests first, put the modules of one
# or two long tests last.)
HEAVIEST = (
    "tests/examples/test_example_universal.py",
    "tests/examples/test_example_universal_workerd.py",
    "tests/hosts/workerd/test_durable_objects_in_workerd.py",
    "tests/hosts/test_server_google_adk.py",
    "tests/hosts/test_server_google_adk_lambda.py",
    "tests/hosts/test_server_google_adk_vercel.py",
    "tests/hosts/test_preset_server_app.py",
    "tests/hosts/test_build_deps.py",
    "tests/hosts/workerd/test_d1_in_workerd.py",
    "tests/hosts/test_preset_aws_lambda.py",
    "tests/hosts/test_preset_tasks.py",
    "tests/hosts/test_preset_vercel.py",
    "tests/hosts/cloudflare/test_preset_cloudflare.py",
    "tests/cli/test_dev.py",
)
ROOT = Path(__file__).resolve().parents[1]


def heaviest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """HEAVIEST, then the other slow modules, then the rest; within each, modules with more tests
    first. The order within a module is kept."""
    missing = [name for name in HEAVIEST if not (ROOT / name).is_file()]
    assert not missing, f"tests/conftest.py: HEAVIEST names modules that do not exist: {missing}"
    counts: dict[str, int] = {}
    slow: set[str] = set()
    for item in items:
        module = item.nodeid.split("::")[0]
        counts[module] = counts.get(module, 0) + 1
        if item.get_closest_marker("slow") is not None:
            slow.add(module)

    def rank(item: pytest.Item) -> tuple[int, bool, int]:
        module = item.nodeid.split("::")[0]
        heavy = HEAVIEST.index(module) if module in HEAVIEST else len(HEAVIEST)
        return (heavy, module not in slow, -counts[module])

    return sorted(items, key=rank)


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


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[TemporalServer]:
    """A Temporal dev server (``temporal server start-dev``); tests keep apart by task queue."""
    server = TemporalServer().start()
    yield server
    server.remove()


@pytest.fixture(scope="session")
def dynamodb_endpoint() -> Iterator[str]:
    """moto's DynamoDB emulator in server mode, on a loopback port."""
    import os

    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)
    emulator = DynamoDBEmulator().start()
    yield emulator.endpoint
    emulator.stop()


@pytest.fixture
def dynamodb_url(dynamodb_endpoint: str) -> str:
    """A table of this test's own on the emulator, created on first use."""
    return f"dynamodb://runs-{next(_prefixes)}?region=us-east-1&endpoint_url={dynamodb_endpoint}&create=true"


@pytest.fixture(scope="session")
def d1_workerd() -> Iterator[str]:
    from .hosts.cloudflare.d1_workerd import workerd_d1

    with workerd_d1() as url:
        yield url


@pytest.fixture
def d1_workerd_url(d1_workerd: str) -> str:
    """The session's workerd D1, emptied for this test."""
    from .hosts.cloudflare.d1_workerd import reset

    reset(d1_workerd)
    return d1_workerd


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param == "memory":
        shared = MemoryStore()
        return lambda: shared
    if request.param in ("redis", "postgres", "dynamodb-emulator"):
        url = request.getfixturevalue(f"{request.param.removesuffix('-emulator')}_url")
        return lambda: open_store(url)
    # D1's store is imported for the D1 stores only: the Cloudflare host is not needed to collect the tests.
    if request.param == "d1-workerd":  # each handle a Worker of its own on one database
        from agent_unit.hosts.cloudflare.d1_store import D1Store

        from .hosts.cloudflare.d1_workerd import WorkerdD1

        url = request.getfixturevalue("d1_workerd_url")
        return lambda: D1Store(WorkerdD1(url))
    path = tmp_path / "agent-unit.db"
    if request.param == "d1-simulation":  # each handle a Worker of its own on one database
        from agent_unit.hosts.cloudflare.d1_store import D1Store

        from .hosts.cloudflare.d1_sim import D1Database

        return lambda: D1Store(D1Database(path))
    return lambda: SQLiteStore(path)


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    opened = store_factory()
    yield opened
    await opened.close()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "agent-unit.db"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """A test's captured output may hold text that is not UTF-8 (a lone surrogate a test raised on
    purpose): escape it, so a parallel worker can send the report to the main process."""
    report: pytest.TestReport = yield
    report.sections = [(key, text.encode("utf-8", "backslashreplace").decode()) for key, text in report.sections]
    return report
