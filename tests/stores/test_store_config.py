"""Bad store configuration is one clear error at start, naming the store's kind: never its secret, host,
port or database (a client may see the message in a 503; the log has where, without the password)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from agent_unit import create_agent_unit
from agent_unit._records import JournalEntry
from agent_unit.errors import StoreConfigError, StoreUnavailable
from agent_unit.stores import open_store

from ..support.server import free_port
from ..support.servers import PostgresServer, RedisServer
from .test_conformance import make_record


async def refused(url: str, secret: str | None = None) -> str:
    store = open_store(url)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.check()  # type: ignore[attr-defined]
    finally:
        await store.close()
    message = caught.value.message
    if secret is not None:
        assert secret not in message and secret not in store.url
    assert "127.0.0.1" not in message and "localhost" not in message  # no host, so no port or database either
    return message


async def test_redis_unreachable() -> None:
    port = free_port()
    message = await refused(f"redis://:s3cret@127.0.0.1:{port}/0", "s3cret")
    assert message.startswith("the redis store cannot be reached") and str(port) not in message
    assert "check the host and port in the store URL, and that the redis server is running" in message


async def test_redis_wrong_password() -> None:
    server = RedisServer().start(password="right")
    try:
        message = await refused(f"redis://:wrong@127.0.0.1:{server.port}/0", "wrong")
        assert "refused the password" in message
        store = open_store(f"redis://:right@127.0.0.1:{server.port}/0")
        await store.check()  # type: ignore[attr-defined]
        await store.close()
    finally:
        server.stop()


async def test_postgres_unreachable() -> None:
    port = free_port()
    message = await refused(f"postgres://app:s3cret@127.0.0.1:{port}/runs", "s3cret")
    assert message.startswith("the postgres store cannot be reached")
    assert str(port) not in message and "runs" not in message
    assert "check the host and port in the store URL, and that the postgres server is running" in message


async def test_postgres_wrong_password() -> None:
    server = PostgresServer(password="right").start()
    try:
        message = await refused(f"postgres://postgres:wrong@127.0.0.1:{server.port}/postgres", "wrong")
        assert message.startswith("the postgres store refused the password") and "postgres:" not in message
        store = open_store(server.url)
        await store.check()  # type: ignore[attr-defined]
        await store.close()
    finally:
        server.remove()


async def test_dynamodb_emulator_missing_table_and_malformed_urls(dynamodb_endpoint: str) -> None:
    message = await refused(f"dynamodb://nowhere?region=us-east-1&endpoint_url={dynamodb_endpoint}")
    assert "has no table of the name in its URL" in message and "?create=true" in message
    assert "nowhere" not in message
    with pytest.raises(ValueError, match="write dynamodb://TABLE"):
        open_store("dynamodb://?region=us-east-1")
    with pytest.raises(ValueError, match="unknown store URL scheme 'mongodb'"):
        open_store("mongodb://localhost")


async def test_dynamodb_emulator_refuses_a_value_too_large_for_an_item(dynamodb_url: str) -> None:
    from agent_unit.errors import ItemTooLarge

    store = open_store(dynamodb_url)
    record = make_record()
    await store.create_run(record)
    with pytest.raises(ItemTooLarge, match="over DynamoDB's item limit"):
        await store.append(record.id, owner="a", journal=[JournalEntry("big", "x" * 500_000)], events=["{}"])
    assert await store.load_journal(record.id) == {} and await store.last_seq(record.id) == 0  # nothing written
    await store.close()


def test_a_server_with_an_unreachable_store_fails_at_start_with_one_clear_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    app = create_agent_unit({}, store=f"redis://:s3cret@127.0.0.1:{port}/0")
    with pytest.raises(StoreUnavailable, match="the redis store cannot be reached") as caught, TestClient(app):
        pass
    assert "s3cret" not in str(caught.value) and "127.0.0.1" not in str(caught.value)
    logged = [record.getMessage() for record in caplog.records if record.name == "agent_unit.stores"]
    assert any(f"redis://***@127.0.0.1:{port}/0" in line for line in logged)  # where, for the operator
    assert not any("s3cret" in line for line in logged)


async def test_postgres_serves_more_callers_than_it_has_connections(postgres_url: str) -> None:
    import asyncio

    store = open_store(postgres_url + "&pool_max=2")
    records = [make_record() for _ in range(30)]
    await asyncio.gather(*(store.create_run(record) for record in records))
    loaded = await asyncio.gather(*(store.load_run(record.id) for record in records))
    assert [record.id for record in loaded if record] == [record.id for record in records]
    assert store._pool._open <= 2  # type: ignore[attr-defined]
    await store.close()


async def test_a_malformed_postgres_url_never_echoes_its_password() -> None:
    with pytest.raises(StoreConfigError, match="the port 'notaport' is not a number") as caught:
        open_store("postgres://app:s3cret@127.0.0.1:notaport/runs")
    assert "s3cret" not in caught.value.message


async def test_the_postgres_pool_keeps_a_connection_handed_to_a_caller_that_gave_up(postgres_url: str) -> None:
    import asyncio

    from agent_unit.stores._pg_pool import Connections

    pool = Connections(postgres_url, 1)
    first = await pool._take()
    waiting = asyncio.create_task(pool._take())
    await asyncio.sleep(0.01)
    await pool._give(first)  # handed to the waiter...
    waiting.cancel()  # ...which gives up before it resumes
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pool._open == 1 and len(pool._idle) == 1  # kept, not leaked
    async with pool.connection() as conn:
        assert (await (await conn.execute("select 1")).fetchone())[0] == 1
    await pool.close()


async def test_the_postgres_pool_wakes_its_waiters_when_connecting_fails() -> None:
    import asyncio
    import socket

    import psycopg

    from agent_unit.stores._pg_pool import Connections

    with socket.socket() as silent:  # accepts the TCP connection, never answers: connecting takes its timeout
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        pool = Connections(f"postgresql://postgres@127.0.0.1:{port}/none", 1, connect_timeout=1)
        calls = [pool._take() for _ in range(2)]  # the second waits for the first's slot
        results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 20)
    assert all(isinstance(result, psycopg.OperationalError) for result in results)  # nobody hangs
    assert pool._open == 0 and not pool._waiting


async def test_postgres_refusing_a_value_is_a_value_error_not_an_outage(postgres_url: str) -> None:
    from agent_unit.errors import StoreValueError

    store = open_store(postgres_url)
    record = make_record()
    await store.create_run(record)
    with pytest.raises(StoreValueError, match="cannot be stored") as caught:  # PostgreSQL text holds no NUL
        await store.append(record.id, owner="a", journal=[JournalEntry("k", "1")], events=["a\x00b"])
    assert not isinstance(caught.value, StoreUnavailable)
    assert await store.load_journal(record.id) == {} and await store.last_seq(record.id) == 0  # nothing written
    await store.close()
