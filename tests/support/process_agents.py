"""Agents that tests run in child processes (importable by a fresh interpreter).

Effects are appended to the file named by ``EFFECTS_FILE``, so a count survives the
process that made it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from agent_unit import Run, StepContext, define_agent


def effect(line: str) -> None:
    with Path(os.environ["EFFECTS_FILE"]).open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@define_agent
async def crashable(input: None, run: Run) -> str:
    """Step two hangs (in the process that will be killed) after recording its start."""
    await run.step("one", lambda step: effect(f"one {step.idempotency_key}"))

    async def two(step: StepContext) -> str:
        effect(f"two-start {step.idempotency_key}")
        if os.environ.get("HANG_IN_STEP_TWO"):
            Path(os.environ["HANG_MARKER"]).write_text("in step two")
            await asyncio.sleep(3600)
        effect(f"two-done {step.idempotency_key}")
        return "charged"

    return await run.step("two", two)


@define_agent
async def approval(input: int, run: Run) -> str:
    answer = await run.interrupt("approve", input)
    await run.step("after", lambda: effect(f"after-approval {run.id}"))
    return f"approved {answer}"


@define_agent
async def nap(input: int, run: Run) -> str:
    await run.sleep("1s")
    await run.step("after", lambda: effect(f"after-nap {run.id}"))
    return "awake"


@define_agent
async def ticker(input: int, run: Run) -> int:
    """Emits ``input`` CUSTOM events, each with the moment it was emitted, 20 ms apart."""
    for i in range(input):
        await run.emit("tick", {"i": i, "at": time.time()})
        await asyncio.sleep(0.02)
    return input


@define_agent
async def plodder(input: int, run: Run) -> int:
    """``input`` steps, 50 ms each, each recording its effect with its idempotency key."""
    for i in range(input):

        async def plod(step: StepContext, i: int = i) -> int:
            await asyncio.sleep(0.05)
            effect(f"plod {i} {step.idempotency_key}")
            return i

        await run.step("plod", plod)
    return input


@define_agent
async def charging(input: None, run: Run) -> str:
    """A blocking call in a step's thread (a payment API): it hangs after saying so at ``HANG_MARKER``."""

    def charge() -> str:
        time.sleep(0.3)  # past STEP_STARTED_WAIT: the step's STEP_STARTED is stored
        Path(os.environ["HANG_MARKER"]).write_text("charging")
        time.sleep(3600)
        return "charged"

    return await run.step("charge", charge)


AGENTS = {
    "crashable": crashable,
    "approval": approval,
    "nap": nap,
    "ticker": ticker,
    "plodder": plodder,
    "charging": charging,
}
