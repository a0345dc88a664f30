"""One server's scheduler in its own process, its clock driven by the test.

    python -m tests.support.scheduler_process STORE_URL LEDGER

Each line on stdin is a time (epoch seconds): the clock moves there, the scheduler ticks and
waits for the handlers it won, and the process answers ``ticked N`` (the ticks it won).
The task ``beat`` runs every minute; its handler appends ``task tick pid`` to LEDGER. With
``HANG=1`` in its environment the handler never returns once it has written its line (a server
to kill mid-handler).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import datetime, timedelta

from agent_unit import create_agent_unit
from agent_unit._clock import ManualClock


def beat(name: str, scheduled_at: datetime) -> None:
    with open(os.environ["LEDGER"], "a") as ledger:  # one short append per line: never interleaved
        ledger.write(f"{name} {scheduled_at.isoformat()} {os.getpid()}\n")
    if os.environ.get("HANG") == "1":
        time.sleep(3600)


async def main(store: str) -> None:
    clock = ManualClock(0.0)
    tasks = {"beat": {"schedule": "* * * * *", "handler": "tests.support.scheduler_process:beat"}}
    app = create_agent_unit({}, store=store, clock=clock, tasks=tasks)
    assert app.scheduler is not None
    await app.engine.check_store()
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        clock.advance(timedelta(seconds=float(line) - clock.time()))
        won = await app.scheduler.tick(wait=True)
        print(f"ticked {len(won)}", flush=True)
    await app.engine.aclose()


if __name__ == "__main__":
    os.environ["LEDGER"] = sys.argv[2]
    asyncio.run(main(sys.argv[1]))
