"""LangGraph: prepare, ask a person (``interrupt``), charge; each node once."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from effects import record
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict  # pydantic describes typing's TypedDict only from Python 3.12

from agent_unit import use_run


class Order(TypedDict, total=False):
    items: Annotated[list[Any], operator.add]


def prepare(state: Order) -> Order:
    record("prepare")
    return {"items": ["prepared"]}


def approve(state: Order) -> Order:
    answer = interrupt({"items": state["items"]})
    return {"items": [f"answer {answer}"]}


def charge(state: Order) -> Order:
    record(f"charge {use_run().idempotency_key()}")
    return {"items": ["charged"]}


builder = StateGraph(Order)
builder.add_node("prepare", prepare)
builder.add_node("approve", approve)
builder.add_node("charge", charge)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "approve")
builder.add_edge("approve", "charge")
builder.add_edge("charge", END)
agent = builder.compile()
