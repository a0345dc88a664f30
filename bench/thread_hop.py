"""The floor of a sync step's thread hop on this host: a bare round trip to a worker thread and back.

    .venv/bin/python bench/thread_hop.py

A sync step function runs in a worker thread (``agent_unit._threads``), so the loop hands it over and
takes the result back: at least one wake-up of each thread. This times that alone, with no
agent-unit code: the loop's side puts a lock on a ``queue.SimpleQueue`` and waits on it; the worker
takes it and releases it. Compare it with the CPU per async step in BENCHMARKS.md: when one hop costs
as much as a whole async step, sync steps cannot reach half the rate of async ones while they run in
a thread.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time


def round_trips(n: int) -> tuple[float, float]:
    """Wall and CPU time (µs, both threads' CPU) of one round trip, over ``n`` of them."""
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
    return wall / n * 1e6, cpu / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="round trips per repeat")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rounds = [round_trips(args.n) for _ in range(args.repeat)]
    walls, cpus = [w for w, _ in rounds], [c for _, c in rounds]
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"thread round trip: wall {wall:.1f} µs, CPU {cpu:.1f} µs (median of {args.repeat})")
    print("each: " + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in rounds))


if __name__ == "__main__":
    main()
