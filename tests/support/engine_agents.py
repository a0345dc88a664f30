"""Agents of the engine scenarios every engine must pass (tests/core/test_engine_parity.py).

They run in the test's process and in the processes it kills, so each effect is a line appended
to ``$LEDGER_FILE``: the test counts effects across processes.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agent_unit import Run, define_agent
from agent_unit.errors import InterruptExpired


def ledger(line: str) -> None:
    """Append ``line`` to ``$LEDGER_FILE`` (read at each call: a test sets it)."""
    with Path(os.environ["LEDGER_FILE"]).open("a") as f:
        f.write(line + "\n")


@define_agent(description="Loads, waits for an approval, charges.")
async def refund(input: str, run: Run) -> str:
    await run.step("load", lambda: ledger(f"load {run.id}"))
    approved = await run.interrupt("approve", input, answer=bool)
    if not approved:
        return "declined"
    await run.step("charge", lambda step: ledger(f"charge {run.id} {step.idempotency_key}"))
    return "refunded"


@define_agent(description="Sleeps between two steps.")
async def nap(input: float, run: Run) -> str:
    await run.step("before", lambda: ledger(f"before {run.id}"))
    await run.sleep(f"{input}s")
    await run.step("after", lambda: ledger(f"after {run.id}"))
    return "rested"


@define_agent(description="Emits events through several steps, parks, and emits more.")
async def chatty(input: int, run: Run) -> int:
    for i in range(input):
        await run.step(f"a{i}", lambda i=i: i)
        await run.emit("tick", i)
    await run.interrupt("go-on", None, answer=bool)
    for i in range(input):
        await run.step(f"b{i}", lambda i=i: i)
        await run.emit("tock", i)
    return input


@define_agent(description="Three steps; the second hangs at $HANG_MARKER on the first attempt (it is killed there).")
async def crashable(input: None, run: Run) -> str:
    async def two() -> str:
        ledger(f"two-start {run.id}")
        if run.attempt == 1:
            Path(os.environ["HANG_MARKER"]).write_text("in step two")
            await asyncio.sleep(3600)
        ledger(f"two-end {run.id}")
        return "two"

    await run.step("one", lambda: ledger(f"one {run.id}"))
    await run.step("two", two)
    await run.step("three", lambda: ledger(f"three {run.id}"))
    return "done"


@define_agent(description="Waits for an approval until a deadline of `input` seconds; then takes the default.")
async def deadline(input: float, run: Run) -> str:
    approved = await run.interrupt("approve", None, answer=bool, timeout=input, default=False)
    await run.step("after", lambda: ledger(f"after {run.id} {approved}"))
    return "approved" if approved else "expired"


@define_agent(description="Waits until a deadline of `input` seconds with no default: the expiry raises.")
async def strict(input: float, run: Run) -> str:
    try:
        await run.interrupt("approve", None, answer=bool, timeout=input)
    except InterruptExpired:
        return "expired"
    return "answered"


BUGGY: list[bool] = [True]
"""While true, ``flaky``'s charge raises: a test fixes the bug by clearing it."""


@define_agent(description="Loads, then charges: the charge fails while BUGGY is set.")
async def flaky(input: None, run: Run) -> str:
    def charge() -> str:
        ledger(f"charge {run.id}")
        if BUGGY[0]:
            raise RuntimeError("the card service is down")
        return "charged"

    await run.step("load", lambda: ledger(f"load {run.id}"))
    return await run.step("charge", charge)


AGENTS = {
    "refund": refund,
    "nap": nap,
    "chatty": chatty,
    "crashable": crashable,
    "deadline": deadline,
    "strict": strict,
    "flaky": flaky,
}
