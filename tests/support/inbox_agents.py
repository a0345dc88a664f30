"""Agents the inbox's browser tests drive: one per kind of answer form."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from agent_unit import Run, define_agent
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


AGENTS = {"refund": refund, "chatty": chatty, "payout": payout, "deploy": deploy, "declined": declined, "quote": quote}
