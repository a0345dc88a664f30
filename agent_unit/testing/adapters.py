"""The adapter conformance scenarios: what every built-in adapter passes, for any adapter's tests.

An adapter's test project gives an importable agents module (``"my_tests.agents:AGENTS"``,
imported again in the child processes a scenario starts) with two agents of its framework:

- an *approval* agent: it makes a model call, then pauses (a tool call that needs approval,
  or the framework's own interrupt), and once answered does a side effect and finishes;
- a *crash* agent: it makes a model call, then calls a tool that calls :func:`crash_point`
  (a scenario kills the process there), does a side effect and finishes.

Their scripted models call :func:`model_called` once per call and their tools call
:func:`effect` once per side effect, each with a label of its own (``"model support 1"``,
``"refund o_1"``): a label seen twice is a repeat. Then, from any pytest::

    from agent_unit.testing.adapters import AdapterSuite

    SUITE = AdapterSuite(
        agents="my_tests.agents:AGENTS", approval="support", approval_input="refund o_1",
        crash="charger", crash_input="charge me", adapters=("my_adapter:adapter",),
        tool_call=ToolCall("call_1", "refund", {"order_id": "o_1"}),
    )

    @pytest.mark.parametrize("scenario", SUITE.scenarios(), ids=lambda s: s.__name__)
    async def test_conformance(scenario, tmp_path):
        await scenario(SUITE, tmp_path)

Each scenario is an ``async`` function ``(suite, folder)`` that raises ``AssertionError`` with
what broke; ``folder`` is an empty directory of its own (its SQLite file, its log).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._records import RunRecord, RunStatus
from ..run import current_run, idempotency_key
from . import create_test_unit, execute_again

__all__ = [
    "HANG_VARIABLE",
    "LOG_VARIABLE",
    "SCENARIOS",
    "AdapterSuite",
    "Scenario",
    "ToolCall",
    "approval_survives_a_restart",
    "approval_survives_a_restart_of_a_real_server",
    "crash_point",
    "effect",
    "model_called",
    "replay_repeats_no_model_call_and_no_effect",
    "sigkill_inside_a_tool_reruns_only_that_tool_with_the_same_key",
    "the_call_waiting_for_approval_is_shown_once",
]

LOG_VARIABLE = "AGENT_UNIT_CONFORMANCE_LOG"  # the file model calls and effects are appended to
HANG_VARIABLE = "AGENT_UNIT_CONFORMANCE_HANG"  # set in the child to kill: crash_point writes it and hangs


# -- what the agents call ------------------------------------------------------------------


def _append(line: str) -> None:
    """One line, flushed to disk: the log survives a process that is killed right after."""
    if path := os.environ.get(LOG_VARIABLE):
        with Path(path).open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def _key() -> str:
    run = current_run()
    key = run.current_key() if run is not None else None
    return idempotency_key(run.id, key) if run is not None and key is not None else "-"


def model_called(label: str) -> None:
    """Call from the scripted model, once per call, with a label of its own (``"model support 1"``)."""
    _append(f"model {label.replace(' ', '_')}")


def effect(label: str) -> None:
    """Call from a tool, once per side effect, with a label of its own; the journal key goes with it."""
    _append(f"effect {label.replace(' ', '_')} {_key()}")


async def crash_point() -> None:
    """Call from the crash agent's tool: in the process a scenario kills, it hangs here."""
    _append(f"crash {_key()}")
    if marker := os.environ.get(HANG_VARIABLE):
        Path(marker).write_text("in the tool")  # noqa: ASYNC240 - the process is killed here
        await asyncio.sleep(3600)


# -- what the test project describes ---------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """The tool call the approval agent waits on, as its model asks for it."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]


Scenario = Callable[["AdapterSuite", Path], Awaitable[None]]


@dataclass(frozen=True)
class AdapterSuite:
    """One adapter's test agents and the answers to give them (see the module's docstring)."""

    agents: str  # "module:ATTRIBUTE", a mapping of names to agents, importable by a child process
    approval: str  # the agent that makes a model call, pauses, and does an effect once answered
    approval_input: Any
    crash: str  # the agent whose tool calls crash_point()
    crash_input: Any
    answer: Any = True  # resumes the approval agent
    interrupt: str = "tool-approval"  # the name it pauses under
    tool_call: ToolCall | None = None  # the call it waits on, when it waits on a tool call's approval
    decline: Any = False  # the answer that declines that call
    crash_step: str | None = None  # the crash tool's journal key name (``"tool:charge#call_1"``), to check
    adapters: tuple[str, ...] = ()  # "module:adapter" of an adapter not installed as an entry point
    env: Mapping[str, str] = field(default_factory=dict)  # for the child processes

    def scenarios(self) -> list[Scenario]:
        """The scenarios that apply: all of them, but the event-stream one needs ``tool_call``."""
        return [
            s for s in SCENARIOS if self.tool_call is not None or s is not the_call_waiting_for_approval_is_shown_once
        ]

    def load(self) -> Mapping[str, Any]:
        module, _, attribute = self.agents.partition(":")
        agents: Mapping[str, Any] = getattr(importlib.import_module(module), attribute or "AGENTS")
        return agents


# -- reading what ran ------------------------------------------------------------------------


@contextmanager
def _logging_to(path: Path) -> Iterator[Path]:
    """Agents in this process append to ``path`` for the block's length."""
    before = os.environ.get(LOG_VARIABLE)
    os.environ[LOG_VARIABLE] = str(path)
    try:
        yield path
    finally:
        if before is None:
            del os.environ[LOG_VARIABLE]
        else:
            os.environ[LOG_VARIABLE] = before


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _repeats(lines: list[str]) -> list[str]:
    return sorted({line for line in lines if lines.count(line) > 1})


def _assert_ran_once(lines: list[str], what: str) -> None:
    assert not _repeats(lines), f"{what}: ran again: {', '.join(_repeats(lines))} (all: {lines})"


def _models(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("model ")]


def _effects(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("effect ")]


def _finished(record: RunRecord, what: str) -> None:
    error = record.error.message if record.error else ""
    assert record.status == RunStatus.completed, f"{what}: the run is {record.status.value} {error}"


def _parked(record: RunRecord, suite: AdapterSuite) -> None:
    error = record.error.message if record.error else ""
    assert record.status == RunStatus.interrupted, f"the approval agent did not pause: {record.status.value} {error}"
    assert record.interrupt is not None and record.interrupt.name == suite.interrupt, record.interrupt
    if suite.tool_call is not None:
        payload = record.interrupt.payload
        expected = {"call_id": suite.tool_call.call_id, "tool": suite.tool_call.tool}
        assert {key: payload.get(key) for key in expected} == expected, payload
        assert payload.get("arguments") == dict(suite.tool_call.arguments), payload


def _resumed_once(before: list[str], after: list[str], run_id: str, suite: AdapterSuite) -> None:
    """What an approval run logged before its pause, and in all: the model call(s) once, the effect once."""
    assert _models(before), "the approval agent made no model call before it paused (call model_called())"
    assert after[: len(before)] == before, f"the log changed under the paused run: {before} then {after}"
    _assert_ran_once(after, "after the restart")
    done = _effects(after[len(before) :])
    assert done, f"the answer ran no effect (call effect() in the approved tool): {after}"
    if suite.tool_call is not None:
        key = idempotency_key(run_id, f"tool:{suite.tool_call.tool}#{suite.tool_call.call_id}")
        assert any(line.endswith(f" {key}") for line in done), f"the approved tool's effect lacks its key {key}: {done}"


# -- the scenarios ------------------------------------------------------------------------


async def approval_survives_a_restart(suite: AdapterSuite, folder: Path) -> None:
    """A run parks for approval; a new engine over the same store resumes it: no model call or effect twice."""
    from ..stores.sqlite import SQLiteStore

    agents, db = suite.load(), folder / "runs.db"
    with _logging_to(folder / "log.txt") as log:
        first = create_test_unit(agents, SQLiteStore(db), adapters=suite.adapters)
        parked = await first.run(suite.approval, suite.approval_input)
        await first.close()
        await first.store.close()
        _parked(parked, suite)
        before = _lines(log)
        second = create_test_unit(agents, SQLiteStore(db), adapters=suite.adapters)
        done = await second.resume(parked.id, suite.answer)
        await second.close()
        await second.store.close()
    _finished(done, "resumed after a restart")
    _resumed_once(before, _lines(log), parked.id, suite)


async def approval_survives_a_restart_of_a_real_server(suite: AdapterSuite, folder: Path) -> None:
    """The same over HTTP: a server parks the run and is stopped (SIGTERM); a new server process
    over the same store (started meanwhile, as a rolling deploy does) resumes it."""
    from ..client import SyncAgentClient

    log = folder / "log.txt"
    old, new = (_Server(suite, f"sqlite:///{folder / 'runs.db'}", {LOG_VARIABLE: str(log)}) for _ in range(2))
    try:
        old.spawn()
        new.spawn()  # it loads the agents while the old one serves
        old.wait_up()
        with SyncAgentClient(old.url) as client:
            events = list(client.run(suite.approval, suite.approval_input))
            assert events and events[-1].type == "RUN_INTERRUPTED", [event.type for event in events]
            run_id = events[-1].data["runId"]
            _parked(client.get(run_id), suite)
        before = _lines(log)
        old.stop()
        new.wait_up()
        with SyncAgentClient(new.url) as client:
            finished = list(client.resume(run_id, suite.answer))
            assert finished and finished[-1].type == "RUN_FINISHED", [event.type for event in finished]
            _finished(client.get(run_id), "resumed by a restarted server")
    finally:
        old.stop()
        new.stop()
    _resumed_once(before, _lines(log), run_id, suite)


async def sigkill_inside_a_tool_reruns_only_that_tool_with_the_same_key(suite: AdapterSuite, folder: Path) -> None:
    """SIGKILL while a tool runs; another process recovers the run: that tool runs again, under the same
    key, and nothing before it does (no model call again)."""
    db, log, marker = folder / "runs.db", folder / "log.txt", folder / "marker"
    run_id = await asyncio.to_thread(_start_and_kill, suite, db, log, marker)
    killed = _lines(log)
    with _logging_to(log):
        done = await _recover(suite, db, run_id)
    _finished(done, "recovered after SIGKILL")
    assert done.attempt == 2, f"the recovered run is attempt {done.attempt}, not 2"
    lines = _lines(log)
    assert _models(killed), "the crash agent made no model call before its tool (call model_called())"
    assert lines[: len(killed)] == killed
    crashes = [line for line in lines if line.startswith("crash ")]
    assert len(crashes) == 2 and crashes[0] == crashes[1], f"the tool did not run again under one key: {crashes}"
    if suite.crash_step is not None:
        assert crashes[0] == f"crash {idempotency_key(run_id, suite.crash_step)}", crashes
    _assert_ran_once([line for line in lines if not line.startswith("crash ")], "after the recovery")
    assert _effects(lines[len(killed) :]), f"the recovered tool ran no effect after crash_point(): {lines}"


async def replay_repeats_no_model_call_and_no_effect(suite: AdapterSuite, folder: Path) -> None:
    """A finished run executed again from its journal by a new engine (as a recovery does) calls no
    model and runs no effect again, and ends with the same output."""
    from ..stores.sqlite import SQLiteStore

    agents, db = suite.load(), folder / "runs.db"
    with _logging_to(folder / "log.txt") as log:
        first = create_test_unit(agents, SQLiteStore(db), adapters=suite.adapters)
        done = await first.run(suite.crash, suite.crash_input)
        await first.close()
        await first.store.close()
        _finished(done, "the first execution")
        ran = _lines(log)
        assert _models(ran) and _effects(ran), f"the crash agent should call a model and run an effect: {ran}"
        second = create_test_unit(agents, SQLiteStore(db), adapters=suite.adapters)
        await execute_again(second, done.id)
        again = await second.get(done.id)
        await second.close()
        await second.store.close()
    _finished(again, "executed again")
    assert _lines(log) == ran, f"executed again from the journal, it ran: {_lines(log)[len(ran) :]}"
    assert again.output == done.output, (again.output, done.output)


async def the_call_waiting_for_approval_is_shown_once(suite: AdapterSuite, folder: Path) -> None:
    """The call waiting for approval is on the event stream before the park, and never again but for
    its result; declined, it runs nothing and has no result."""
    assert suite.tool_call is not None, "this scenario needs the suite's tool_call"
    with _logging_to(folder / "log.txt") as log:
        async with create_test_unit(suite.load(), adapters=suite.adapters) as unit:
            parked = await unit.run(suite.approval, suite.approval_input)
            _parked(parked, suite)
            _finished(await unit.resume(parked.id, suite.answer), "approved")
            _shown_once(await unit.events(parked.id), suite.tool_call, approved=True)
            before = len(_lines(log))
            declined = await unit.run(suite.approval, suite.approval_input)
            _finished(await unit.resume(declined.id, suite.decline), "declined")
            _shown_once(await unit.events(declined.id), suite.tool_call, approved=False)
    assert not _effects(_lines(log)[before:]), f"a declined call ran: {_lines(log)[before:]}"


def _shown_once(events: list[dict[str, Any]], call: ToolCall, *, approved: bool) -> None:
    parked = next(index for index, event in enumerate(events) if event["type"] == "RUN_INTERRUPTED")
    start, args, end = events[parked - 3 : parked]  # right before the park: a UI knows the call it approves
    assert start == {**start, "type": "TOOL_CALL_START", "toolCallId": call.call_id, "toolCallName": call.tool}, start
    assert args["type"] == "TOOL_CALL_ARGS" and args["toolCallId"] == call.call_id, args
    assert json.loads(args["delta"]) == dict(call.arguments), args
    assert end["type"] == "TOOL_CALL_END" and end["toolCallId"] == call.call_id, end
    after = [event["type"] for event in events[parked + 1 :] if event.get("toolCallId") == call.call_id]
    # Once answered, the call adds only its result (none when declined): it is never shown twice.
    assert after == (["TOOL_CALL_RESULT"] if approved else []), f"after the answer the call showed {after}"


SCENARIOS: tuple[Scenario, ...] = (
    approval_survives_a_restart,
    approval_survives_a_restart_of_a_real_server,
    sigkill_inside_a_tool_reruns_only_that_tool_with_the_same_key,
    replay_repeats_no_model_call_and_no_effect,
    the_call_waiting_for_approval_is_shown_once,
)


# -- processes --------------------------------------------------------------------------------


def _child_env(suite: AdapterSuite) -> dict[str, str]:
    """This process's import path, so a child imports the same agents and the same agent-unit."""
    path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
    return {**os.environ, **suite.env, "PYTHONPATH": path}


_CHILD = """
import asyncio, importlib, json, sys
from agent_unit import RunEngine
from agent_unit.stores.sqlite import SQLiteStore

module, _, attribute = sys.argv[2].partition(":")
AGENTS = getattr(importlib.import_module(module), attribute or "AGENTS")

async def main():
    options = json.loads(sys.argv[5])
    engine = RunEngine(AGENTS, SQLiteStore(sys.argv[1]), lease_ttl="2s", **options)
    record = await engine.start(sys.argv[3], json.loads(sys.argv[4]))
    print(record.id, flush=True)
    await engine.wait(record.id)

asyncio.run(main())
"""

_SERVER = """
import importlib, json, sys
import uvicorn
from agent_unit import create_agent_unit

module, _, attribute = sys.argv[2].partition(":")
AGENTS = getattr(importlib.import_module(module), attribute or "AGENTS")
app = create_agent_unit(AGENTS, store=sys.argv[1], keepalive_seconds=0.5, **json.loads(sys.argv[4]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[3]), log_level="warning", timeout_graceful_shutdown=1)
"""


def _start_and_kill(suite: AdapterSuite, db: Path, log: Path, marker: Path) -> str:
    """A child process starts the crash agent's run and hangs in crash_point(); SIGKILL it there. The run id."""
    env = {**_child_env(suite), LOG_VARIABLE: str(log), HANG_VARIABLE: str(marker)}
    options = json.dumps({"adapters": list(suite.adapters)})
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(db), suite.agents, suite.crash, json.dumps(suite.crash_input), options],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        run_id = child.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, f"the child ended before the crash point: {child.returncode}"
            assert time.monotonic() < deadline, "the crash agent never reached crash_point()"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        return run_id
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


async def _recover(suite: AdapterSuite, db: Path, run_id: str) -> RunRecord:
    """A new engine over the file whose sweep recovers the run: at once (the killed child was on
    this machine), or once its lease has lapsed."""
    from .._engine import RunEngine
    from ..stores.sqlite import SQLiteStore

    engine = RunEngine(suite.load(), SQLiteStore(db), lease_ttl="1s", background_sweep=False, adapters=suite.adapters)
    try:
        stuck = await engine.get(run_id)
        assert stuck.status == RunStatus.running, f"the killed run is {stuck.status.value}"
        if not (await engine.sweep(wait=True)).recovered:
            await asyncio.sleep(max(0.0, (stuck.lease_expires or 0) - time.time()) + 0.05)
            assert (await engine.sweep(wait=True)).run_ids == (run_id,), "the run was not recovered"
        return await engine.get(run_id)
    finally:
        await engine.aclose()
        await engine.store.close()


class _Server:
    """A real HTTP server process over the suite's agents, stopped with SIGTERM as a host stops it."""

    def __init__(self, suite: AdapterSuite, store: str, env: Mapping[str, str]) -> None:
        self.suite, self.store, self.env = suite, store, {**_child_env(suite), **env}
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        options = json.dumps({"adapters": list(self.suite.adapters)})
        args = [sys.executable, "-c", _SERVER, self.store, self.suite.agents, str(self.port), options]
        self.process = subprocess.Popen(args, env=self.env)

    def wait_up(self) -> None:
        import httpx

        assert self.process is not None
        deadline = time.monotonic() + 60
        with httpx.Client(timeout=1) as http:  # one client: each one loads the CA bundle (~50 ms of CPU)
            while True:
                try:
                    http.get(f"{self.url}/agents").raise_for_status()
                    return
                except httpx.HTTPError:
                    assert self.process.poll() is None, f"the server ended: {self.process.returncode}"
                    assert time.monotonic() < deadline, f"no server answered at {self.url}"
                    time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
