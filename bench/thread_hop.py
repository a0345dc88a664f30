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
interrupt between its virtual CPUs.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="round trips per repeat")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for label, pinned in (("as scheduled", False), ("both threads on one core", True)):
        rounds = [round_trips(args.n, pinned) for _ in range(args.repeat)]
        wall = statistics.median(w for w, _ in rounds)
        cpu = statistics.median(c for _, c in rounds)
        print(f"thread round trip, {label}: wall {wall:.1f} µs, CPU {cpu:.1f} µs (median of {args.repeat})")
        print("  each (wall/CPU): " + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in rounds))


if __name__ == "__main__":
    main()
