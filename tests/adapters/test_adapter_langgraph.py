"""The built-in LangGraph adapter: compiled graphs run durably, their checkpoints in agent-unit's store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter

from agent_unit import RunStatus
from agent_unit._records import record_usage
from agent_unit.run import RunState
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import TestUnit, create_test_unit

# LangGraph, its adapter and the fixture graphs are imported by the tests that use them, not here:
# importing LangGraph costs ~0.9 s of CPU, which every pytest worker would otherwise pay to collect
# this module.
if TYPE_CHECKING:
    from agent_unit.adapters.langgraph_checkpoint import AgentUnitSaver

ROOT = Path(__file__).resolve().parents[2]
OURS = {"RUN_INTERRUPTED", "RUN_SLEEPING", "RUN_CANCELLED"}


def restarted(path: Path, agents: dict[str, Any]) -> TestUnit:
    """A new engine over the SQLite file: what a restarted process sees."""
    return create_test_unit(agents, SQLiteStore(path), adapters=[])


async def close(unit: TestUnit) -> None:
    await unit.close()
    await unit.store.close()


def kinds(calls: list[str]) -> list[str]:
    return [call.split()[0] for call in calls]


# -- running ------------------------------------------------------------------------------


async def test_a_graph_streams_steps_text_and_custom_events_and_finishes() -> None:
    from ag_ui.core import Event

    from ..support import langgraph_fixtures as fixtures

    calls: list[str] = []
    unit = create_test_unit({"chat": fixtures.chatty(calls.append)}, adapters=[])
    agent = unit.engine.agents["chat"]
    assert agent.framework == "langgraph" and agent.input_schema["properties"]["items"]["type"] == "array"
    parked = await unit.run("chat", {"items": ["hi"]})
    assert parked.status == RunStatus.interrupted
    done = await unit.resume(parked.id, "yes")
    assert done.status == RunStatus.completed, done.error
    items = done.output["items"]
    assert items[:2] == ["hi", "hello streaming world"] and items[2]["content"] == "counted"
    assert items[3:] == ["progressed", "yes"]
    assert calls == ["reply", "progress", "ask", "ask"]

    events = await unit.events(done.id)
    types = [event["type"] for event in events]
    steps = [(event["type"], event["stepName"]) for event in events if event["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "reply"),
        ("STEP_FINISHED", "reply"),
        ("STEP_STARTED", "progress"),
        ("STEP_FINISHED", "progress"),
        ("STEP_STARTED", "ask"),
        ("STEP_FINISHED", "ask"),
        ("STEP_STARTED", "ask"),  # the paused node runs again with its answer
        ("STEP_FINISHED", "ask"),
    ]
    text = [event for event in events if event["type"].startswith("TEXT_MESSAGE")]
    shape = [(event["type"], event["messageId"]) for event in text]
    assert [kind for i, kind in enumerate(shape) if i == 0 or shape[i - 1] != kind] == [
        ("TEXT_MESSAGE_START", "msg-1"),
        ("TEXT_MESSAGE_CONTENT", "msg-1"),  # streamed token by token (deltas in one batch are merged)
        ("TEXT_MESSAGE_END", "msg-1"),
        ("TEXT_MESSAGE_START", "msg-2"),
        ("TEXT_MESSAGE_CONTENT", "msg-2"),  # returned whole by the node
        ("TEXT_MESSAGE_END", "msg-2"),
    ]
    deltas = "".join(event["delta"] for event in text if event["type"] == "TEXT_MESSAGE_CONTENT")
    assert deltas == "hello streaming worldcounted"
    assert types.index("TEXT_MESSAGE_END") < types.index("STEP_FINISHED")
    custom = [event for event in events if event["type"] == "CUSTOM"]
    assert custom == [{**custom[0], "name": "langgraph", "value": {"pct": 50}}]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED" and "RUN_INTERRUPTED" in types
    agui = TypeAdapter(Event)
    for event in events:
        event.pop("seq")
        if event["type"] not in OURS:
            agui.validate_python(event)

    # the usage of the model call before the pause is journaled, so the total carries across it
    usage = [{"provider": "fake", "model": "fake-1", "inputTokens": 7, "outputTokens": 3, "totalTokens": 10}]
    assert done.usage == record_usage(usage) and events[-1]["usage"] == usage


def test_a_graph_is_described_by_its_input_schema_and_its_name() -> None:
    from agent_unit.adapters.langgraph import adapter as langgraph_adapter

    from ..support import langgraph_fixtures as fixtures

    graph = fixtures.approval([].append)
    described = dict(langgraph_adapter.describe(graph))  # type: ignore[misc]
    assert "description" not in described  # LangGraph's default name says nothing
    assert described["input_schema"]["title"] == "Order"
    named = graph.copy(update={"name": "Refunds"})
    assert langgraph_adapter.describe(named)["description"] == "Refunds"  # type: ignore[misc]
    assert langgraph_adapter.match(graph) and not langgraph_adapter.match(graph.builder)


# -- pauses -------------------------------------------------------------------------------


async def test_interrupt_pauses_under_the_node_name_and_resumes_after_a_restart(tmp_path: Path) -> None:
    from ..support import langgraph_fixtures as fixtures

    path = tmp_path / "runs.db"
    calls: list[str] = []
    first = restarted(path, {"approval": fixtures.approval(calls.append)})
    parked = await first.run("approval", {"items": ["o_1"]})
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.name == "approve"
    assert parked.interrupt.payload == {"items": ["o_1", "prepared"]}
    assert kinds(calls) == ["prepare", "approve"]
    await close(first)

    second = restarted(path, {"approval": fixtures.approval(calls.append)})
    done = await second.resume(parked.id, {"approved": True})
    assert done.status == RunStatus.completed, done.error
    assert done.output == {"items": ["o_1", "prepared", "answer {'approved': True}", "charged"]}
    assert kinds(calls) == ["prepare", "approve", "approve", "charge"]  # prepare did not run again
    await close(second)


async def test_run_step_inside_nodes_keeps_each_nodes_own_result_across_a_pause(tmp_path: Path) -> None:
    """Steps are keyed within their node's task: a resume that skips a finished node shifts nothing."""
    from langgraph.types import interrupt

    from agent_unit import use_run

    from ..support import langgraph_fixtures as fixtures

    async def a(state: fixtures.Order) -> fixtures.Order:
        return {"items": [await use_run().step("load", lambda: "from a")]}

    def ask(state: fixtures.Order) -> fixtures.Order:
        return {"items": [interrupt("go?")]}

    async def b(state: fixtures.Order) -> fixtures.Order:
        return {"items": [await use_run().step("load", lambda: "from b")]}

    graph = fixtures.chain(("a", a), ("ask", ask), ("b", b))
    path = tmp_path / "runs.db"
    first = restarted(path, {"steps": graph})
    parked = await first.run("steps", {"items": []})
    await close(first)
    second = restarted(path, {"steps": graph})
    done = await second.resume(parked.id, "go")
    await close(second)
    assert done.output == {"items": ["from a", "go", "from b"]}


async def test_two_interrupts_in_one_node_each_get_their_own_answer(tmp_path: Path) -> None:
    from ..support import langgraph_fixtures as fixtures

    path = tmp_path / "runs.db"
    calls: list[str] = []
    unit = restarted(path, {"ask": fixtures.two_questions(calls.append)})
    record = await unit.run("ask", {"items": []})
    payloads = []
    for answer in ("one", "two"):
        assert record.status == RunStatus.interrupted and record.interrupt is not None
        assert record.interrupt.name == "ask"
        payloads.append(record.interrupt.payload)
        await close(unit)
        unit = restarted(path, {"ask": fixtures.two_questions(calls.append)})
        record = await unit.resume(record.id, answer)
    await close(unit)
    assert payloads == ["first?", "second?"]
    assert record.status == RunStatus.completed and record.output == {"items": ["one", "two", "done"]}
    assert calls == ["ask", "ask", "ask", "finish"]
    unit = restarted(path, {})
    custom = [event for event in await unit.events(record.id) if event["type"] == "CUSTOM"]
    await close(unit)
    assert [(event["name"], event["value"]) for event in custom] == [("finished", ["one", "two"])]  # run.emit in a node


async def test_a_subgraph_and_parallel_nodes_each_pause_under_their_own_name() -> None:
    from ..support import langgraph_fixtures as fixtures

    calls: list[str] = []
    unit = create_test_unit({"p": fixtures.parallel_questions(calls.append)}, adapters=[])
    record = await unit.run("p", {"items": []})
    asked = []
    while record.status == RunStatus.interrupted:
        assert record.interrupt is not None
        asked.append((record.interrupt.name, record.interrupt.payload))
        record = await unit.resume(record.id, len(asked))
    assert asked == [("outer", "inner?"), ("left", "left?"), ("right", "right?")]
    assert record.status == RunStatus.completed and record.output == {
        "items": ["inner 1", "left 2", "right 3", "joined"]
    }
    # left is asked, then right, before either runs again: each side node runs twice, not three times
    assert calls == ["inner", "inner", "left", "right", "left", "right", "join"]


async def test_a_node_that_loops_asks_again_each_time(tmp_path: Path) -> None:
    from ..support import langgraph_fixtures as fixtures

    path = tmp_path / "runs.db"
    calls: list[str] = []
    unit = restarted(path, {"loop": fixtures.asking_loop(calls.append, rounds=3)})
    record = await unit.run("loop", {"items": []})
    keys = []
    for answer in ("a", "b", "c"):
        assert record.status == RunStatus.interrupted and record.interrupt is not None
        assert record.interrupt.name == "ask" and record.interrupt.payload == {"round": len(keys)}
        keys.append(record.interrupt.key)
        await close(unit)
        unit = restarted(path, {"loop": fixtures.asking_loop(calls.append, rounds=3)})
        record = await unit.resume(record.id, answer)
    await close(unit)
    assert record.status == RunStatus.completed and record.output == {"items": ["a", "b", "c"]}
    assert len(set(keys)) == 3 and calls == ["ask"] * 6


async def test_a_static_breakpoint_pauses_under_the_next_node() -> None:
    from ..support import langgraph_fixtures as fixtures

    calls: list[str] = []
    graph = fixtures.crashable(calls.append)
    paused = graph.copy(update={"interrupt_before_nodes": ["two"]})
    unit = create_test_unit({"bp": paused}, adapters=[])
    record = await unit.run("bp", {"items": []})
    assert record.status == RunStatus.interrupted and record.interrupt is not None
    assert record.interrupt.name == "two" and record.interrupt.payload == {"next": ["two"]}
    assert kinds(calls) == ["one"]
    done = await unit.resume(record.id, None)
    assert done.status == RunStatus.completed and done.output == {"items": ["one", "two"]}
    assert kinds(calls) == ["one", "two-start", "two-done"]


# -- over HTTP and across a crash -----------------------------------------------------------


# -- state --------------------------------------------------------------------------------


async def test_a_graph_compiled_with_its_own_checkpointer_still_uses_the_store(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from ..support import langgraph_fixtures as fixtures

    path = tmp_path / "runs.db"
    calls: list[str] = []
    own = InMemorySaver()
    graph = fixtures.approval(calls.append, checkpointer=own)
    first = restarted(path, {"approval": graph})
    parked = await first.run("approval", {"items": []})
    assert parked.status == RunStatus.interrupted
    await close(first)
    assert graph.checkpointer is own and not own.storage  # the user's graph and saver are untouched

    # a new process: a fresh in-memory saver knows nothing, the store knows the checkpoints
    second = restarted(path, {"approval": fixtures.approval(calls.append, checkpointer=InMemorySaver())})
    done = await second.resume(parked.id, "ok")
    await close(second)
    assert done.status == RunStatus.completed and done.output == {"items": ["prepared", "answer ok", "charged"]}
    assert kinds(calls) == ["prepare", "approve", "approve", "charge"]


async def test_a_second_run_on_the_thread_continues_its_state() -> None:
    from ..support import langgraph_fixtures as fixtures

    calls: list[str] = []
    unit = create_test_unit({"crash": fixtures.crashable(calls.append)}, adapters=[])
    first = await unit.run("crash", {"items": ["a"]})
    second = await unit.run("crash", {"items": ["b"]}, thread_id=first.thread_id)
    assert first.output == {"items": ["a", "one", "two"]}
    assert second.output == {"items": ["a", "one", "two", "b", "one", "two"]}
    other = await unit.run("crash", {"items": ["c"]})  # another thread starts empty
    assert other.output == {"items": ["c", "one", "two"]}
    keys = [line.split()[1] for line in calls if not line.startswith("two-done")]  # one line per execution
    assert len(set(keys)) == len(keys) == 6  # every node execution of every run has its own key


# -- the adapter check --------------------------------------------------------------------


# -- the checkpointer ------------------------------------------------------------------------


def saver_over(store: MemoryStore, thread_id: str = "t1") -> AgentUnitSaver:
    from agent_unit.adapters.langgraph_checkpoint import AgentUnitSaver

    async def claimed() -> None:  # an execution with no claim left to write
        return None

    execution = SimpleNamespace(store=store, claim=claimed)
    run = SimpleNamespace(thread_id=thread_id, agent="a", _execution=execution, signal=asyncio.Event())
    return AgentUnitSaver(RunState(run), thread_id)  # type: ignore[arg-type]


def checkpoint(value: int) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    made = empty_checkpoint()
    made["channel_values"] = {"n": value}
    made["channel_versions"] = {"n": value}
    return made


async def test_the_saver_puts_gets_lists_and_deletes() -> None:
    from langgraph.checkpoint.base import ERROR, INTERRUPT

    store = MemoryStore()
    saver = saver_over(store)
    root = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    assert await saver.aget_tuple(root) is None and await saver.latest_id() is None

    configs = []
    config: Any = root
    for step in range(3):
        config = await saver.aput(config, checkpoint(step), {"source": "loop", "step": step}, {"n": step})
        configs.append(config)
        await asyncio.sleep(0.001)  # checkpoint ids are time-ordered
    ids = [c["configurable"]["checkpoint_id"] for c in configs]
    assert await saver.latest_id() == ids[-1]

    latest = await saver.aget_tuple(root)
    assert latest is not None and latest.checkpoint["channel_values"] == {"n": 2}
    assert latest.config == configs[-1] and latest.parent_config == configs[1]
    assert latest.metadata == {"source": "loop", "step": 2}
    first = await saver.aget_tuple(configs[0])
    assert first is not None and first.parent_config is None and first.checkpoint["id"] == ids[0]

    listed = [t.config["configurable"]["checkpoint_id"] async for t in saver.alist(root)]
    assert listed == ids[::-1]
    assert [t.checkpoint["id"] async for t in saver.alist(root, limit=2)] == ids[:0:-1]
    assert [t.checkpoint["id"] async for t in saver.alist(root, before=configs[2])] == ids[1::-1]
    assert [t.checkpoint["id"] async for t in saver.alist(root, filter={"step": 1})] == [ids[1]]
    assert [t.checkpoint["id"] async for t in saver.alist(None)] == ids[::-1]
    assert [t.checkpoint["id"] async for t in saver.alist(configs[1])] == [ids[1]]

    # a subgraph's namespace has its own head
    sub = {"configurable": {"thread_id": "t1", "checkpoint_ns": "node:1"}}
    sub_config = await saver.aput(sub, checkpoint(9), {"step": 0}, {"n": 9})
    assert (await saver.aget_tuple(root)).checkpoint["id"] == ids[-1]  # type: ignore[union-attr]
    assert (await saver.aget_tuple(sub)).config == sub_config  # type: ignore[union-attr]
    assert len([t async for t in saver.alist(None)]) == 4

    # regular writes are kept once; special ones (errors, interrupts) are replaced
    at = configs[-1]
    await saver.aput_writes(at, [("n", 1), ("m", "x")], "task-b", "~b")
    await saver.aput_writes(at, [("n", 2)], "task-b", "~b")
    await saver.aput_writes(at, [(ERROR, "first"), (INTERRUPT, "ask")], "task-a", "~a")
    await saver.aput_writes(at, [(ERROR, "second")], "task-a", "~a")
    await asyncio.gather(*(saver.aput_writes(at, [("n", i)], f"task-c{i}", "~c") for i in range(5)))
    pending = (await saver.aget_tuple(root)).pending_writes  # type: ignore[union-attr]
    assert pending == [
        ("task-a", INTERRUPT, "ask"),  # special writes sort first: their index is negative
        ("task-a", ERROR, "second"),
        ("task-b", "n", 1),
        ("task-b", "m", "x"),
        *[(f"task-c{i}", "n", i) for i in range(5)],
    ]

    with pytest.raises(ValueError, match="stores the run's thread 't1', not 'other'"):
        await saver.aget_tuple({"configurable": {"thread_id": "other"}})
    with pytest.raises(NotImplementedError, match="async only"):
        saver.get_tuple(root)  # type: ignore[arg-type]

    other = saver_over(store, "t2")
    await other.aput({"configurable": {"thread_id": "t2", "checkpoint_ns": ""}}, checkpoint(5), {}, {"n": 5})
    await saver.adelete_thread("t1")
    assert await saver.aget_tuple(root) is None and [t async for t in saver.alist(None)] == []
    assert all(scope == "thread:t2" for scope, _ in store._state)  # nothing of t1 is left; t2 is untouched
    assert await other.latest_id() is not None
