"""The store's own limit: a loop of one conditional update (compare-and-set on a version), with its driver.

    python bench/stores/raw_update.py --store URL --n N

The same kind of write agent-unit makes per step (a condition on the row, then the write),
with nothing else: SQLite ``BEGIN IMMEDIATE; UPDATE … WHERE version = ?; COMMIT`` (WAL,
synchronous=NORMAL, as agent-unit opens it); Redis, a Lua script comparing and setting a hash
field (EVALSHA); PostgreSQL, ``UPDATE … WHERE id = … AND version = …`` in autocommit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

CAS = """
if redis.call('HGET', KEYS[1], 'version') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'version', ARGV[2])
  return 1
end
return 0
"""


def sqlite_loop(path: str, n: int) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID")
    db.execute("INSERT OR REPLACE INTO runs VALUES ('r', 0)")
    t0 = time.perf_counter()
    for version in range(n):
        db.execute("BEGIN IMMEDIATE")
        updated = db.execute(
            "UPDATE runs SET version = ? WHERE id = 'r' AND version = ?", (version + 1, version)
        ).rowcount
        db.execute("COMMIT")
        assert updated == 1
    return time.perf_counter() - t0


async def redis_loop(url: str, n: int) -> float:
    import redis.asyncio as redis

    parts = urlsplit(url)
    prefix = parse_qs(parts.query).get("prefix", ["raw:"])[-1]
    client = redis.Redis.from_url(url.split("?")[0], decode_responses=True)
    key = f"{prefix}raw-cas"
    await client.hset(key, "version", 0)
    script = client.register_script(CAS)
    t0 = time.perf_counter()
    for version in range(n):
        assert await script(keys=[key], args=[version, version + 1]) == 1
    seconds = time.perf_counter() - t0
    await client.aclose()
    return seconds


async def postgres_loop(url: str, n: int) -> float:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS raw_cas (id text PRIMARY KEY, version bigint NOT NULL)")
        await conn.execute("DELETE FROM raw_cas")
        await conn.execute("INSERT INTO raw_cas VALUES ('r', 0)")
        t0 = time.perf_counter()
        for version in range(n):
            cursor = await conn.execute(
                "UPDATE raw_cas SET version = %s WHERE id = 'r' AND version = %s", (version + 1, version)
            )
            assert cursor.rowcount == 1
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--n", type=int, required=True)
    args = parser.parse_args()
    scheme = args.store.split(":", 1)[0]
    if scheme == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            seconds = sqlite_loop(str(Path(folder) / "raw.db"), args.n)
    elif scheme == "redis":
        seconds = asyncio.run(redis_loop(args.store, args.n))
    else:
        seconds = asyncio.run(postgres_loop(args.store, args.n))
    result = {"system": "raw", "n": args.n, "seconds": round(seconds, 6), "per_sec": round(args.n / seconds, 1)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
