"""The floor of a sync step's thread hop on this host: a bare round trip to a worker thread and back.

    .venv/bin/python bench/thread_hop.py

A sync step function runs in a worker thread (``agent_unit._threads``), so the loop hands it over and
takes the result back: at least one wake-up of each thread. This times that alone, with no
agent-unit code: the loop's side puts a lock on a ``queue.SimpleQueue`` and waits on it; the worker
takes it and releases it. Compare it with the CPU per async step in BENCHMARKS.md: when one hop costs
as much as a whole async step, sync steps cannot reach half the rate of async ones while they run in
a thread.

It times the round trip twice: as the OS schedules the two threads (on a multi-core host the worker
usually wakes on another core), and with both pinned to one core (``os.sched_setaffinity``, Linux).
The gap is what waking a thread on another core costs: a virtual machine pays for it with an
interrupt between its virtual CPUs. A third line hands over through two pipes instead of a queue
and a lock: a write to a pipe is a "sync" wake-up, which Linux may answer by running the woken
thread on the writer's core; where it does not, the pipes cost what the lock does. A fourth line
is agent-unit's own hand-over of a quick function (``run_in_thread`` of a no-op, awaited in an
event loop): the thread kept for quick calls, on the loop's core, through a socket pair.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import statistics
import threading
import time


def round_trips(n: int, pinned: bool = False) -> tuple[float, float]:
    """Wall and CPU time (µs, both threads' CPU) of one round trip, over ``n`` of them.

    ``pinned``: both threads on the first core this process may use (the worker inherits it).
    """
    allowed = os.sched_getaffinity(0)
    if pinned:
        os.sched_setaffinity(0, {min(allowed)})
    handed: queue.SimpleQueue[threading.Lock | None] = queue.SimpleQueue()

    def worker() -> None:
        while (lock := handed.get()) is not None:
            lock.release()

    thread = threading.Thread(target=worker)
    thread.start()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        lock = threading.Lock()
        lock.acquire()
        handed.put(lock)
        lock.acquire()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    handed.put(None)
    thread.join()
    os.sched_setaffinity(0, allowed)
    return wall / n * 1e6, cpu / n * 1e6


def pipe_round_trips(n: int) -> tuple[float, float]:
    """As :func:`round_trips`, unpinned, through a pipe each way (one byte there, one back)."""
    there_r, there_w = os.pipe()
    back_r, back_w = os.pipe()

    def worker() -> None:
        while os.read(there_r, 1) == b"x":
            os.write(back_w, b"y")

    thread = threading.Thread(target=worker)
    thread.start()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        os.write(there_w, b"x")
        os.read(back_r, 1)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    os.write(there_w, b"q")
    thread.join()
    for fd in (there_r, there_w, back_r, back_w):
        os.close(fd)
    return wall / n * 1e6, cpu / n * 1e6


def agent_unit_round_trips(n: int) -> tuple[float, float]:
    """As :func:`round_trips`, through agent-unit's own hand-over: ``run_in_thread`` of a quick no-op."""
    from agent_unit._threads import run_in_thread

    def noop() -> int:
        return 1

    async def trips() -> tuple[float, float]:
        for _ in range(100):  # it is known as quick once it has returned quickly
            await run_in_thread(noop)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(n):
            await run_in_thread(noop)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return wall / n * 1e6, cpu / n * 1e6

    return asyncio.run(trips())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="round trips per repeat")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ways = (
        ("as scheduled", lambda: round_trips(args.n)),
        ("both threads on one core", lambda: round_trips(args.n, pinned=True)),
        ("as scheduled, through pipes", lambda: pipe_round_trips(args.n)),
        ("agent-unit's quick hand-over", lambda: agent_unit_round_trips(args.n)),
    )
    for label, way in ways:
        rounds = [way() for _ in range(args.repeat)]
        wall = statistics.median(w for w, _ in rounds)
        cpu = statistics.median(c for _, c in rounds)
        print(f"thread round trip, {label}: wall {wall:.1f} µs, CPU {cpu:.1f} µs (median of {args.repeat})")
        print("  each (wall/CPU): " + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in rounds))


if __name__ == "__main__":
    main()
