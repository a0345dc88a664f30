"""A store whose tick claims were written before claims were leases (a rolling deploy, a file or
database from an older release) keeps them: an old claim never lapses, so a tick that an older
server ran is never run again, and new claims work beside it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent_unit.stores import Store

TICK = 1_767_225_600.0  # 2026-01-01 00:00 UTC
LATER = TICK + 3600


async def old_and_new_claims(store: Store) -> None:
    assert not await store.claim_tick("digest", TICK, "new", now=LATER, expires=LATER + 60)  # the old claim holds
    assert await store.lapsed_ticks("digest", since=TICK - 60, now=LATER) == []
    assert await store.claim_tick("digest", TICK + 60, "new", now=LATER, expires=LATER + 60)
    assert await store.finish_tick("digest", TICK + 60, "new")


async def test_an_sqlite_ticks_table_from_before_leases_gets_its_columns_and_its_claims_never_lapse(
    tmp_path: Path,
) -> None:
    from agent_unit.stores.sqlite import SQLiteStore

    path = tmp_path / "runs.db"
    await SQLiteStore(path).close()
    with sqlite3.connect(path) as db:  # the table and a claim as the release before wrote them
        db.execute(
            "CREATE TABLE ticks (task TEXT NOT NULL, scheduled_at REAL NOT NULL, owner TEXT NOT NULL, "
            "PRIMARY KEY (task, scheduled_at)) WITHOUT ROWID"
        )
        db.execute("INSERT INTO ticks VALUES ('digest', ?, 'old-server')", (TICK,))
    store = SQLiteStore(path)
    await old_and_new_claims(store)
    await store.close()


async def test_a_postgres_ticks_table_from_before_leases_is_migrated_and_its_claims_never_lapse(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_unit.stores import postgres

    current = postgres.MIGRATIONS
    monkeypatch.setattr(postgres, "MIGRATIONS", current[:2])  # the schema as the release before left it
    old = postgres.PostgresStore.from_url(postgres_url)
    await old.check()
    await old._fetch("INSERT INTO agent_unit_ticks VALUES ('digest', %s, 'old-server')", (TICK,))
    await old.close()
    monkeypatch.setattr(postgres, "MIGRATIONS", current)
    store = postgres.PostgresStore.from_url(postgres_url)
    await old_and_new_claims(store)
    await store.close()


async def test_a_redis_claim_from_before_leases_never_lapses(redis_url: str) -> None:
    from agent_unit.stores.redis import RedisStore

    store = RedisStore.from_url(redis_url)
    prefix = redis_url.split("prefix=")[1]
    await store._redis.set(f"{prefix}tick:digest:{TICK!r}", "old-server")  # a claim as the release before wrote it
    await old_and_new_claims(store)
    await store.close()
