"""uvicorn (what built servers run) beside granian, serving the same built app.

    .venv-bench/bin/pip install -r bench/http/requirements.txt   # granian is among them
    .venv/bin/python bench/http/servers.py --rounds 3

The issue asked for granian as an option where it beats uvicorn on this machine. This measures it:
``bench/http/project`` built with ``agent-unit build --preset server``; each round starts the built
``main.py`` (uvicorn with the uvloop and httptools it vendors, one worker), the same with uvloop
taken out of its ``vendor/`` (uvicorn's ``loop="auto"`` then takes asyncio's), and granian on the same
``main:app`` (one worker; its own HTTP stack in Rust), each over a fresh SQLite store, and drives each with
``run.py``'s load generator: runs to a pause and resumes per second (8 clients, 5 s windows after
a 1 s ramp), the server's CPU per operation (its process tree, from /proc), and the first SSE event
of a run on the idle server (median of 20). Rounds alternate, each starting one server further along
(no server always runs first), so a drift of the machine hits all of them.
Printed only: the figures go to BENCHMARKS.md by hand, with the command.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from run import BENCH_VENV, AgentUnit, RawClient, Server, build_server, free_port, load, start_server

SERVERS = {
    "uvicorn (built main.py: uvloop + httptools)": [],
    "uvicorn on asyncio (uvloop taken out of vendor/)": [],
    "granian": ["--http", "1", "--no-ws"],
    "granian, single-threaded runtime": ["--http", "1", "--no-ws", "--runtime-mode", "st"],
}


def without_uvloop(output: Path) -> Path:
    """A copy of the build with no uvloop in ``vendor/``."""
    copy = output.with_name(output.name + "-asyncio")
    if not copy.exists():
        vendor = str(output / "vendor")
        shutil.copytree(
            output, copy, ignore=lambda folder, names: [n for n in names if folder == vendor and n.startswith("uvloop")]
        )
    return copy


def launch(name: str, output: Path, db: Path) -> Server:
    port = free_port()
    env = {"HOST": "127.0.0.1", "PORT": str(port), "LOG_LEVEL": "warning", "AGENT_UNIT_STORAGE": f"sqlite:///{db}"}
    if "asyncio" in name:
        output = without_uvloop(output)
    if name.startswith("uvicorn"):
        argv = [sys.executable, str(output / "main.py")]
    else:  # granian from the bench venv, the build's own folders first on the path (as main.py puts them)
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (output, output / "app", output / "vendor"))
        argv = [str(BENCH_VENV / "bin" / "python"), "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--workers", "1", "--log-level", "warning", *SERVERS[name], "main:app"]
    return start_server(name.split()[0], argv, cwd=output, env=env, port=port, ready="/agents")


Figures = tuple[float, float, float, float, float]
"""runs/s, server CPU ms per run, resumes/s, server CPU ms per resume, first SSE event ms (median of 20)"""


async def measure(name: str, output: Path, db: Path) -> Figures:
    server = launch(name, output, db)
    try:
        client = RawClient(server.base)
        api = AgentUnit(client, db)
        for _ in range(40):
            await api.start_to_pause()
        pid = server.proc.pid
        runs = await load(api.start_to_pause, server_pid=pid, seconds=5, max_ops=100_000, ramp=1)
        resumes = await load(api.resume, server_pid=pid, seconds=5, max_ops=100_000, items=list(runs.results), ramp=1)
        first = []
        for _ in range(20):
            await asyncio.sleep(0.2)
            first.append((await api.first_event()).first_ms)
        await client.aclose()
    finally:
        server.stop()
    return (
        runs.rate,
        runs.server_cpu / runs.rate * 1000,
        resumes.rate,
        resumes.server_cpu / resumes.rate * 1000,
        statistics.median(first),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--servers", nargs="*", choices=list(SERVERS), default=list(SERVERS), help="which to run")
    args = parser.parse_args()
    if not (BENCH_VENV / "bin" / "granian").exists():
        sys.exit(f"no granian in {BENCH_VENV}: {BENCH_VENV}/bin/pip install -r bench/http/requirements.txt")
    work = Path(tempfile.mkdtemp(prefix="agent-unit-servers-bench-"))
    rows: dict[str, list[Figures]] = {name: [] for name in args.servers}
    try:
        output = build_server(work).parent
        for i in range(args.rounds):
            for name in args.servers[i % len(args.servers) :] + args.servers[: i % len(args.servers)]:
                figures = asyncio.run(measure(name, output, work / f"round{i}-server{list(SERVERS).index(name)}.db"))
                rows[name].append(figures)
                print(f"round {i + 1} {name}: {figures} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table("server", rows)
    return 0


def print_table(first_column: str, rows: dict[str, list[Figures]]) -> None:
    """The figures of :func:`measure` as a Markdown table, one row per server (or build), every round listed."""
    columns = "runs/s to a pause | server CPU per run | resumes/s | server CPU per resume | first SSE event"
    print(f"| {first_column} | {columns} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, each in rows.items():
        cells = [", ".join(f"{row[k]:.0f}" if k in (0, 2) else f"{row[k]:.2f}" for row in each) for k in range(5)]
        print(f"| {name} | {cells[0]} | {cells[1]} ms | {cells[2]} | {cells[3]} ms | {cells[4]} ms |")


if __name__ == "__main__":
    sys.exit(main())
