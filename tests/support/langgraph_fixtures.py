"""LangGraph graphs for the adapter's tests, in process and in child processes (a server, a killed worker).

Each builder takes ``effect(line)``, called once per node execution, so a test counts
executions with a list. ``AGENTS`` (for child processes) append to the file named by
``EFFECTS_FILE``, so a count survives the process that made it.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict  # pydantic describes typing's TypedDict only from Python 3.12

from agent_unit import use_run
from agent_unit.testing import adapters as conformance

Effect = Callable[[str], None]


class Order(TypedDict, total=False):
    items: Annotated[list[Any], operator.add]


def file_effect(line: str) -> None:
    if path := os.environ.get("EFFECTS_FILE"):
        with Path(path).open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def chain(*nodes: tuple[str, Callable[..., Any]], **compile: Any) -> CompiledStateGraph:
    """The nodes one after the other, over the ``Order`` state."""
    builder = StateGraph(Order)
    previous = START
    for name, node in nodes:
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder.compile(**compile)


def approval(effect: Effect, *, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """prepare, then approve (asks a human with ``interrupt``), then charge (the side effect)."""

    def prepare(state: Order) -> Order:
        effect("prepare")
        conformance.model_called("prepare")  # the node before the pause stands in for a model call
        return {"items": ["prepared"]}

    def approve(state: Order) -> Order:
        effect("approve")
        answer = interrupt({"items": state["items"]})
        return {"items": [f"answer {answer}"]}

    def charge(state: Order) -> Order:
        effect(f"charge {use_run().idempotency_key()}")
        conformance.effect("charge")
        return {"items": ["charged"]}

    return chain(("prepare", prepare), ("approve", approve), ("charge", charge), checkpointer=checkpointer)


def two_questions(effect: Effect) -> CompiledStateGraph:
    """One node that asks twice, then a node that finishes."""

    def ask(state: Order) -> Order:
        effect("ask")
        first = interrupt("first?")
        second = interrupt("second?")
        return {"items": [first, second]}

    async def finish(state: Order) -> Order:
        effect("finish")
        await use_run().emit("finished", state["items"])
        return {"items": ["done"]}

    return chain(("ask", ask), ("finish", finish))


def parallel_questions(effect: Effect) -> CompiledStateGraph:
    """A subgraph that asks, then two nodes side by side that both ask, then a node that joins them."""

    def inner(state: Order) -> Order:
        effect("inner")
        return {"items": [f"inner {interrupt('inner?')}"]}

    sub = StateGraph(Order)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)

    def side(name: str) -> Callable[[Order], Order]:
        def ask(state: Order) -> Order:
            effect(name)
            return {"items": [f"{name} {interrupt(f'{name}?')}"]}

        return ask

    def join(state: Order) -> Order:
        effect("join")
        return {"items": ["joined"]}

    builder = StateGraph(Order)
    builder.add_node("outer", sub.compile())
    builder.add_node("left", side("left"))
    builder.add_node("right", side("right"))
    builder.add_node("join", join)
    builder.add_edge(START, "outer")
    builder.add_edge("outer", "left")
    builder.add_edge("outer", "right")
    builder.add_edge(["left", "right"], "join")
    builder.add_edge("join", END)
    return builder.compile()


def asking_loop(effect: Effect, rounds: int = 2) -> CompiledStateGraph:
    """A node that asks once per visit and loops back to itself ``rounds`` times."""

    def ask(state: Order) -> Order:
        effect("ask")
        return {"items": [interrupt({"round": len(state.get("items", []))})]}

    builder = StateGraph(Order)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_conditional_edges("ask", lambda state: "ask" if len(state["items"]) < rounds else END)
    return builder.compile()


def crashable(effect: Effect) -> CompiledStateGraph:
    """Node two is where the conformance suite kills the process."""

    def one(state: Order) -> Order:
        effect(f"one {use_run().idempotency_key()}")
        conformance.model_called("one")  # the node before the tool stands in for a model call
        return {"items": ["one"]}

    async def two(state: Order) -> Order:
        effect(f"two-start {use_run().idempotency_key()}")
        await conformance.crash_point()  # the conformance suite kills the process here
        effect(f"two-done {use_run().idempotency_key()}")
        conformance.effect("two")
        return {"items": ["two"]}

    return chain(("one", one), ("two", two))


def chatty(effect: Effect) -> CompiledStateGraph:
    """A node streaming a model's answer (with token usage), one writing custom values, one asking."""

    usage = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    model = GenericFakeChatModel(
        messages=iter([AIMessage("hello streaming world", id="msg-1")]),
    )

    async def reply(state: Order) -> Order:
        effect("reply")
        answer = await model.ainvoke("hi")
        counted = AIMessage(
            "counted",
            id="msg-2",
            usage_metadata=usage,
            response_metadata={"model_provider": "fake", "model_name": "fake-1"},
        )
        return {"items": [answer.text, counted]}

    def progress(state: Order) -> Order:
        effect("progress")
        get_stream_writer()({"pct": 50})
        return {"items": ["progressed"]}

    def ask(state: Order) -> Order:
        effect("ask")
        return {"items": [interrupt("go on?")]}

    return chain(("reply", reply), ("progress", progress), ("ask", ask))


AGENTS = {"approval": approval(file_effect), "crashable": crashable(file_effect)}
