"""The LangGraph side of the HTTP benchmark, served by ``langgraph dev`` (in-memory runtime).

``approve``: a node (the journaled step's equivalent: its output is checkpointed), then a node
that calls ``interrupt()``; resumed with ``Command(resume=True)`` it returns.
``ticker``: one node that writes ``n`` custom stream events (``stream_mode="custom"``) whose
value is the wall time (ms) of the write, ``gap_ms`` apart; the benchmark reads them over SSE.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class ApproveState(TypedDict, total=False):
    input: dict[str, Any]
    work: int
    result: str


async def work(state: ApproveState) -> ApproveState:
    return {"work": 1}


async def ask(state: ApproveState) -> ApproveState:
    approved = interrupt({"x": 1})
    return {"result": "ok" if approved else "declined"}


_approve = StateGraph(ApproveState)
_approve.add_node("work", work)
_approve.add_node("approve", ask)
_approve.add_edge(START, "work")
_approve.add_edge("work", "approve")
_approve.add_edge("approve", END)
approve = _approve.compile()


class TickerState(TypedDict, total=False):
    n: int
    gap_ms: float
    done: int


async def tick(state: TickerState) -> TickerState:
    write = get_stream_writer()
    n = int(state.get("n", 50))
    gap = float(state.get("gap_ms", 5)) / 1000
    for i in range(n):
        write({"i": i, "t": time.time_ns() / 1e6})
        await asyncio.sleep(gap)
    return {"done": n}


_ticker = StateGraph(TickerState)
_ticker.add_node("tick", tick)
_ticker.add_edge(START, "tick")
_ticker.add_edge("tick", END)
ticker = _ticker.compile()
