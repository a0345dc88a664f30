"""Run a command while this host's idle CPUs poll instead of halting: what a thread wake-up costs apart.

    sudo .venv/bin/python bench/idle_poll.py -- .venv/bin/python bench/thread_hop.py

On a virtual machine, a CPU with nothing to run halts, and waking a thread on a halted CPU takes an
interrupt through the hypervisor: tens of microseconds, paid by every hand-over between threads or
processes (a sync step's worker thread, a browser's network process). Hosts differ here: a KVM
guest's ``cpuidle-haltpoll`` polls for up to 200 µs before it halts by default, bare metal wakes a
CPU in a few microseconds, and this benchmark's host halts at once (``guest_halt_poll_ns=0``). This
holds a PM QoS request for 0 µs of wake-up latency (``/dev/cpu_dma_latency``, Linux, root) for as
long as the command runs, so idle CPUs poll: the command's figures are then what the same code
costs on a host whose wake-ups are cheap. The request ends when this process does.

It changes the host, not what is measured: the figures of record in BENCHMARKS.md are taken without
it, and each figure taken with it says so.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
from pathlib import Path

QOS = Path("/dev/cpu_dma_latency")


def idle_policy() -> str:
    """The host's cpuidle driver and, for ``haltpoll``, how long an idle CPU polls before it halts."""
    base = Path("/sys/devices/system/cpu/cpuidle")
    try:
        driver = (base / "current_driver").read_text().strip()
    except OSError:
        return "cpuidle: not exposed"
    text = f"cpuidle driver {driver}"
    poll = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    if driver == "haltpoll" and poll.exists():
        ns = int(poll.read_text())
        how = "idle CPUs halt at once" if ns == 0 else f"poll up to {ns / 1000:g} µs"
        text += f", guest_halt_poll_ns={ns} ({how})"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name a command after --")
    try:
        fd = os.open(QOS, os.O_WRONLY)
    except OSError as exc:
        print(f"cannot hold a PM QoS request ({QOS}: {exc.strerror}): run as root on Linux", file=sys.stderr)
        return 2
    try:
        os.write(fd, struct.pack("i", 0))
        print(f"# idle CPUs poll while this runs (was: {idle_policy()})", file=sys.stderr, flush=True)
        return subprocess.call(command)
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
