"""Does a full store slow a run down? Starts and resumes timed in process on an empty store and a filled one.

    python bench/http/store_size.py                       # 30,000 parked runs against 100, 4 alternations
    python bench/http/store_size.py --runs 10000 --shuffle

The HTTP benchmark's no-slowdown target (``bench/http/run.py``, part (e)) compares a server whose
store holds 10,000+ runs with a server just started on an empty store, 5-second windows a few
seconds apart; on a host whose speed drifts by a tenth between two windows, that comparison can
miss or pass by the host alone. This asks the same question without the host's drift between
servers and sockets: the ``approve`` agent of ``bench/http/project`` driven through the ASGI app in
process (as ``asgi_resume.py`` drives it), on a copy of a SQLite store filled with ``--runs`` parked
runs and on a copy of one holding 100, in alternation, each copy opened by a fresh app. Each trial
starts ``--n`` runs to their pause, then resumes them (in the order they started, or shuffled), and
prints the process time per start and per resume, and the read system calls each made (SQLite
reading a page its own cache does not hold: a count the host's speed does not change).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgi_resume import call

HERE = Path(__file__).resolve().parent
_FILES = ("", "-wal", "-shm")


def approve_agent() -> Any:
    spec = importlib.util.spec_from_file_location("approve", HERE / "project" / "agents" / "approve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.agent


def app_on(path: Path, agent: Any) -> Any:
    from agent_unit import create_agent_unit
    from agent_unit.stores.sqlite import SQLiteStore

    return create_agent_unit({"approve": agent}, store=SQLiteStore(str(path)), background_sweep=False)


async def fill(path: Path, agent: Any, runs: int) -> None:
    """A store holding ``runs`` runs parked at their interrupt, as the HTTP benchmark's fill leaves them."""
    app = app_on(path, agent)
    for _ in range(runs):
        await call(app, "POST", "/agents/approve/runs", {"input": {}})
    await app.engine.aclose()


def read_calls() -> int:
    """This process's read system calls so far (Linux; 0 elsewhere): SQLite's page reads among them."""
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("syscr:"))
    except OSError:
        return 0


def copy_store(source: Path, copy: Path) -> None:
    """``source`` and its WAL, copied (a timed trial never writes the store it measures again)."""
    for suffix in _FILES:
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{copy}{suffix}")


def remove_store(path: Path) -> None:
    for suffix in _FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@dataclass
class Trial:
    start_us: float  # process time per start to the pause
    resume_us: float  # per resume
    start_reads: float  # read system calls per start (SQLite reading pages its cache does not hold)
    resume_reads: float


async def trial(source: Path, work: Path, agent: Any, n: int, shuffle: bool) -> Trial:
    """Starts and resumes timed on a copy of ``source`` (its WAL with it)."""
    copy = work / "trial.db"
    copy_store(source, copy)
    app = app_on(copy, agent)
    for _ in range(200):  # warm: imports, statements, the pages the starts write
        await call(app, "POST", "/agents/approve/runs", {"input": {}})
    ids = []
    began, reads = time.process_time(), read_calls()
    for _ in range(n):
        ids.append((await call(app, "POST", "/agents/approve/runs", {"input": {}}))["id"])
    start_us, start_reads = (time.process_time() - began) / n * 1e6, (read_calls() - reads) / n
    if shuffle:
        random.Random(0).shuffle(ids)
    began, reads = time.process_time(), read_calls()
    for run_id in ids:
        await call(app, "POST", f"/runs/{run_id}/resume", {"answer": True})
    resume_us, resume_reads = (time.process_time() - began) / n * 1e6, (read_calls() - reads) / n
    await app.engine.aclose()
    remove_store(copy)
    return Trial(start_us, resume_us, start_reads, resume_reads)


async def main(runs: int, n: int, rounds: int, shuffle: bool) -> None:
    agent = approve_agent()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        empty, full = work / "empty.db", work / "full.db"
        await fill(empty, agent, 100)
        await fill(full, agent, runs)
        order = "shuffled" if shuffle else "in the order they started"
        print(f"{n:,} starts, then their resumes ({order}), on 100 parked runs and on {runs:,}:")
        ratios: list[tuple[float, float]] = []
        for k in range(rounds):
            pair = [(False, empty), (True, full)]
            if k % 2:
                pair.reverse()  # neither store always goes first
            timed = {is_full: await trial(path, work, agent, n, shuffle) for is_full, path in pair}
            small, large = timed[False], timed[True]
            ratios.append((small.start_us / large.start_us, small.resume_us / large.resume_us))
            print(
                f"  round {k + 1}: µs per start {small.start_us:.0f} vs {large.start_us:.0f}, "
                f"per resume {small.resume_us:.0f} vs {large.resume_us:.0f}; read calls per start "
                f"{small.start_reads:.2f} vs {large.start_reads:.2f}, per resume "
                f"{small.resume_reads:.2f} vs {large.resume_reads:.2f}",
                flush=True,
            )
        starts, resumes = statistics.median(r[0] for r in ratios), statistics.median(r[1] for r in ratios)
        print(
            "median, the full store's speed over the empty one's (run.py's no-slowdown ratio, >= 0.9 to pass): "
            f"starts {starts:.2f}, resumes {resumes:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30_000, help="parked runs in the full store (default 30,000)")
    parser.add_argument("--n", type=int, default=3_000, help="runs started and resumed per trial (default 3,000)")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two stores (default 4)")
    parser.add_argument("--shuffle", action="store_true", help="resume in a random order")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.n, args.rounds, args.shuffle))
