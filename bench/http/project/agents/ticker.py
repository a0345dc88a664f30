"""Emits ``n`` CUSTOM events whose value is the wall time (ms) at which ``run.emit`` was called.

The HTTP benchmark reads them over SSE and subtracts: arrival wall time minus emit wall time
(server and client share one machine, so one clock). The whole path is in it: the event is
stored (a commit to the run's event log), the SSE reader is notified, reads it and writes it.

``mode="alone"``: emit, then ``asyncio.sleep``; the engine stores the event by itself (a CUSTOM
event is not a delta, so it goes at the loop's next turn rather than after ``delta_batch_ms``).
``mode="step"``: each emit is followed by a journaled no-op step, so the event rides in that
step's commit: what an agent's progress events cost when they go out with its work.

``gap_ms`` spaces the events out, so each is measured on a stream that is not backed up.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agent_unit import Run, define_agent


async def noop() -> None:
    return None


@define_agent(description="Emits timestamped CUSTOM events for the delivery-latency benchmark.")
async def agent(input: dict[str, Any], run: Run) -> int:
    n = int(input.get("n", 50))
    gap = float(input.get("gap_ms", 5)) / 1000
    committed = input.get("mode", "alone") == "step"
    for i in range(n):
        await run.emit("tick", {"i": i, "t": time.time_ns() / 1e6})
        if committed:
            await run.step("commit", noop)
        await asyncio.sleep(gap)
    return n
