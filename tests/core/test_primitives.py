"""The run primitives: each guarantee with a test that fails without it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from agent_unit import (
    InvalidAnswer,
    Run,
    RunStatus,
    StepContext,
    StepResultError,
    define_agent,
    use_run,
)
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit


class Order(BaseModel):
    id: str
    placed: datetime


class Approval(BaseModel):
    approved: bool


class PaymentDeclined(Exception):
    pass


class Effects:
    """Counts side effects in a file, so a count survives a restart of the engine."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, name: str) -> str:
        with self.path.open("a") as f:
            f.write(name + "\n")
        return name

    def count(self, name: str) -> int:
        return self.path.read_text().splitlines().count(name) if self.path.exists() else 0


@pytest.fixture
def effects(tmp_path: Path) -> Effects:
    return Effects(tmp_path / "effects.txt")


async def test_pause_restart_resume_runs_each_effect_once(sqlite_path: Path, effects: Effects) -> None:
    @define_agent
    async def agent(input: dict[str, str], run: Run) -> str:
        await run.step("load", lambda: effects("load"))
        decision = await run.interrupt("approve", {"order": input["order"]}, answer=Approval)
        await run.step("charge", lambda: effects("charge"))
        return "refunded" if decision.approved else "declined"

    first = create_test_unit({"refund": agent}, SQLiteStore(sqlite_path))
    parked = await first.run("refund", {"order": "o_1"})
    assert parked.status == RunStatus.interrupted and parked.interrupt is not None
    assert parked.interrupt.payload == {"order": "o_1"}
    await first.close()
    await first.store.close()

    second = create_test_unit({"refund": agent}, SQLiteStore(sqlite_path))  # a restart: new engine, same file
    done = await second.resume(parked.id, {"approved": True})
    assert done.status == RunStatus.completed and done.output == "refunded"
    assert effects.count("load") == 1 and effects.count("charge") == 1
    await second.close()
    await second.store.close()


async def test_step_results_are_identical_run_or_replayed() -> None:
    seen: list[Any] = []

    def load() -> Order:
        return Order(id="o_1", placed=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))

    async def load_async() -> Order:
        return load()

    @define_agent
    async def agent(input: None, run: Run) -> None:
        seen.append(await run.step("typed", load))
        seen.append(await run.step("typed-async", load_async))
        seen.append(await run.step("untyped", lambda: {"when": datetime(2026, 1, 2, tzinfo=UTC), "n": (1, 2)}))
        await run.interrupt("wait")

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    first = list(seen)
    seen.clear()
    await unit.resume(parked.id)
    assert seen == first
    assert isinstance(seen[0], Order) and isinstance(seen[1], Order)
    assert seen[2] == {"when": "2026-01-02T00:00:00Z", "n": [1, 2]}  # a JSON round trip on the first run too


async def test_failed_steps_are_journaled_and_reraised_on_replay(effects: Effects) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        def charge() -> None:
            effects("charge")
            raise PaymentDeclined("card declined")

        try:
            await run.step("charge", charge)
        except PaymentDeclined as exc:
            outcome = f"declined: {exc}"
        await run.interrupt("review")
        return outcome

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    done = await unit.resume(parked.id)
    assert done.output == "declined: card declined"
    assert effects.count("charge") == 1


async def test_unimportable_error_types_replay_as_step_failed() -> None:
    from agent_unit._codec import rebuild_error
    from agent_unit.errors import StepFailed

    error = rebuild_error({"type": "nowhere.Missing", "message": "gone", "step": "s"})
    assert isinstance(error, StepFailed) and "nowhere.Missing: gone" in str(error)
    assert isinstance(
        rebuild_error({"type": "builtins.KeyError", "message": "'k'", "args": ["k"], "step": "s"}), KeyError
    )


async def test_parallel_steps_get_deterministic_keys(effects: Effects) -> None:
    keys: list[list[str]] = []

    @define_agent
    async def agent(input: None, run: Run) -> list[int]:
        async def slow(i: int, ctx: StepContext) -> int:
            await asyncio.sleep(0.001 * (5 - i))  # finish in reverse order
            effects(f"fetch-{i}")
            return i

        results = await asyncio.gather(*(run.step("fetch", lambda ctx, i=i: slow(i, ctx)) for i in range(5)))
        keys.append([f"{i}" for i in results])
        await run.interrupt("wait")
        return results

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    done = await unit.resume(parked.id)
    assert done.output == [0, 1, 2, 3, 4]
    assert keys[0] == keys[1]
    assert all(effects.count(f"fetch-{i}") == 1 for i in range(5))


async def test_current_step_is_the_steps_context_in_and_out_of_a_thread() -> None:
    """The engine makes a step's StepContext only when something asks for it: what current_step()
    answers must still be the step's (its name, key, run and attempt), the same object on every ask,
    the very one a step taking a context gets, and None again once the step returns."""
    from agent_unit.run import current_step

    seen: list[Any] = []

    @define_agent
    async def agent(input: None, run: Run) -> None:
        async def lazy() -> str:
            first, again = current_step(), current_step()
            seen.append((first is again, first))
            return run.current_key() or ""

        def in_thread() -> str:
            seen.append((current_step() is current_step(), current_step()))
            return use_run().idempotency_key()

        async def given(step: StepContext) -> None:
            seen.append((current_step() is step, step))

        seen.append(await run.step("lazy", lazy))
        seen.append(await run.step("thread", in_thread))
        await run.step("given", given)
        seen.append(current_step())

    unit = create_test_unit({"a": agent})
    done = await unit.run("a")
    (same, lazy), key, (same_thread, thread), idempotency, (same_given, given), after = seen
    assert same and same_thread and same_given
    assert isinstance(lazy, StepContext) and (lazy.name, lazy.key, lazy.run_id) == ("lazy", "step:lazy#0", done.id)
    assert key == "step:lazy#0" and lazy.attempt == 1
    assert isinstance(thread, StepContext) and thread.key == "step:thread#0"
    assert idempotency == thread.idempotency_key
    assert given.key == "step:given#0"
    assert after is None


async def test_idempotency_keys_are_stable_and_unique() -> None:
    keys: list[tuple[str, str, str]] = []

    @define_agent
    async def agent(input: None, run: Run) -> None:
        a = await run.step("charge", lambda step: step.idempotency_key)
        b = await run.step("charge", lambda: use_run().idempotency_key())
        c = await run.step("refund", lambda step: step.idempotency_key)
        keys.append((a, b, c))
        await run.interrupt("wait")

    unit = create_test_unit({"a": agent})
    one = await unit.run("a")
    await unit.run("a")
    await unit.resume(one.id)
    run_one, run_two, replayed = keys
    assert len(set(run_one)) == 3  # different for every step
    assert not set(run_one) & set(run_two)  # and every run
    assert replayed == run_one  # stable across re-runs


async def test_idempotency_key_outside_a_step_is_a_clear_error() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        return run.idempotency_key()

    record = await create_test_unit({"a": agent}).run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert "outside a step" in record.error.message


async def test_except_exception_does_not_swallow_a_park() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            answer = await run.interrupt("approve", answer=Approval)
        except Exception:  # noqa: BLE001 - what users write
            return "swallowed"
        return "approved" if answer.approved else "declined"

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    assert parked.status == RunStatus.interrupted
    assert (await unit.resume(parked.id, {"approved": True})).output == "approved"


async def test_typed_answers_store_their_schema_and_refuse_bad_answers() -> None:
    @dataclass
    class Choice:
        option: int
        reason: str = ""

    @define_agent
    async def agent(input: None, run: Run) -> int:
        choice = await run.interrupt("pick", ["a", "b"], answer=Choice)
        assert isinstance(choice, Choice)
        return choice.option

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    assert parked.interrupt is not None and parked.interrupt.answer_schema is not None
    assert parked.interrupt.answer_schema["required"] == ["option"]
    for bad in ({"option": "first"}, {"reason": "no option"}, [1], None):
        with pytest.raises(InvalidAnswer):
            await unit.resume(parked.id, bad)
        still = await unit.get(parked.id)
        assert still.status == RunStatus.interrupted and still.version == parked.version
    assert (await unit.resume(parked.id, {"option": 1})).output == 1


async def test_sleep_by_string_timedelta_and_datetime() -> None:
    woke: list[str] = []

    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.sleep("2d")
        if not run.replaying:
            woke.append("string")
        await run.sleep(timedelta(hours=1))
        if not run.replaying:
            woke.append("timedelta")
        await run.sleep_until(datetime.fromtimestamp(run._execution.now(), UTC) + timedelta(minutes=5))
        if not run.replaying:
            woke.append("datetime")
        return "done"

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    assert record.status == RunStatus.sleeping and record.wake_at is not None
    await unit.advance("1d")
    assert (await unit.get(record.id)).status == RunStatus.sleeping and woke == []
    await unit.advance("1d")
    assert woke == ["string"]
    await unit.advance("1h")
    await unit.advance("6m")
    done = await unit.get(record.id)
    assert done.status == RunStatus.completed and woke == ["string", "timedelta", "datetime"]


async def test_bad_sleep_duration_fails_the_run_clearly() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.sleep("2 fortnights")

    record = await create_test_unit({"a": agent}).run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert "invalid duration '2 fortnights'" in record.error.message


async def test_step_result_over_max_step_bytes_is_a_clear_error_not_a_retry(effects: Effects) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.step("download", lambda: effects("download") * 100_000)

    unit = create_test_unit({"a": agent}, max_step_bytes=256 * 1024)
    record = await unit.run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert "step 'download'" in record.error.message and "max_step_bytes" in record.error.message
    assert effects.count("download") == 1


async def test_non_json_step_result_names_the_step() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.step("open-socket", lambda: object())

    record = await create_test_unit({"a": agent}).run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "StepResultError"
    assert "step 'open-socket'" in record.error.message and "JSON" in record.error.message


async def test_step_result_error_is_raised_to_agent_code() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            await run.step("bad", lambda: object())
        except StepResultError as exc:
            return exc.message
        return "no error"

    record = await create_test_unit({"a": agent}).run("a")
    assert "step 'bad'" in record.output


async def test_state_scopes() -> None:
    @define_agent
    async def writer(input: str, run: Run) -> None:
        await run.state.set("who", input)
        await run.state.set("who", input, scope="agent")
        await run.state.set("who", input, scope="app")

    @define_agent
    async def reader(input: None, run: Run) -> dict[str, Any]:
        return {scope: await run.state.get("who", scope=scope) for scope in ("thread", "agent", "app")}

    @define_agent
    async def reader_twin(input: None, run: Run) -> dict[str, Any]:
        await run.state.delete("who", scope="app")
        return {scope: await run.state.get("who", "none", scope=scope) for scope in ("thread", "agent", "app")}

    unit = create_test_unit({"writer": writer, "reader": reader, "twin": reader_twin})
    await unit.run("writer", "ann", thread_id="t1")
    assert (await unit.run("reader", None, thread_id="t1")).output == {"thread": "ann", "agent": None, "app": "ann"}
    assert (await unit.run("reader", None, thread_id="t2")).output == {"thread": None, "agent": None, "app": "ann"}
    assert (await unit.run("twin", None, thread_id="t2")).output == {"thread": "none", "agent": "none", "app": "none"}


async def test_unknown_state_scope() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.state.get("k", scope="user")

    record = await create_test_unit({"a": agent}).run("a")
    assert record.error is not None and "unknown state scope 'user'" in record.error.message


async def test_secrets_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_unit import Host, use_host

    monkeypatch.setenv("PAYMENTS_KEY", "sk_test")

    @define_agent
    async def agent(input: None, run: Run) -> list[str | None]:
        return [run.secrets.get("PAYMENTS_KEY"), run.secrets.get("MISSING"), run.secrets.get("BOUND")]

    unit = create_test_unit({"a": agent})
    assert (await unit.run("a")).output == ["sk_test", None, None]
    with use_host(Host(bindings={"BOUND": "from-binding"})):
        assert (await unit.run("a")).output == ["sk_test", None, "from-binding"]


async def test_use_run_outside_a_run() -> None:
    with pytest.raises(RuntimeError, match="outside a run"):
        use_run()


async def test_use_run_inside_helpers_and_identity() -> None:
    async def helper() -> dict[str, Any]:
        run = use_run()
        return {"id": run.id, "thread": run.thread_id, "agent": run.agent, "attempt": run.attempt}

    @define_agent
    async def agent(input: None, run: Run) -> dict[str, Any]:
        return await helper()

    record = await create_test_unit({"a": agent}).run("a", thread_id="t9")
    assert record.output == {"id": record.id, "thread": "t9", "agent": "a", "attempt": 1}


async def test_emit_and_replay_emits_nothing_for_replayed_work() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("one", lambda: 1)
        await run.emit("progress", {"done": 1})
        await run.interrupt("wait")
        await run.step("two", lambda: 2)
        await run.emit("progress", {"done": 2})
        return "ok"

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    await unit.resume(parked.id)
    events = await unit.events(parked.id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    summary = [(e["type"], e.get("stepName") or e.get("value")) for e in events]
    assert summary == [
        ("RUN_STARTED", None),
        ("STEP_STARTED", "one"),
        ("STEP_FINISHED", "one"),
        ("CUSTOM", {"done": 1}),
        ("RUN_INTERRUPTED", None),
        ("RUN_STARTED", None),
        ("STEP_STARTED", "two"),
        ("STEP_FINISHED", "two"),
        ("CUSTOM", {"done": 2}),
        ("RUN_FINISHED", None),
    ]


async def test_signal_is_set_when_the_run_is_cancelled() -> None:
    started = asyncio.Event()
    observed: list[bool] = []

    @define_agent
    async def agent(input: None, run: Run) -> None:
        async def long_work() -> None:
            started.set()
            try:
                await run.signal.wait()
            finally:
                observed.append(run.signal.is_set())

        await run.step("long", long_work)

    unit = create_test_unit({"a": agent})
    record = await unit.engine.start("a", None)
    await started.wait()
    await unit.cancel(record.id)
    await unit.engine.wait(record.id)
    assert observed == [True]


async def test_a_parked_run_holds_no_task_timer_or_memory() -> None:
    refs: list[weakref.ref[Run]] = []

    @define_agent
    async def agent(input: None, run: Run) -> None:
        refs.append(weakref.ref(run))
        await run.step("s", lambda: 1)
        await run.interrupt("wait")

    @define_agent
    async def sleeper(input: None, run: Run) -> None:
        refs.append(weakref.ref(run))
        await run.sleep("3d")

    from agent_unit import RunEngine
    from agent_unit.stores.memory import MemoryStore

    engine = RunEngine({"a": agent, "s": sleeper}, MemoryStore())  # real clock: timers would be armed
    await engine.start("a", None, wait=True)
    await engine.start("s", None, wait=True)
    assert engine.executing() == {} and engine._timers == {} and engine._background == set()
    # What is left unwinds on its own, within moments: cancelled lease renewals over a few turns
    # of the loop, and a sync step's worker thread, which drops its context (holding the run)
    # after it hands the result back. A run the engine kept would never go.
    for _ in range(200):
        await asyncio.sleep(0.01)
        gc.collect()
        if all(ref() is None for ref in refs):
            break
    alive = [run for ref in refs if (run := ref()) is not None]
    holders = [type(holder).__name__ for run in alive for holder in gc.get_referrers(run) if holder is not alive]
    assert not alive, f"parked runs still referenced by: {holders}"
    await engine.aclose()


async def test_a_park_beside_running_steps_journals_them_first(effects: Effects) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        async def charge() -> str:
            await asyncio.sleep(0.05)
            return effects("charge")

        await asyncio.gather(run.step("charge", charge), run.interrupt("approve"))
        return "done"

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    assert parked.status == RunStatus.interrupted
    assert (await unit.resume(parked.id)).output == "done"
    assert effects.count("charge") == 1


async def test_sync_steps_run_in_a_thread_and_do_not_block_the_loop() -> None:
    import threading
    import time

    ticks: list[float] = []

    @define_agent
    async def agent(input: None, run: Run) -> str:
        async def ticker() -> None:
            for _ in range(5):
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        def blocking() -> str:
            time.sleep(0.1)  # a blocking SDK call
            return threading.current_thread().name

        tick = asyncio.ensure_future(ticker())
        thread = await run.step("blocking", blocking)
        await tick
        return thread

    record = await create_test_unit({"a": agent}).run("a")
    assert record.output != "MainThread"
    assert len(ticks) == 5 and ticks[-1] - ticks[0] < 0.09  # the loop kept running during the step


async def test_a_bare_park_fails_the_run_instead_of_looping() -> None:
    from agent_unit import Park

    @define_agent
    async def agent(input: None, run: Run) -> None:
        raise Park()

    record = await create_test_unit({"a": agent}).run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert "only agent-unit may raise" in record.error.message


class Refund(BaseModel):
    amount: int

    @field_validator("amount")
    @classmethod
    def positive(cls, amount: int) -> int:
        if amount <= 0:
            raise ValueError("amount must be positive")
        return amount


async def test_answers_are_validated_by_their_class_where_it_can_be_imported() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> int:
        answer = await run.interrupt("amount", answer=Refund)
        return answer.amount

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    assert parked.interrupt is not None and parked.interrupt.answer_type == f"{__name__}:Refund"
    with pytest.raises(InvalidAnswer, match="amount must be positive"):  # a rule no JSON Schema states
        await unit.resume(parked.id, {"amount": -5})
    assert (await unit.get(parked.id)).status == RunStatus.interrupted
    assert (await unit.resume(parked.id, {"amount": 5})).output == 5


async def test_replayed_errors_keep_their_type_and_arguments() -> None:
    from agent_unit._codec import encode_error, rebuild_error

    for error in (KeyError("order"), PaymentDeclined("card", 402), ValueError()):
        rebuilt = rebuild_error(encode_error(error, "s"))
        assert type(rebuilt) is type(error) and rebuilt.args == error.args and str(rebuilt) == str(error)


async def test_a_local_return_annotation_is_not_an_error() -> None:
    exec_globals: dict[str, Any] = {}
    exec(  # a module with `from __future__ import annotations` and a class local to a function
        "from __future__ import annotations\n"
        "def make():\n"
        "    class Local:\n"
        "        pass\n"
        "    def fn() -> Local:\n"
        "        return {'a': 1}\n"
        "    return fn\n",
        exec_globals,
    )
    fn = exec_globals["make"]()

    @define_agent
    async def agent(input: None, run: Run) -> dict[str, int]:
        return await run.step("local", fn)

    assert (await create_test_unit({"a": agent}).run("a")).output == {"a": 1}


async def _until_stored(unit: Any, run_id: str, kind: str) -> list[str]:
    """The run's stored event types, once one of them is ``kind`` (the caller's timeout bounds it)."""
    while True:
        types = [event["type"] for event in await unit.events(run_id)]
        if kind in types:
            return types
        await asyncio.sleep(0.005)


async def test_step_started_reaches_the_store_while_the_step_runs() -> None:
    release = asyncio.Event()

    @define_agent
    async def agent(input: None, run: Run) -> None:
        async def slow() -> None:
            await release.wait()

        await run.step("slow", slow)

    unit = create_test_unit({"a": agent})
    record = await unit.engine.start("a", None)
    stored = await asyncio.wait_for(_until_stored(unit, record.id, "STEP_STARTED"), 30)
    assert stored == ["RUN_STARTED", "STEP_STARTED"]
    release.set()
    await unit.engine.wait(record.id)


async def test_a_sync_step_still_running_shows_step_started_in_the_store() -> None:
    import threading

    release = threading.Event()

    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.step("blocking", lambda: release.wait(60))

    unit = create_test_unit({"a": agent})
    record = await unit.engine.start("a", None)
    try:
        stored = await asyncio.wait_for(_until_stored(unit, record.id, "STEP_STARTED"), 30)
    finally:
        release.set()  # the step blocks until the test saw its STEP_STARTED stored
    assert stored == ["RUN_STARTED", "STEP_STARTED"]
    assert (await unit.engine.wait(record.id)).status == RunStatus.completed


class CountingStore(MemoryStore):
    """A memory store that counts its journal and event writes."""

    appends = 0

    async def append(self, run_id: str, **writes: Any) -> int:
        self.appends += 1
        return await super().append(run_id, **writes)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_fast_step_is_one_commit_whether_its_function_is_sync_or_async(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wait no thread hop outlasts, so the count does not depend on the machine's load:
    # before, STEP_STARTED was flushed at the loop's next turn, which a sync step always yields.
    monkeypatch.setattr("agent_unit.run.STEP_STARTED_WAIT", 60.0)

    def sync_noop() -> int:
        return 1

    async def async_noop() -> int:
        return 1

    @define_agent
    async def agent(input: None, run: Run) -> int:
        total = 0
        for i in range(20):
            total += await run.step(f"s{i}", sync_noop if kind == "sync" else async_noop)
        return total

    store = CountingStore()
    unit = create_test_unit({"a": agent}, store)
    record = await unit.run("a")
    assert record.output == 20 and store.appends == 20
    types = [event["type"] for event in await unit.events(record.id)]
    assert types == ["RUN_STARTED", *["STEP_STARTED", "STEP_FINISHED"] * 20, "RUN_FINISHED"]


class HTTPStatusError(Exception):
    """An error that formats its own message from its arguments (as many SDK errors do)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status


async def test_a_replayed_error_never_differs_from_the_first_run() -> None:
    from agent_unit._codec import encode_error, rebuild_error

    rebuilt = rebuild_error(encode_error(HTTPStatusError(503, "busy"), "s"))
    assert type(rebuilt) is HTTPStatusError and str(rebuilt) == "HTTP 503: busy"


async def test_a_sibling_that_keeps_stepping_does_not_keep_the_run_from_parking() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        async def poll() -> None:
            for i in range(10**6):  # polls until the run stops it
                await run.step("poll", lambda i=i: i)
                await asyncio.sleep(0.001)

        await asyncio.gather(poll(), run.interrupt("approve"))
        return "done"

    unit = create_test_unit({"a": agent})
    parked = await asyncio.wait_for(unit.run("a"), 5)
    assert parked.status == RunStatus.interrupted


async def test_closures_from_one_factory_keep_their_own_return_types() -> None:
    class User(BaseModel):
        name: str

    class Invoice(BaseModel):
        total: int

    def loader(kind: type[BaseModel], value: dict[str, Any]) -> Any:
        def load() -> BaseModel:
            return kind.model_validate(value)

        load.__annotations__["return"] = kind
        return load

    @define_agent
    async def agent(input: None, run: Run) -> list[str]:
        user = await run.step("user", loader(User, {"name": "ann"}))
        invoice = await run.step("invoice", loader(Invoice, {"total": 5}))
        return [type(user).__name__, type(invoice).__name__]

    assert (await create_test_unit({"a": agent}).run("a")).output == ["User", "Invoice"]


async def test_a_sync_step_sees_the_run_and_its_key_in_its_thread() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> list[str]:
        def inside() -> list[str]:
            return [use_run().id, use_run().idempotency_key()]

        return await run.step("inside", inside)

    record = await create_test_unit({"a": agent}).run("a")
    assert record.output is not None and record.output[0] == record.id and len(record.output[1]) == 40
