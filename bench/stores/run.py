"""Shared stores side by side: agent-unit on SQLite, Redis and PostgreSQL, DBOS on the same PostgreSQL,
and each store's own limit (a loop of one conditional update with its driver).

    .venv/bin/python bench/stores/run.py [--quick] [--write]

Starts its own ``redis-server`` (append-only file, fsync every second: a usual production
setting) and PostgreSQL (default durability: fsync and synchronous commit on) on loopback
ports. Every case is its own process on a fresh namespace (SQLite file, Redis key prefix,
Postgres schema or database); repeats are interleaved and the report takes the median.
"One process" and "two processes" run the same one-step-run workload, the two at once over
the same store; their throughput is all runs over the window from the first start to the
last end. A full run writes its section to BENCHMARKS.md after ``<!-- stores benchmark -->``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parents[1]
sys.path.insert(0, str(REPO))

from tests.support.servers import PostgresServer, RedisServer  # noqa: E402

MARKER = "<!-- stores benchmark -->"
PEER_PYTHON = REPO / ".venv-bench" / "bin" / "python"
STORES = ("sqlite", "redis", "postgres")


@dataclass(frozen=True)
class Sizes:
    steps: int
    runs: int
    raw: int
    repeat: int


FULL = Sizes(steps=1000, runs=200, raw=2000, repeat=3)
QUICK = Sizes(steps=200, runs=40, raw=400, repeat=1)


class Namespaces:
    """A fresh place in each store for every case."""

    def __init__(self, redis: RedisServer, postgres: PostgresServer, folder: Path) -> None:
        self.redis, self.postgres, self.folder = redis, postgres, folder
        self.count = 0

    def fresh(self, store: str) -> str:
        self.count += 1
        if store == "sqlite":
            return f"sqlite:///{self.folder / f'case-{self.count}.db'}"
        if store == "redis":
            return f"{self.redis.url}?prefix=c{self.count}:"
        return f"{self.postgres.url}?options=-csearch_path%3Dc{self.count}"

    def schema(self, url: str) -> None:
        import psycopg

        if "search_path" in url:
            name = url.rsplit("%3D", 1)[1]
            with psycopg.connect(self.postgres.url, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")

    def database(self) -> str:
        """A fresh database for DBOS's system tables, on the same server."""
        import psycopg

        self.count += 1
        name = f"dbos_{self.count}"
        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.postgres.url.rsplit("/", 1)[0] + f"/{name}"


def run_json(argv: list[str], timeout: float = 900) -> dict[str, Any]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}... failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def together(argvs: list[list[str]], go: Path) -> dict[str, Any]:
    """Start the processes, let them warm up, then release them at once; throughput over the shared window."""
    processes = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs]
    time.sleep(3.0)  # imports, connections and warm-up runs
    go.write_text("go")
    results = []
    for process in processes:
        out, err = process.communicate(timeout=900)
        if process.returncode != 0:
            raise RuntimeError(f"a concurrent case failed:\n{err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    go.unlink()
    total = sum(int(result["n"]) for result in results)
    window = max(r["ended"] for r in results) - min(r["began"] for r in results)
    return {"n": total, "seconds": round(window, 6), "per_sec": round(total / window, 1)}


def cases(sizes: Sizes, names: Namespaces, peers: bool) -> dict[str, Any]:
    """Every case once: ``{key: callable returning its JSON}``."""
    python = sys.executable
    au = str(BENCH / "agent_unit_store.py")
    table: dict[str, Any] = {}
    for store in STORES:

        def steps(store: str = store) -> dict[str, Any]:
            url = names.fresh(store)
            names.schema(url)
            return run_json([python, au, "--store", url, "--workload", "steps", "--n", str(sizes.steps)])

        def runs(store: str = store) -> dict[str, Any]:
            url = names.fresh(store)
            names.schema(url)
            return run_json([python, au, "--store", url, "--workload", "runs", "--n", str(sizes.runs)])

        def runs_two(store: str = store) -> dict[str, Any]:
            url = names.fresh(store)
            names.schema(url)
            go = names.folder / "go"
            argv = [python, au, "--store", url, "--workload", "runs", "--n", str(sizes.runs), "--go", str(go)]
            return together([argv, argv], go)

        def append(store: str = store) -> dict[str, Any]:
            url = names.fresh(store)
            names.schema(url)
            return run_json([python, au, "--store", url, "--workload", "append", "--n", str(sizes.steps)])

        def raw(store: str = store) -> dict[str, Any]:
            url = names.fresh(store)
            names.schema(url)
            return run_json([python, str(BENCH / "raw_update.py"), "--store", url, "--n", str(sizes.raw)])

        table |= {
            f"agent-unit steps {store}": steps,
            f"agent-unit runs {store}": runs,
            f"agent-unit runs x2 {store}": runs_two,
            f"store append {store}": append,
            f"raw update {store}": raw,
        }
    if peers:
        dbos = [str(PEER_PYTHON), str(BENCH / "dbos_postgres.py")]

        def dbos_steps() -> dict[str, Any]:
            url = names.database()
            return run_json([*dbos, "--database-url", url, "--workload", "steps", "--n", str(sizes.steps)])

        def dbos_runs() -> dict[str, Any]:
            url = names.database()
            return run_json([*dbos, "--database-url", url, "--workload", "runs", "--n", str(sizes.runs)])

        def dbos_runs_two() -> dict[str, Any]:
            url = names.database()
            go = names.folder / "go"
            argv = [*dbos, "--database-url", url, "--workload", "runs", "--n", str(sizes.runs), "--go", str(go)]
            return together([argv, argv], go)

        table |= {"dbos steps postgres": dbos_steps, "dbos runs postgres": dbos_runs}
        table |= {"dbos runs x2 postgres": dbos_runs_two}
    return table


def machine() -> list[str]:
    import psycopg
    import redis

    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    server = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()
    redis_version = next((part.split("=")[1] for part in server if part.startswith("v=")), "?")
    pg = subprocess.run(
        [str(PostgresServer.__init__.__globals__["_binary"]("postgres", "/usr/lib/postgresql/*/bin")), "--version"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return [
        f"- CPU: {cpu}, {os.cpu_count()} cores; {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}; redis-server {redis_version} (redis-py {redis.__version__}); "
        f"{pg} (psycopg {psycopg.__version__})",
        "- Redis: append-only file, `appendfsync everysec`; PostgreSQL: default durability "
        "(fsync on, synchronous_commit on); both on loopback TCP",
    ]


def report(results: dict[str, list[dict[str, Any]]], sizes: Sizes, command: str, latency: str = "") -> str:
    def rate(key: str) -> float | None:
        found = [r["per_sec"] for r in results.get(key, [])]
        return statistics.median(found) if found else None

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:,.0f}"

    def ratio(a: float | None, b: float | None) -> str:
        return "n/a" if a is None or b is None else f"{a / b:.2f}x"

    lines = [
        MARKER,
        "",
        "## Shared stores: SQLite, Redis, PostgreSQL, and DBOS on the same PostgreSQL",
        "",
        f"Command: `{command}` ({datetime.now(UTC):%Y-%m-%d}). Median of {sizes.repeat} interleaved repeats.",
        "",
        "### Machine",
        "",
        *machine(),
        "",
        "### Settings",
        "",
        f"- steps: one run of {sizes.steps:,} sequential no-op journaled steps; runs: {sizes.runs:,} "
        "sequential one-step runs, each awaited to completion; raw: "
        f"{sizes.raw:,} conditional updates (compare-and-set on a version) made directly with the driver",
        "- store appends: `store.append` alone (one step's write set: a journal entry and two events), "
        "no engine, so steps beside it show what the engine's Python costs per step",
        "- x2: two processes over the same store at once, each running the runs workload; "
        "throughput is all runs over the shared window",
        "- every case is a fresh process on a fresh namespace (file, key prefix, schema or database)",
        "",
        "### Results (per second)",
        "",
        "| store | steps/s | runs/s (1 process) | runs/s (2 processes) | store appends/s (no engine) "
        "| raw updates/s | steps / raw |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for store in STORES:
        steps, raw = rate(f"agent-unit steps {store}"), rate(f"raw update {store}")
        lines.append(
            f"| agent-unit on {store} | {fmt(steps)} | {fmt(rate(f'agent-unit runs {store}'))} | "
            f"{fmt(rate(f'agent-unit runs x2 {store}'))} | {fmt(rate(f'store append {store}'))} | "
            f"{fmt(raw)} | {ratio(steps, raw)} |"
        )
    lines.append(
        f"| DBOS on postgres | {fmt(rate('dbos steps postgres'))} | {fmt(rate('dbos runs postgres'))} | "
        f"{fmt(rate('dbos runs x2 postgres'))} | n/a | {fmt(rate('raw update postgres'))} | "
        f"{ratio(rate('dbos steps postgres'), rate('raw update postgres'))} |"
    )
    au_steps, au_runs = rate("agent-unit steps postgres"), rate("agent-unit runs postgres")
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for store in STORES:
        steps, raw = rate(f"agent-unit steps {store}"), rate(f"raw update {store}")
        met = "yes" if steps and raw and steps * 2 >= raw else "no"
        lines.append(
            f"| {store}: journaled steps within 2x of the raw conditional-update loop | "
            f"{fmt(steps)} vs {fmt(raw)} ({ratio(steps, raw)}) | {met} |"
        )
    for what, ours, theirs in (
        ("steps", au_steps, rate("dbos steps postgres")),
        ("one-step runs", au_runs, rate("dbos runs postgres")),
        ("one-step runs, 2 processes", rate("agent-unit runs x2 postgres"), rate("dbos runs x2 postgres")),
    ):
        met = "n/a" if ours is None or theirs is None else ("yes" if ours > theirs else "no")
        measured = f"{fmt(ours)} vs {fmt(theirs)} ({ratio(ours, theirs)})"
        lines.append(f"| postgres: {what} ahead of DBOS | {measured} | {met} |")
    sq_steps, sq_append, sq_raw = (
        rate("agent-unit steps sqlite"),
        rate("store append sqlite"),
        rate("raw update sqlite"),
    )
    if sq_steps and sq_append and sq_raw:
        lines += [
            "",
            f"On SQLite the raw loop is one call into SQLite's C library in this process "
            f"({1e6 / sq_raw:.0f} µs); a journaled step is {1e6 / sq_steps:.0f} µs: the store's write set "
            f"(fence, journal entry, two events: {1e6 / sq_append:.0f} µs without the engine) and "
            f"{1e6 / sq_steps - 1e6 / sq_append:.0f} µs of the engine's Python (keys, events, JSON, bookkeeping). "
            "In one process Python is the limit, not the store, so the 2x target is not met there; on the "
            "networked stores a round trip dominates and it is.",
        ]
    if latency:
        lines += [
            "",
            "### Events across processes",
            "",
            "Two uvicorn servers over one store; a run on A emits 200 events 20 ms apart; one reader on A and one "
            "on B (both polling only every 5 s, so B keeps up only if the store wakes it). Emit-to-arrival "
            "latency, one machine, one clock (`bench/stores/tail_latency.py`); the max is the stream's first event.",
            "",
            latency.strip(),
        ]
    lines += [
        "",
        "A journaled step on Redis is one EVALSHA (the fence, the journal entry, the events and their seqs "
        "in one script); on PostgreSQL one statement (data-modifying CTEs) in autocommit, so one commit; on "
        "SQLite one `BEGIN IMMEDIATE` transaction. The raw loop makes the same number of round trips and "
        "commits with less in each, which is why it is the floor. DynamoDB is not measured: only its "
        "emulator (moto) runs here, and an emulator's speed says nothing about DynamoDB's.",
        "",
    ]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace what follows MARKER up to the next section marker (or the end); add it at the end if new."""
    current = path.read_text() if path.exists() else ""
    at = current.find(MARKER)
    if at < 0:
        path.write_text(current.rstrip("\n") + "\n\n" + section)
        return
    after = current.find("<!-- ", at + len(MARKER))
    rest = current[after:] if after >= 0 else ""
    path.write_text(current[:at] + section + ("\n" + rest if rest else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (a smoke test)")
    parser.add_argument("--write", action="store_true", help="write BENCHMARKS.md after a --quick run too")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    peers = PEER_PYTHON.exists()
    if not peers:
        print(
            "DBOS skipped: install it with python3 -m venv .venv-bench && "
            ".venv-bench/bin/pip install -r bench/peers/requirements.txt"
        )
    with tempfile.TemporaryDirectory(prefix="agent-unit-stores-") as folder:
        redis = RedisServer()
        redis.fsync = "everysec"
        redis.start(keep_data=Path(folder))
        postgres = PostgresServer(durable=True).start()
        try:
            time.sleep(1.0)
            names = Namespaces(redis, postgres, Path(folder))
            table = cases(sizes, names, peers)
            results: dict[str, list[dict[str, Any]]] = {key: [] for key in table}
            for round_ in range(sizes.repeat):
                for key, case in table.items():
                    result = case()
                    results[key].append(result)
                    print(f"[{round_ + 1}/{sizes.repeat}] {key}: {result['per_sec']:,.0f}/s", flush=True)
        finally:
            redis.stop()
            postgres.remove()
    latency = subprocess.run(
        [sys.executable, str(BENCH / "tail_latency.py"), "--ticks", "50" if args.quick else "200"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    ).stdout
    command = ".venv/bin/python bench/stores/run.py" + (" --quick" if args.quick else "")
    section = report(results, sizes, command, latency)
    print(section)
    if not args.quick or args.write:
        write_section(REPO / "BENCHMARKS.md", section)
        print("wrote the section to BENCHMARKS.md")


if __name__ == "__main__":
    main()
