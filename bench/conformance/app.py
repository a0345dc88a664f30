"""The server the conformance suites run against: a chat agent (the default A2A agent), an echo
agent and an approval agent.

The A2A TCK's default agent must stay working after a blocking SendMessage answers (its
ListTasks tests wait for ``TASK_STATE_WORKING``) and take follow-up messages (``taskId``):
``chat`` reads the messages sent to it and sleeps between reads, for up to ten minutes, or
until a message says ``stop``.

Served by ``bench/conformance/run.sh`` with uvicorn on ``$PORT``; the store is in memory, so
every run of the suites starts from no tasks.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from agent_unit import Run, create_agent_unit, define_agent

CHAT_READS, CHAT_PAUSE = 20, "30s"


class RefundInput(BaseModel):
    order_id: str


class Approval(BaseModel):
    approved: bool


@define_agent(description="Echoes a text back.")
async def echo(input: str) -> str:
    return f"echo: {input}"


@define_agent(description="Keeps working for up to ten minutes, reading the messages sent to it, until one says stop.")
async def chat(input: str, run: Run) -> list[Any]:
    heard: list[Any] = [input]
    for _ in range(CHAT_READS):
        heard += await run.messages()
        if "stop" in heard:
            break
        await run.sleep(CHAT_PAUSE)
    return heard


@define_agent(description="Refunds an order after a human approves it.")
async def refund(input: RefundInput, run: Run) -> dict[str, object]:
    decision = await run.interrupt("approve-refund", {"order_id": input.order_id}, answer=Approval)
    return {"order_id": input.order_id, "status": "refunded" if decision.approved else "declined"}


app = create_agent_unit(
    {"chat": chat, "echo": echo, "refund": refund},
    store="memory://",
    public_url=f"http://localhost:{os.environ.get('PORT', '8790')}",
    a2a_default_agent="chat",  # a generic A2A client (the TCK) names no skill
)
