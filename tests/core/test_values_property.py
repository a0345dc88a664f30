"""Property: whatever value a step returns, a run starts with or a resume answers, it is either
refused cleanly (nothing changed) or stored and replayed identically after a restart. Never a
run stuck in ``running``, never a step run twice.

The seed is fixed; ``AGENT_UNIT_HYPOTHESIS_EXAMPLES=2000`` runs a longer search.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_unit import InvalidAnswer, InvalidInput, Run, RunStatus, define_agent
from agent_unit._jsontext import MAX_DEPTH
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import TestUnit, create_test_unit

EXAMPLES = int(os.environ.get("AGENT_UNIT_HYPOTHESIS_EXAMPLES", "40"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # a fixed seed: the suite's result never depends on luck
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text of any code point, lone surrogates included (hypothesis leaves them out by default).
text = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**4295, max_value=10**4305)  # around the 4,300 digits JSON readers take
    | st.floats()  # NaN and Infinity included
    | text
)
trees = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3))


def nest(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


deep = st.builds(nest, st.integers(min_value=MAX_DEPTH - 3, max_value=210), trees)
values = trees | deep


def storable(value: Any, depth: int = 0) -> bool:
    """The rule, written out independently: what every store keeps and every reader reads back.

    ``depth`` counts the arrays and objects around ``value``; one of its own is one more.
    """
    if isinstance(value, list | dict) and depth + 1 > MAX_DEPTH:
        return False
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return abs(value) < 10**4300
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return not any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, list):
        return all(storable(item, depth + 1) for item in value)
    return all(storable(key) and storable(item, depth + 1) for key, item in value.items())


def same_json(value: Any) -> Any:
    """``value`` after a JSON round trip (only for values that are storable)."""
    return json.loads(json.dumps(value))


class Stores:
    """One store per example, and a new engine over it for each "process" (a restart)."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.path = folder / "agent-unit.db"
        self.memory = MemoryStore()

    def unit(self, agents: dict[str, Any]) -> TestUnit:
        store = self.memory if self.kind == "memory" else SQLiteStore(self.path)
        return create_test_unit(agents, store)

    async def close(self, unit: TestUnit) -> None:
        await unit.close()
        if self.kind == "sqlite":
            await unit.store.close()


def run_example(kind: str, check: Callable[[Stores], Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(check(Stores(kind, Path(folder))))


kinds = st.sampled_from(["memory", "sqlite"])


@PROPERTY
@given(value=values, kind=kinds)
def test_a_step_result_is_refused_once_or_replayed_identically_after_a_restart(value: Any, kind: str) -> None:
    calls: list[int] = []
    seen: list[Any] = []

    def produce():  # type: ignore[no-untyped-def] # unannotated: the value is journaled as returned
        calls.append(1)
        return value

    @define_agent
    async def agent(input: None, run: Run) -> str:
        seen.append(await run.step("produce", produce))
        await run.interrupt("wait")
        return "done"

    async def check(stores: Stores) -> None:
        first = stores.unit({"a": agent})
        record = await first.run("a")
        await stores.close(first)
        second = stores.unit({"a": agent})  # a restart: a new engine over the same store
        if storable(value):
            assert record.status == RunStatus.interrupted, record.error
            record = await second.resume(record.id)
            assert record.status == RunStatus.completed
            assert seen[0] == seen[1] == same_json(value)  # the same value, ran or replayed
        else:
            assert record.status == RunStatus.failed and record.error is not None
            assert record.error.type == "StepResultError" and record.error.step == "produce"
            await second.advance("1h")  # a sweep: nothing to recover
            assert (await second.get(record.id)).status == RunStatus.failed
        assert calls == [1]
        await stores.close(second)

    run_example(kind, check)


@PROPERTY
@given(value=values, kind=kinds)
def test_an_input_is_refused_with_no_run_created_or_read_back_identically(value: Any, kind: str) -> None:
    @define_agent
    async def agent(input: Any, run: Run) -> str:
        await run.interrupt("wait")
        return "done"

    async def check(stores: Stores) -> None:
        first = stores.unit({"a": agent})
        try:
            record = await first.run("a", value)
        except InvalidInput as exc:
            assert not storable(value), exc.message
            assert (await first.engine.list()).runs == []
            await stores.close(first)
            return
        assert storable(value)
        await stores.close(first)
        second = stores.unit({"a": agent})
        assert (await second.get(record.id)).input == same_json(value)
        assert (await second.resume(record.id)).status == RunStatus.completed
        await stores.close(second)

    run_example(kind, check)


@PROPERTY
@given(value=values, kind=kinds, typed=st.booleans())
def test_an_answer_is_refused_with_the_run_parked_or_replayed_identically_after_a_restart(
    value: Any, kind: str, typed: bool
) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> Any:
        answer = await (run.interrupt("ask", answer=Any) if typed else run.interrupt("ask"))
        await run.interrupt("again")
        return answer

    async def check(stores: Stores) -> None:
        first = stores.unit({"a": agent})
        parked = await first.run("a")
        try:
            record = await first.resume(parked.id, value)
        except InvalidAnswer as exc:
            assert not storable(value), exc.message
            record = await first.get(parked.id)
            assert record.status == RunStatus.interrupted and record.interrupt is not None
            assert record.interrupt.name == "ask"
            await stores.close(first)
            return
        assert storable(value)
        assert record.status == RunStatus.interrupted
        await stores.close(first)
        second = stores.unit({"a": agent})  # the answer is replayed from the journal here
        record = await second.resume(parked.id)
        assert record.status == RunStatus.completed, record.error
        assert record.output == same_json(value)
        await stores.close(second)

    run_example(kind, check)
