"""Agents the inbox's browser tests drive: one per kind of answer form."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from agent_unit import RetryPolicy, Run, StepContext, define_agent
from agent_unit.adapters.approval import ask_approval

from .http_agents import chatty, refund


class Contact(BaseModel):
    name: str
    phone: str | None = None


class Payout(BaseModel):
    """Every kind of field the form draws: a boolean, an enum, a number, a string, a nested object."""

    approved: bool
    priority: Literal["low", "normal", "high"]
    amount: float = Field(description="At most 100.")
    note: str | None = None
    contact: Contact

    @field_validator("amount")
    @classmethod
    def _at_most_100(cls, value: float) -> float:
        # Not in the JSON Schema: only the server can refuse it, as the form must show.
        if value > 100:
            raise ValueError("amount must be at most 100")
        return value


@define_agent(description="Pays out after a human fills in the details.")
async def payout(input: str, run: Run) -> str:
    answer = await run.interrupt("approve-payout", {"request": input}, answer=Payout)
    if not answer.approved:
        return "not paid"
    return f"paid {answer.amount:g} to {answer.contact.name} ({answer.priority}, {answer.note or 'no note'})"


@define_agent(description="Deploys after a tool approval.")
async def deploy(input: str, run: Run) -> str:
    approval = await ask_approval(run, call_id="call-1", tool="deploy", arguments={"service": input}, agent="deploy")
    if not approval.approved:
        return f"declined: {approval.reason}"
    return f"deployed {input}"


class CardDeclined(Exception):
    pass


def decline() -> None:
    raise CardDeclined("the card ending 4242 was declined")


@define_agent(description="Charges a card, which is declined.")
async def declined(input: str, run: Run) -> str:
    await run.step("charge", decline)
    return "charged"


@define_agent(description="Answers at once.")
async def quote(input: str, run: Run) -> dict[str, object]:
    return {"order": input, "total": 42.5, "lines": ["widget", "gadget"]}


_tries: dict[str, int] = {}


def flaky(step: StepContext) -> str:
    """Fails on its first two attempts in each run, then answers."""
    _tries[step.run_id] = _tries.get(step.run_id, 0) + 1
    if _tries[step.run_id] < 3:
        raise ConnectionError(f"the supplier timed out (try {_tries[step.run_id]})")
    return "stock: 7"


@define_agent(description="A retried step, a sleep, then a question.")
async def journey(input: str, run: Run) -> str:
    stock = await run.step("fetch-stock", flaky, retry=RetryPolicy(attempts=3, initial="50ms"))
    await run.sleep("1s")
    go = await run.interrupt("confirm-order", {"order": input, "stock": stock}, answer=bool)
    await run.step("place-order", lambda: f"order {input} placed")
    return "placed" if go else "dropped"


@define_agent(description="Works, then sleeps for two days.")
async def napper(input: str, run: Run) -> str:
    await run.step("prepare", lambda: "ready")
    await run.step("send-reminder", lambda: "sent")
    await run.sleep("2d")
    return "woke"


shopper = Agent(TestModel(), name="shopper")


@shopper.tool_plain
def look_up_price(item: str) -> str:
    """The price of an item."""
    return f"{item}: 3 EUR"


@define_agent(description="A step that works until the run is cancelled (or a minute passes).")
async def slow(input: str, run: Run) -> str:
    async def work() -> str:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.signal.wait(), 60)
        return "stopped"

    return await run.step("work", work)


def charge_once() -> str:
    """Hangs where ``HANG_MARKER`` names a file (the test kills the process there), once."""
    marker = os.environ.get("HANG_MARKER")
    if marker and not Path(marker).exists():
        time.sleep(0.3)  # long enough for the step's STEP_STARTED to be stored
        Path(marker).write_text("hung")
        time.sleep(60)
    return "charged"


@define_agent(description="Crashes inside a step once, then is recovered.")
async def crashy(input: str, run: Run) -> str:
    await run.step("reserve", lambda: "reserved")
    return await run.step("charge", charge_once)


@define_agent(description="Fails in the agent's own code.")
async def broken(input: str, run: Run) -> str:
    totals = await run.step("load-totals", lambda: {"a": 1})
    return str(totals["missing"])


def transient_fetch(step: StepContext) -> str:
    if step.attempt == 1:  # a transient outage: the first attempt fails, a retry succeeds
        raise ConnectionError("the upstream API did not answer")
    return "fetched"


@define_agent(description="Fails in a step on its first attempt; a retry goes on from that step.")
async def transient(input: str, run: Run) -> str:
    await run.step("prepare", lambda: "prepared")
    return await run.step("fetch", transient_fetch)


def as_reviewer(request: Any, action: str, run: dict[str, Any]) -> str:
    """An ``authorize`` that lets everyone in and names who asks (a real one reads a session)."""
    return request.headers.get("x-reviewer", "reviewer@example.com")  # type: ignore[no-any-return]


AGENTS: dict[str, Any] = {
    "refund": refund,
    "chatty": chatty,
    "payout": payout,
    "deploy": deploy,
    "declined": declined,
    "quote": quote,
    "journey": journey,
    "napper": napper,
    "shopper": shopper,
    "broken": broken,
    "slow": slow,
    "crashy": crashy,
    "transient": transient,
}
