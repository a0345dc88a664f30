"""``POST /agents/{name}/ag-ui``: AG-UI clients run agents, see interrupts and resume them.

In process over httpx's ASGI transport, then over real uvicorn processes (a restart between
pause and resume), then with the official TypeScript client (``@ag-ui/client``'s HttpAgent).
Every streamed event is checked against ag-ui-protocol's own ``Event`` union.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, RunAgentInput
from pydantic import TypeAdapter

from agent_unit import create_agent_unit
from agent_unit.http.agui import Translator, usage_since

from ..support import fetch
from ..support.agui_agents import AGENTS, USAGE
from ..support.server import Server

pytestmark = pytest.mark.slow  # runs Node (npm packages, Pyodide): left out of `make check`


AGUI_EVENT = TypeAdapter(Event)
CLIENT = Path(__file__).resolve().parents[1] / "support" / "agui_client"
OURS = {"RUN_INTERRUPTED", "RUN_SLEEPING", "RUN_CANCELLED"}


def agui(response: httpx.Response) -> list[dict[str, Any]]:
    """The AG-UI events of an SSE response: each one ``data:`` line, each a valid AG-UI event."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in response.text.strip().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        if not lines:
            continue  # a keep-alive
        assert len(lines) == 1 and lines[0].startswith("data: "), block
        event = json.loads(lines[0].removeprefix("data: "))
        AGUI_EVENT.validate_python(event)  # raises on anything AG-UI does not define
        assert event["type"] not in OURS
        events.append(event)
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def run_input(
    content: Any = None,
    *,
    thread: str = "t1",
    run: str = "r1",
    resume: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A RunAgentInput as an AG-UI client sends it (camelCase)."""
    body: dict[str, Any] = {"threadId": thread, "runId": run, "messages": [], "state": {}, "tools": [], "context": []}
    if content is not None:
        body["messages"] = [{"id": "m1", "role": "user", "content": content}]
    if resume is not None:
        body["resume"] = resume
    return {**body, **extra}


def resolved(interrupt_id: str, payload: Any) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt_id, "status": "resolved", "payload": payload}]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as client:
        client.app = app  # type: ignore[attr-defined]
        yield client
    await app.engine.aclose()


async def park(http: httpx.AsyncClient, order_id: str = "o_1", thread: str = "t1") -> tuple[str, dict[str, Any]]:
    """Run ``refund`` to its interrupt: the durable run's id and the AG-UI interrupt."""
    response = await http.post(
        "/agents/refund/ag-ui", json=run_input(json.dumps({"order_id": order_id}), thread=thread)
    )
    finished = agui(response)[-1]
    assert finished["outcome"]["type"] == "interrupt"
    return response.headers["x-run-id"], finished["outcome"]["interrupts"][0]


# -- in process ------------------------------------------------------------------------------


async def test_a_run_that_finishes_streams_its_text_and_result(http: httpx.AsyncClient) -> None:
    response = await http.post("/agents/greet/ag-ui", json=run_input("Ada", thread="t-greet", run="client-run-1"))
    events = agui(response)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    started, finished = events[0], events[-1]
    run_id = response.headers["x-run-id"]
    assert started["runId"] == finished["runId"] == "client-run-1"  # the client's id for this AG-UI run
    assert started["threadId"] == finished["threadId"] == "t-greet"
    assert started["protocolVersion"] == "1.0"
    assert started["metadata"]["agent-unit"] == {"runId": run_id}  # the durable run behind it
    assert finished["result"] == "Hello, Ada!" and finished["outcome"] == {"type": "success"}
    assert finished["metadata"]["agent-unit"] == {"runId": run_id, "status": "completed"}
    assert finished["usage"] == [USAGE]
    record = await http.app.engine.get(run_id)  # type: ignore[attr-defined]
    assert record.status == "completed" and record.thread_id == "t-greet" and record.input == "Ada"


async def test_an_interrupt_ends_the_stream_with_the_interrupt_outcome(http: httpx.AsyncClient) -> None:
    response = await http.post("/agents/refund/ag-ui", json=run_input('{"order_id": "o_1"}'))
    events = agui(response)
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    run_id = response.headers["x-run-id"]
    finished = events[-1]
    assert finished["runId"] == "r1" and "result" not in finished
    assert finished["metadata"]["agent-unit"] == {"runId": run_id, "status": "interrupted"}
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["id"] == f"{run_id}:interrupt:approve-refund#0"
    assert interrupt["reason"] == "approve-refund"
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert interrupt["metadata"]["agent-unit"] == {
        "runId": run_id,
        "key": "interrupt:approve-refund#0",
        "payload": {"id": "o_1", "amount": 42},
    }
    record = await http.app.engine.get(run_id)  # type: ignore[attr-defined]
    assert record.status == "interrupted" and record.input == {"order_id": "o_1"}


async def test_resume_entries_continue_the_same_durable_run(http: httpx.AsyncClient) -> None:
    run_id, interrupt = await park(http)
    response = await http.post(
        "/agents/refund/ag-ui", json=run_input(run="r2", resume=resolved(interrupt["id"], {"approved": True}))
    )
    events = agui(response)
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    assert response.headers["x-run-id"] == run_id
    assert events[0]["runId"] == events[-1]["runId"] == "r2"
    assert events[0]["metadata"]["agent-unit"]["runId"] == run_id
    assert events[1]["stepName"] == "charge" and events[-1]["result"] == "refunded"
    record = await http.app.engine.get(run_id)  # type: ignore[attr-defined]
    assert record.status == "completed" and record.output == "refunded"
    # One durable run: its stored stream holds both AG-UI runs, seqs unbroken.
    stored = await http.app.engine.events(run_id)  # type: ignore[attr-defined]
    assert [event.seq for event in stored] == list(range(1, 9))


async def test_a_bad_answer_is_refused_and_the_run_stays_parked(http: httpx.AsyncClient) -> None:
    run_id, interrupt = await park(http)
    refused = await http.post(
        "/agents/refund/ag-ui", json=run_input(run="r2", resume=resolved(interrupt["id"], {"approved": "maybe"}))
    )
    assert refused.status_code == 422 and refused.headers["content-type"] == "application/json"
    error = refused.json()["error"]
    assert error["code"] == "invalid_answer" and error["details"][0]["loc"] == ["approved"]
    missing = await http.post(
        "/agents/refund/ag-ui",
        json=run_input(run="r2", resume=[{"interruptId": interrupt["id"], "status": "resolved"}]),
    )
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "invalid_answer"
    record = await http.app.engine.get(run_id)  # type: ignore[attr-defined]
    assert record.status == "interrupted" and record.interrupt.key == "interrupt:approve-refund#0"
    answered = await http.post(
        "/agents/refund/ag-ui", json=run_input(run="r3", resume=resolved(interrupt["id"], {"approved": False}))
    )
    assert agui(answered)[-1]["result"] == "declined"


async def test_each_ag_ui_run_reports_the_usage_of_its_own_model_calls(http: httpx.AsyncClient) -> None:
    response = await http.post("/agents/greet-twice/ag-ui", json=run_input("Ada"))
    paused = agui(response)[-1]
    [interrupt] = paused["outcome"]["interrupts"]
    assert interrupt["message"] == "Greet Ada once more?" and interrupt["responseSchema"] == {"type": "boolean"}
    assert paused["usage"] == [USAGE]  # the call before the pause
    resumed = agui(
        await http.post("/agents/greet-twice/ag-ui", json=run_input(run="r2", resume=resolved(interrupt["id"], True)))
    )
    assert types(resumed)[1:4] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    assert resumed[-1]["result"] == "Hello again, Ada!" and resumed[-1]["usage"] == [USAGE]  # only the call after it
    record = await http.app.engine.get(response.headers["x-run-id"])  # type: ignore[attr-defined]
    total = {"provider": "test", "model": "greeter", "input_tokens": 6, "output_tokens": 10, "total_tokens": 16}
    assert record.usage == [total]  # the durable run's, snake_case as the run record has it


async def test_a_cancelled_entry_cancels_the_run(http: httpx.AsyncClient) -> None:
    run_id, interrupt = await park(http)
    response = await http.post(
        "/agents/refund/ag-ui",
        json=run_input(run="r2", resume=[{"interruptId": interrupt["id"], "status": "cancelled"}]),
    )
    events = agui(response)
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]  # a cancel stores no start: one is made
    assert events[0]["runId"] == events[-1]["runId"] == "r2"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-1]["metadata"]["agent-unit"] == {"runId": run_id, "status": "cancelled"}
    assert (await http.app.engine.get(run_id)).status == "cancelled"  # type: ignore[attr-defined]


async def test_resume_errors_are_json_and_change_nothing(http: httpx.AsyncClient) -> None:
    run_id, interrupt = await park(http)
    good = interrupt["id"]

    async def resume(entries: list[dict[str, Any]], agent: str = "refund", thread: str = "t1") -> httpx.Response:
        return await http.post(f"/agents/{agent}/ag-ui", json=run_input(run="r2", thread=thread, resume=entries))

    cases = [
        (resolved("run_nope:interrupt:x#0", {"approved": True}), "refund", "t1", 404, "interrupt_not_found"),
        (resolved("not-an-interrupt-id", {"approved": True}), "refund", "t1", 404, "interrupt_not_found"),
        (resolved(good, {"approved": True}), "greet", "t1", 404, "interrupt_not_found"),  # another agent's
        (resolved(good, {"approved": True}), "refund", "t-other", 409, "conflict"),  # another thread's
        (resolved(f"{run_id}:interrupt:other#0", {"approved": True}), "refund", "t1", 409, "conflict"),  # stale
        (resolved(good, True) + resolved(good, True), "refund", "t1", 422, "invalid_argument"),
    ]
    for entries, agent, thread, status, code in cases:
        response = await resume(entries, agent, thread)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code), entries
    record = await http.app.engine.get(run_id)  # type: ignore[attr-defined]
    assert record.status == "interrupted" and record.version == 2  # untouched
    agui(await resume(resolved(good, {"approved": True})))
    again = await resume(resolved(good, {"approved": True}))
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_interrupted"


async def test_bad_requests_get_a_json_error(http: httpx.AsyncClient) -> None:
    no_messages = await http.post("/agents/greet/ag-ui", json={"threadId": "t1", "runId": "r1"})
    assert no_messages.status_code == 422
    error = no_messages.json()["error"]
    assert error["code"] == "invalid_argument" and error["details"][0]["loc"] == ["messages"]
    bad_status = await http.post(
        "/agents/greet/ag-ui", json=run_input(resume=[{"interruptId": "x", "status": "maybe"}])
    )
    assert bad_status.status_code == 422 and bad_status.json()["error"]["code"] == "invalid_argument"
    not_json = await http.post("/agents/greet/ag-ui", content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "bad_request"
    unknown = await http.post("/agents/nobody/ag-ui", json=run_input("hi"))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "agent_not_found"
    wrong_input = await http.post("/agents/refund/ag-ui", json=run_input("refund my order please"))
    assert wrong_input.status_code == 422 and wrong_input.json()["error"]["code"] == "invalid_input"
    page = await http.app.engine.list()  # type: ignore[attr-defined]
    assert page.runs == []  # no run was created by any of them


async def test_the_input_comes_from_forwarded_props_or_the_last_user_message(http: httpx.AsyncClient) -> None:
    explicit = run_input(forwardedProps={"input": {"order_id": "o_7"}})
    events = agui(await http.post("/agents/refund/ag-ui", json=explicit))
    assert events[-1]["outcome"]["interrupts"][0]["metadata"]["agent-unit"]["payload"]["id"] == "o_7"
    conversation = run_input(run="r2")
    conversation["messages"] = [
        {"id": "m1", "role": "user", "content": "Grace"},
        {"id": "m2", "role": "assistant", "content": "Hello, Grace!"},
        {"id": "m3", "role": "user", "content": [{"type": "text", "text": "Ada"}]},
        {"id": "m4", "role": "system", "content": "be brief"},
    ]
    events = agui(await http.post("/agents/greet/ag-ui", json=conversation))
    assert events[-1]["result"] == "Hello, Ada!"
    as_number = agui(await http.post("/agents/fanout/ag-ui", json=run_input("3", run="r3")))
    assert as_number[-1]["result"] == [3, 4]  # "3" is JSON for an agent whose input is not a string
    RunAgentInput.model_validate(explicit)  # what the tests send is what AG-UI clients send


async def test_sleeping_and_failing_runs_end_their_ag_ui_run(http: httpx.AsyncClient) -> None:
    response = await http.post("/agents/nap/ag-ui", json=run_input("now"))
    events = agui(response)
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]  # RUN_SLEEPING never reaches the client
    meta = events[-1]["metadata"]["agent-unit"]
    assert meta["status"] == "sleeping" and meta["wakeAt"] and events[-1]["outcome"] == {"type": "success"}
    assert (await http.app.engine.get(response.headers["x-run-id"])).status == "sleeping"  # type: ignore[attr-defined]
    failed = agui(await http.post("/agents/broken/ag-ui", json=run_input("fly")))
    assert types(failed) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_ERROR"]
    assert failed[-1]["message"] == "cannot fly" and failed[-1]["metadata"]["agent-unit"]["status"] == "failed"


async def test_steps_of_one_name_side_by_side_reach_the_client_balanced(http: httpx.AsyncClient) -> None:
    response = await http.post("/agents/fanout/ag-ui", json=run_input("1"))
    events = agui(response)
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    stored = await http.app.engine.events(response.headers["x-run-id"])  # type: ignore[attr-defined]
    assert [json.loads(event.data)["type"] for event in stored].count("STEP_STARTED") == 2


def test_the_translator_keeps_lanes_balanced_and_drops_what_ag_ui_does_not_know() -> None:
    translate = Translator("run_1", "t1", "r1", frozenset({"RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START"}))
    stored = [
        {"type": "STEP_STARTED", "stepName": "a"},  # no RUN_STARTED stored before it: one is made
        {"type": "STEP_STARTED", "stepName": "a"},  # a recovery ran it again: one is open already
        {"type": "STEP_FINISHED", "stepName": "a"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},  # closes nothing open: a client would refuse it
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "SOMETHING_NEW", "value": 1},
        {"type": "RUN_INTERRUPTED", "threadId": "t1", "runId": "run_1", "interrupt": {"name": "ask", "key": "k#0"}},
    ]
    out = [event for event in stored for event in translate(event)]
    assert types(out) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",  # closed before the end, newest first
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert translate.done and out[-1]["outcome"]["interrupts"][0]["id"] == "run_1:k#0"
    for event in out:
        AGUI_EVENT.validate_python(event)


def test_usage_since_counts_what_one_ag_ui_run_spent() -> None:
    before = [{"provider": "a", "model": "m", "inputTokens": 3, "totalTokens": 3}]
    total = [
        {"provider": "a", "model": "m", "inputTokens": 5, "totalTokens": 5},
        {"provider": "b", "model": "n", "outputTokens": 2},
    ]
    assert usage_since(total, before) == [
        {"provider": "a", "model": "m", "inputTokens": 2, "totalTokens": 2},
        {"provider": "b", "model": "n", "outputTokens": 2},
    ]
    assert usage_since(before, before) == []


async def test_the_authorize_hook_guards_start_resume_and_cancel() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def authorize(request: Any, action: str, run: dict[str, Any]) -> bool:
        seen.append((action, run))
        return action != "cancel"

    app = create_agent_unit(AGENTS, store="memory://", authorize=authorize)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        run_id, interrupt = await park(http)
        cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        refused = await http.post("/agents/refund/ag-ui", json=run_input(run="r2", resume=cancel))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        assert (await app.engine.get(run_id)).status == "interrupted"
    await app.engine.aclose()
    assert [action for action, _ in seen] == ["start", "cancel"]
    assert seen[0][1] == {"agent": "refund", "thread_id": "t1"}
    assert seen[1][1] == {"id": run_id, "agent": "refund", "thread_id": "t1"}


def test_ag_ui_is_imported_at_the_routes_first_request_only() -> None:
    code = (
        "import asyncio, sys, httpx\n"
        "from agent_unit import create_agent_unit\n"
        "from tests.support.agui_agents import AGENTS\n"
        "app = create_agent_unit(AGENTS, store='memory://')\n"
        "async def main():\n"
        "    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url='http://u') as c:\n"
        "        await c.get('/agents')\n"
        "        before = 'ag_ui' in sys.modules\n"
        "        await c.post('/agents/greet/ag-ui', json={'threadId': 't', 'runId': 'r', 'messages': []})\n"
        "        print(before, 'ag_ui' in sys.modules)\n"
        "    await app.engine.aclose()\n"
        "asyncio.run(main())\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert result.stdout.split() == ["False", "True"]


# -- over uvicorn ----------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    ledger = tmp_path / "ledger.txt"
    env = {"TEST_AGENTS": "tests.support.agui_agents:AGENTS", "LEDGER_FILE": str(ledger)}
    running = Server(f"sqlite:///{tmp_path / 'runs.db'}", env=env).start()
    running.ledger = ledger  # type: ignore[attr-defined]
    yield running
    running.stop()


def test_pause_restart_the_server_resume_over_ag_ui(server: Server) -> None:
    with fetch.Client(base_url=server.url, timeout=30) as http:
        first = http.post("/agents/refund/ag-ui", json=run_input('{"order_id": "o_1"}', thread="t-restart"))
        [interrupt] = agui(first)[-1]["outcome"]["interrupts"]
    server.restart()  # a new process over the same store: nothing of the pause is in memory
    with fetch.Client(base_url=server.url, timeout=30) as http:
        resumed = http.post(
            "/agents/refund/ag-ui",
            json=run_input(thread="t-restart", run="r2", resume=resolved(interrupt["id"], {"approved": True})),
        )
        events = agui(resumed)
        assert types(events) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
        assert events[-1]["result"] == "refunded"
        assert http.get(f"/runs/{first.headers['x-run-id']}").json()["status"] == "completed"
    charges = server.ledger.read_text().splitlines()  # type: ignore[attr-defined]
    assert len(charges) == 1 and charges[0].startswith("charge o_1 ")


# -- the official TypeScript client ----------------------------------------------------------


@pytest.fixture(scope="session")
def agui_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/agui_client installed (``npm ci``, pinned by its lockfile) in a cached folder."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true: the AG-UI TypeScript client test needs node and npm, and they are not installed")
        pytest.skip("node and npm are not installed: the AG-UI TypeScript client test needs them")
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("agui-client") if cache is not None else tmp_path_factory.mktemp("agui-client")
    manifests = [CLIENT / "package.json", CLIENT / "package-lock.json"]
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in manifests)).hexdigest()
    for path in [*manifests, CLIENT / "client.mjs"]:
        shutil.copyfile(path, folder / path.name)
    installed = folder / "node_modules" / ".agent-unit-lock"
    if not installed.exists() or installed.read_text() != digest:
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, f"npm ci failed:\n{result.stdout}\n{result.stderr}"
        installed.write_text(digest)
    return folder


def node_client(folder: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        ["node", str(folder / "client.mjs"), *args], capture_output=True, text=True, timeout=60, cwd=folder
    )
    assert result.returncode == 0, f"the AG-UI client failed:\n{result.stdout}\n{result.stderr}"
    report: dict[str, Any] = json.loads(result.stdout)
    assert report.pop("warnings") == []  # nothing was stripped or translated by the client
    return report


def test_the_official_typescript_client_runs_pauses_and_resumes(agui_client: Path, server: Server) -> None:
    report = node_client(agui_client, server.url, "pause")
    greet = report["greet"]
    assert greet["events"] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert greet["result"] == "Hello, Ada!" and greet["newMessages"][0]["role"] == "assistant"
    assert greet["newMessages"][0]["content"].startswith("Hello, Ada!")

    paused = report["paused"]
    assert paused["finished"]["outcome"] == "interrupt" and paused["finished"]["runId"] == "ag-refund-1"
    [interrupt] = paused["finished"]["interrupts"]
    assert interrupt["reason"] == "approve-refund" and interrupt["responseSchema"]["required"] == ["approved"]
    assert interrupt["metadata"]["agent-unit"]["payload"] == {"id": "o_1", "amount": 42}
    assert paused["pending"] == [interrupt["id"]]

    refused = report["refused"]  # a bad answer: the client sees the 422, the interrupt stays open
    assert refused["error"]["status"] == 422 and refused["error"]["payload"]["error"]["code"] == "invalid_answer"
    assert report["stillPending"] == [interrupt["id"]]

    resumed = report["resumed"]
    assert resumed["events"] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_FINISHED"]
    assert resumed["finished"]["outcome"] == "success" and resumed["result"] == "refunded"
    assert resumed["pending"] == []

    [later] = report["parked"]["pending"]
    server.restart()  # a fresh server and a fresh client process: the interrupt id is all it takes
    after = node_client(agui_client, server.url, "resume", "thread-refund-b", later)["resumed"]
    assert after["finished"] == {"outcome": "success", "interrupts": [], "runId": "ag-later-2"}
    assert after["result"] == "refunded"
    charges = server.ledger.read_text().splitlines()  # type: ignore[attr-defined]
    assert sorted(line.split()[1] for line in charges) == ["o_1", "o_2"]  # each order charged once


@pytest.mark.parametrize("field", ["threadId", "runId", "message", "state"])
async def test_a_lone_surrogate_in_any_field_is_a_400_before_any_event(http: httpx.AsyncClient, field: str) -> None:
    body = run_input(json.dumps({"order_id": "o_1"}), state={"note": "ok"})
    marker = "@@"
    if field == "message":
        body["messages"][0]["content"] = marker
    elif field == "state":
        body["state"]["note"] = marker
    else:
        body[field] = marker
    raw = json.dumps(body).replace(marker, "\\udc80")  # half a surrogate pair: valid JSON, not valid Unicode
    response = await http.post("/agents/refund/ag-ui", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400 and "surrogate" in response.json()["error"]["message"], response.text
    assert (await http.app.engine.list()).runs == []  # type: ignore[attr-defined]
