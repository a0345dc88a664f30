"""Event latency across processes: a reader on server B beside a reader on server A, while A runs the agent.

    .venv/bin/python bench/stores/tail_latency.py [--ticks N]

Two uvicorn servers over one Redis, then over one PostgreSQL (both started here, on loopback).
A run on A emits N CUSTOM events 20 ms apart, each stamped with the moment it was emitted;
one SSE reader on A and one on B record when each arrives. Readers poll only every 5 s, so a
remote reader that keeps up is woken by the store (pub/sub, LISTEN/NOTIFY). Prints a Markdown
table of emit-to-arrival latency (same machine, one clock).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support.server import Server  # noqa: E402
from tests.support.servers import PostgresServer, RedisServer  # noqa: E402

OPTIONS = {"poll_interval": 5.0, "delta_batch_ms": 0}


def read(url: str, run_id: str) -> list[float]:
    delays = []
    with httpx.stream("GET", f"{url}/runs/{run_id}/events?follow=1", timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                if event["type"] == "CUSTOM":
                    delays.append((time.time() - event["value"]["at"]) * 1000)
                if event["type"] == "RUN_FINISHED":
                    return delays
    return delays


def measure(url: str, ticks: int) -> dict[str, list[float]]:
    env = {"TEST_AGENTS": "tests.support.process_agents:AGENTS", "TEST_OPTIONS": json.dumps(OPTIONS)}
    a, b = Server(url, env=env).start(), Server(url, env=env).start()
    try:
        run_id = httpx.post(f"{a.url}/agents/ticker/runs", json={"input": ticks}, timeout=30).json()["id"]
        with ThreadPoolExecutor(2) as pool:
            local, remote = pool.submit(read, a.url, run_id), pool.submit(read, b.url, run_id)
            return {"local (A)": local.result(), "remote (B)": remote.result()}
    finally:
        a.stop()
        b.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200)
    args = parser.parse_args()
    rows = []
    redis = RedisServer().start()
    postgres = PostgresServer(durable=True).start()
    try:
        for store, url in (("redis", f"{redis.url}?prefix=lat:"), ("postgres", postgres.url)):
            for reader, delays in measure(url, args.ticks).items():
                q = statistics.quantiles(delays, n=100)
                rows.append(
                    f"| {store} | {reader} | {len(delays)} | {statistics.median(delays):.2f} | {q[94]:.2f} | "
                    f"{max(delays):.2f} |"
                )
    finally:
        redis.stop()
        postgres.remove()
    print("| store | reader | events | p50 ms | p95 ms | max ms |")
    print("|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
