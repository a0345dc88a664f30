"""agent-unit on Temporal beside the native engine and beside a native Temporal workflow.

    python bench/temporal/run.py [--runs 30] [--steps 200] [--write]

One Temporal dev server (``temporal server start-dev``, its SQLite file on disk) and SQLite
stores in a temporary folder; every case runs in this process (its worker included), in turn:

- runs/s to a pause: sequential runs of an agent that does one step and waits at an interrupt,
  each timed from ``start`` to the run parked (``wait=True``). The native Temporal workflow does
  one activity and waits for an Update; timed from ``start_workflow`` until the workflow says it
  waits (an Update that returns then).
- steps/s: one run of N no-op steps. agent-unit runs every step of a run in one activity (the
  journal makes each durable); the native workflow runs one activity per step (and, for
  information, one local activity per step).

``--write`` replaces the Temporal section of BENCHMARKS.md with the results.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from agent_unit import Run, RunEngine, define_agent  # noqa: E402
from agent_unit.temporal import TemporalEngine, TemporalSettings, run_worker  # noqa: E402
from bench.temporal.native import PauseWorkflow, StepsWorkflow, noop  # noqa: E402
from tests.support.temporal import TemporalServer, temporal_cli  # noqa: E402


@define_agent
async def pause(input: int, run: Run) -> str:
    await run.step("load", lambda: input)
    await run.interrupt("approve", input, answer=bool)
    return "done"


@define_agent
async def steps(n: int, run: Run) -> int:
    for i in range(n):
        await run.step("s", lambda i=i: i)
    return n


AGENTS = {"pause": pause, "steps": steps}


async def native_engine(folder: Path, runs: int, n: int) -> dict[str, float]:
    engine = RunEngine(AGENTS, f"sqlite:///{folder / 'native.db'}")
    try:
        for i in range(5):
            await engine.start("pause", i, wait=True)
        began = time.perf_counter()
        for i in range(runs):
            record = await engine.start("pause", i, wait=True)
            assert record.status.value == "interrupted", record.status
        per_run = (time.perf_counter() - began) / runs
        began = time.perf_counter()
        record = await engine.start("steps", n, wait=True)
        per_steps = time.perf_counter() - began
        assert record.output == n
        return {"runs": 1 / per_run, "steps": n / per_steps}
    finally:
        await engine.aclose()


class TimedEngine(RunEngine):
    """The worker's engine, timing each execution (an activity's work: replay, the agent, the store)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.executions: list[float] = []

    async def advance(self, run_id: str) -> Any:
        began = time.perf_counter()
        try:
            return await super().advance(run_id)
        finally:
            self.executions.append(time.perf_counter() - began)


async def temporal_engine(server: TemporalServer, folder: Path, runs: int, n: int) -> dict[str, float]:
    settings = TemporalSettings(address=server.address, task_queue="bench-engine", heartbeat="30s")
    store = f"sqlite:///{folder / 'temporal.db'}"
    engine = TemporalEngine(AGENTS, store, temporal=settings)
    timed = TimedEngine(AGENTS, store, lease_ttl="30s", background_sweep=False)
    timed.tail = engine.tail  # the app hears the worker's writes at once, as in one process
    worker = asyncio.ensure_future(run_worker(timed, settings, client=await engine.client()))
    try:
        for i in range(5):
            await engine.start("pause", i, wait=True)
        timed.executions.clear()
        starts: list[float] = []
        totals: list[float] = []
        for i in range(runs):
            began = time.perf_counter()
            record = await engine.start("pause", i)
            started = time.perf_counter()
            record = await engine.wait(record.id)
            assert record.status.value == "interrupted", record.status
            totals.append(time.perf_counter() - began)
            starts.append(started - began)
        executing = statistics.fmean(timed.executions)
        began = time.perf_counter()
        record = await engine.start("steps", n, wait=True)
        per_steps = time.perf_counter() - began
        assert record.output == n
        total = statistics.fmean(totals)
        return {
            "runs": 1 / total,
            "steps": n / per_steps,
            "steps_in_activity": n / timed.executions[-1],
            "run_ms": total * 1000,
            "start_ms": statistics.fmean(starts) * 1000,
            "execution_ms": executing * 1000,
        }
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
        await timed.aclose()
        await engine.aclose()


async def native_temporal(server: TemporalServer, runs: int, n: int) -> dict[str, float]:
    client = await Client.connect(server.address)
    worker = Worker(client, task_queue="bench-native", workflows=[PauseWorkflow, StepsWorkflow], activities=[noop])
    async with worker:
        stamp = int(time.time() * 1000)

        async def one(i: int) -> None:
            handle = await client.start_workflow(
                PauseWorkflow.run, i, id=f"pause-{stamp}-{i}", task_queue="bench-native"
            )
            await handle.execute_update(PauseWorkflow.parked)
            await handle.signal(PauseWorkflow.answer)

        for i in range(5):
            await one(-1 - i)
        began = time.perf_counter()
        for i in range(runs):
            await one(i)
        per_run = (time.perf_counter() - began) / runs
        results = {"runs": 1 / per_run}
        for local in (False, True):
            began = time.perf_counter()
            done = await client.execute_workflow(
                StepsWorkflow.run, [n, local], id=f"steps-{stamp}-{local}", task_queue="bench-native"
            )
            assert done == n
            results["local_steps" if local else "steps"] = n / (time.perf_counter() - began)
        return results


def version(command: list[str]) -> str:
    return subprocess.run(command, capture_output=True, text=True).stdout.strip().splitlines()[0]


def commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()


async def measure(runs: int, n: int, activities: int) -> dict[str, dict[str, float]]:
    server = TemporalServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="agent-unit-bench-temporal-") as folder:
            path = Path(folder)
            return {
                "native": await native_engine(path, runs, n),
                "temporal": await temporal_engine(server, path, runs, n),
                "workflow": await native_temporal(server, runs, activities),
            }
    finally:
        server.remove()


def section(results: dict[str, dict[str, float]], runs: int, n: int, activities: int, wall: float) -> str:
    native, on_temporal, workflow_ = results["native"], results["temporal"], results["workflow"]
    import temporalio

    cli = temporal_cli()
    lines = [
        "## Temporal: agent-unit on Temporal, the native engine, and a native Temporal workflow",
        "",
        f"Generated by `python bench/temporal/run.py --runs {runs} --steps {n} --activities {activities} --write`; "
        "do not edit by hand.",
        "",
        "### Machine",
        "",
        f"- Python {platform.python_version()}, {platform.platform()}, {_cpus()} cores (shared with other work)",
        f"- temporalio {temporalio.__version__}; {version([cli, '--version'])}",
        "- `temporal server start-dev --headless`, its database a SQLite file",
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; agent-unit at `{commit()}`; wall time {wall:.0f} s",
        "",
        "### Settings",
        "",
        f"- runs/s to a pause: {runs} sequential runs (after 5 to warm up) of an agent that does one step "
        "and waits at an interrupt, each from `start` to the run parked. The native workflow does one activity "
        "and waits; timed from `start_workflow` to an Update that returns once it waits.",
        f"- steps/s: one run of {n} no-op steps through agent-unit (timed from `start` to the run completed), "
        f"and one workflow of {activities} steps, one activity each (and one local activity each, for "
        "information). agent-unit on Temporal runs all the steps of an execution in one activity (the journal "
        "makes each step durable in the store).",
        "- agent-unit's store: SQLite (WAL, NORMAL) in a temporary folder; the app, its worker and the native "
        "workflow's worker all run in the benchmark's process.",
        "",
        "### Results (per second)",
        "",
        "| system | runs/s to a pause | steps/s |",
        "| --- | ---: | ---: |",
        f"| agent-unit, native engine (SQLite) | {native['runs']:,.1f} | {native['steps']:,.0f} |",
        f'| agent-unit, `engine = "temporal"` (SQLite + Temporal) | {on_temporal["runs"]:,.1f} '
        f"| {on_temporal['steps']:,.0f} |",
        f"| native Temporal workflow, one activity per step | {workflow_['runs']:,.1f} | {workflow_['steps']:,.1f} |",
        f"| native Temporal workflow, one local activity per step | - | {workflow_['local_steps']:,.1f} |",
        "",
        "### Where the time goes",
        "",
        f"- A run to a pause on Temporal: {on_temporal['run_ms']:.0f} ms. The app's `start` (the store's insert "
        f"and the `start_workflow` call) {on_temporal['start_ms']:.0f} ms; the execution in the worker (the "
        f"activity's work: journal, the agent's step, the park saved) {on_temporal['execution_ms']:.0f} ms; the "
        "rest is Temporal's round trips (a workflow task, the activity dispatched and completed, another "
        "workflow task) and the app seeing the park in the store. The native engine parks "
        f"{native['runs'] / on_temporal['runs']:.0f}x as many runs per second: it does the execution alone.",
        f"- Steps: {on_temporal['steps_in_activity']:,.0f}/s inside the activity, against {native['steps']:,.0f}/s "
        "on the native engine: a step costs the same journal write on both, and Temporal sees one activity per "
        f"execution, not one per step. The {n}-step run, start to end, is {on_temporal['steps']:,.0f} steps/s. "
        f"One activity per step runs {workflow_['steps']:,.1f} steps/s: each step is a task the server "
        "dispatches and records in its history.",
        "",
    ]
    return "\n".join(lines)


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def write(text: str) -> None:
    path = ROOT / "BENCHMARKS.md"
    current = path.read_text()
    pattern = re.compile(r"## Temporal: .*?(?=\n## (?!#)|\Z)", re.S)
    updated = (
        pattern.sub(lambda _: text.rstrip("\n") + "\n", current)
        if pattern.search(current)
        else current.rstrip("\n") + "\n\n" + text
    )
    path.write_text(updated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=2000, help="steps of agent-unit's run")
    parser.add_argument("--activities", type=int, default=100, help="steps (activities) of the native workflow")
    parser.add_argument("--write", action="store_true", help="replace the Temporal section of BENCHMARKS.md")
    args = parser.parse_args()
    began = time.monotonic()
    results = asyncio.run(measure(args.runs, args.steps, args.activities))
    text = section(results, args.runs, args.steps, args.activities, time.monotonic() - began)
    print(text)
    if args.write:
        write(text)


if __name__ == "__main__":
    main()
