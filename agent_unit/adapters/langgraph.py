"""The built-in LangGraph adapter: a compiled graph runs as a durable agent-unit agent.

LangGraph checkpoints its own work, node by node, so this adapter does not journal nodes:
it runs the graph with :class:`~.langgraph_checkpoint.AgentUnitSaver`, a checkpointer over
agent-unit's store (the user's graph is copied, never changed; one LangGraph thread is the
run's thread), and journals only what decides where the run is:

- ``langgraph:head``: the thread's latest checkpoint when the run began. While the latest
  checkpoint is still that one, the run has not started its graph work, so the input is
  streamed; past it, a re-execution (a resume, a recovery after a crash) continues from
  the latest checkpoint instead, and nodes that finished never run again.
- the answers to ``interrupt()``: each pending LangGraph interrupt pauses the run under the
  name of its node, journaled under LangGraph's interrupt id (not its occurrence: by the time
  a run is re-executed the graph may be past the earlier interrupts), and the answers resume
  the graph with ``Command(resume={id: answer})``.

Graphs run with ``durability="sync"``: each checkpoint is stored before the next superstep
starts, so a node that re-runs after a crash has the same task id, and
``use_run().idempotency_key()`` inside it is the same as in the run that was cut.

Events: each node's task is a ``STEP_STARTED``/``STEP_FINISHED`` pair, model tokens
(``stream_mode="messages"``) are ``TEXT_MESSAGE_*`` events, and values a node writes with
``get_stream_writer()`` are ``CUSTOM`` events named ``langgraph``. Token usage is read from the
AI messages' ``usage_metadata`` and journaled once a stream ends, so it is carried across
pauses; the usage of model calls cut by a crash is not counted.

Inside a node, pause with LangGraph's ``interrupt()`` and name side effects with
``use_run().idempotency_key()``. ``run.step`` inside a node is keyed within the node's task
(a resume skips finished nodes, so run-wide counts would shift). Two runs on one thread at
the same time would share its checkpoints, as two LangGraph invocations on one thread do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, cast

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.pregel import Pregel
from langgraph.types import Command, StreamMode
from pydantic_core import to_jsonable_python

from .._events import step_finished, step_started
from ..run import UNTYPED, Run
from .api import AdapterContext, define_adapter
from .langgraph_checkpoint import AgentUnitSaver

__all__ = ["adapter"]

_MODES: list[StreamMode] = ["tasks", "messages", "custom"]


def _describe(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {}
    if graph.name and graph.name != "LangGraph":  # LangGraph's default name says nothing
        described["description"] = graph.name
    with contextlib.suppress(Exception):  # a state type pydantic cannot describe: the input is shown as any
        described["input_schema"] = graph.get_input_jsonschema()
    return described


def _current_task() -> str | None:
    """The node task running now, as ``langgraph:{node}:{task id}``; ``None`` outside a node.

    A task's id derives from the checkpoint it starts from, so it is the same when the task
    re-runs after a crash or a pause.
    """
    try:
        namespace = get_config().get("configurable", {}).get("checkpoint_ns")
    except RuntimeError:  # not inside a runnable
        return None
    return f"langgraph:{namespace}" if namespace else None


async def _ask(run: Run, name: str, key: str, payload: Any, schema: Any = None) -> Any:
    """Park under the node's ``name``, journaled under LangGraph's own interrupt id (``key``).

    An occurrence count would shift once the graph has moved past earlier interrupts.
    """
    schema = schema if isinstance(schema, dict) else None  # a JSON Schema, when interrupt() was given one
    return await run.interrupt(name, payload, key=key, schema=schema)


def _text(message: BaseMessage) -> str:
    text = message.text  # a method before langchain-core 1.0, a property (a str) since
    return str(text if isinstance(text, str) else text())


def _counts(usage: Mapping[str, Any]) -> dict[str, int]:
    """LangChain's ``usage_metadata`` as AG-UI token counts (the same mapping as ag-ui's LangGraph integration)."""
    inputs = usage.get("input_token_details") or {}
    outputs = usage.get("output_token_details") or {}
    counts = {
        "inputTokens": usage.get("input_tokens"),
        "outputTokens": usage.get("output_tokens"),
        "totalTokens": usage.get("total_tokens"),
        "reasoningTokens": outputs.get("reasoning"),
        "cachedInputTokens": inputs.get("cache_read"),
        "cacheWriteInputTokens": inputs.get("cache_creation"),
    }
    return {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


class _Stream:
    """One ``astream`` of the graph, as AG-UI events; collects the token usage of its model calls."""

    def __init__(self, ctx: AdapterContext) -> None:
        self.ctx = ctx
        self.open: dict[str, str] = {}  # text message id -> the task ("node:task id") streaming it
        self.ended: set[str] = set()
        self.usage: dict[str, dict[str, Any]] = {}  # message id -> its usage entry

    async def run(self, graph: Pregel[Any, Any, Any, Any], command: Any, config: RunnableConfig) -> None:
        try:
            async for mode, data in graph.astream(command, config, stream_mode=_MODES, durability="sync"):
                if mode == "tasks":
                    self._task(cast(Mapping[str, Any], data))  # a mode's data is typed for all modes at once
                elif mode == "messages":
                    self._message(*data)
                elif mode == "custom":
                    value = to_jsonable_python(data, fallback=repr)
                    self.ctx.stream({"type": "CUSTOM", "name": "langgraph", "value": value})
        finally:
            for message_id in list(self.open):
                self._end(message_id)

    def _task(self, task: Mapping[str, Any]) -> None:
        name = task["name"]
        if "input" in task:  # a task starts; its result comes in a second event
            self.ctx.stream(step_started(name))
            return
        for message_id, owner in list(self.open.items()):
            if owner == f"{name}:{task['id']}":
                self._end(message_id)
        self.ctx.stream(step_finished(name))

    def _message(self, message: BaseMessage, metadata: Mapping[str, Any]) -> None:
        if not isinstance(message, AIMessage) or message.id is None or message.id in self.ended:
            return
        message_id = message.id
        self._count(message, metadata)
        text = _text(message)
        if text:
            if message_id not in self.open:
                self.open[message_id] = str(metadata.get("langgraph_checkpoint_ns", "")).split("|")[0]
                self.ctx.stream({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})
            self.ctx.stream({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text})
        if not isinstance(message, AIMessageChunk) or message.chunk_position == "last":
            self._end(message_id)

    def _end(self, message_id: str) -> None:
        self.ended.add(message_id)
        if self.open.pop(message_id, None) is not None:
            self.ctx.stream({"type": "TEXT_MESSAGE_END", "messageId": message_id})

    def _count(self, message: AIMessage, metadata: Mapping[str, Any]) -> None:
        """Add the message's token counts; a streamed message may spread them (and its labels) over chunks."""
        entry = self.usage.setdefault(message.id or "", {"provider": None, "model": None})
        labels = message.response_metadata or {}
        entry["provider"] = entry["provider"] or labels.get("model_provider") or metadata.get("ls_provider")
        entry["model"] = (
            entry["model"] or labels.get("model_name") or labels.get("model") or metadata.get("ls_model_name")
        )
        for count, value in _counts(message.usage_metadata or {}).items():
            entry[count] = entry.get(count, 0) + value

    async def journal_usage(self, run: Run, journaled: set[str]) -> None:
        """Each model call's usage as a journal entry, so the run's total survives a pause."""
        for message_id, entry in self.usage.items():
            spent = {k: v for k, v in entry.items() if v is not None}
            key = f"usage:langgraph:{message_id}"
            if key in journaled or spent.keys() <= {"provider", "model"}:  # journaled already, or no counts
                continue
            journaled.add(key)

            async def read(spent: dict[str, Any] = spent) -> dict[str, Any]:
                return spent

            await run.journaled(key, "usage", read, (), UNTYPED, what="token usage", usage=lambda spent: spent)


async def _run(graph: Pregel[Any, Any, Any, Any], ctx: AdapterContext) -> Any:
    run = ctx.run
    own = graph.checkpointer
    saver = AgentUnitSaver(ctx.kv, run.thread_id, serde=own.serde if isinstance(own, BaseCheckpointSaver) else None)
    runnable = graph.copy(update={"checkpointer": saver})
    if hasattr(graph, "_serde_allowlist"):  # copy() drops it, and strict msgpack decoding needs it
        runnable._serde_allowlist = graph._serde_allowlist
    config: RunnableConfig = {"configurable": {"thread_id": run.thread_id}}
    ctx.set_work_key(_current_task)
    head = await ctx.durable.value("langgraph:head", saver.latest_id)
    journaled: set[str] = set()
    streamed = False
    while True:
        state = await runnable.aget_state(config)
        latest = state.config["configurable"].get("checkpoint_id")
        pending = [(task.name, interrupt) for task in state.tasks for interrupt in task.interrupts]
        if latest == head and not streamed:  # this run's graph work has not started
            command: Any = ctx.input
        elif pending:
            answers = {}
            for name, interrupt in pending:
                schema = getattr(interrupt, "response_schema", None)
                answers[interrupt.id] = await _ask(run, name, interrupt.id, interrupt.value, schema)
            command = Command(resume=answers)
        elif state.next:
            if streamed:  # the graph stopped itself with work left: a static breakpoint (interrupt_before/after)
                await _ask(run, state.next[0], str(latest), {"next": list(state.next)})
            command = None  # continue from the latest checkpoint (after a breakpoint, or a crash mid-superstep)
        else:
            return to_jsonable_python(state.values, fallback=repr)
        # Only new work runs from here (finished nodes never re-run). Answers to interrupts the
        # graph is already past are never read again, so they must not keep the run "replaying",
        # which would silence run.emit() in the nodes.
        run.end_replay()
        stream = _Stream(ctx)
        await stream.run(runnable, command, config)
        await stream.journal_usage(run, journaled)
        streamed = True


adapter = define_adapter(
    name="langgraph",
    match=lambda value: isinstance(value, Pregel),
    describe=_describe,
    run=_run,
)
