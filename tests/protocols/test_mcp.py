"""``POST /mcp``: the official MCP client and the MCP Inspector's CLI drive agents as tools.

The happy paths run against a real uvicorn process; the error cases run in-process, through
the same official client over an ASGI transport, or as raw JSON-RPC where HTTP itself is
what is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
import pytest
from starlette.requests import Request

from agent_unit import create_agent_unit
from agent_unit.errors import Unauthorized
from agent_unit.http.mcp import RESUME_TOOL, tool_input_schema

from ..support import fetch
from ..support.mcp_agents import AGENTS
from ..support.server import Server

# The official MCP client is imported by the tests that use it, not here: it costs ~0.4 s of CPU,
# which every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"  # pinned: a bare install picks an old 0.x on Node 20
JSON_RPC = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("mcp") / "runs.db"
    running = Server(f"sqlite:///{store}", env={"TEST_AGENTS": "tests.support.mcp_agents:AGENTS"}).start()
    yield running
    running.stop()


@contextlib.asynccontextmanager
async def in_process(app: Any, mode: str = "auto", **headers: str) -> AsyncIterator[Client]:
    """The official client, talking to ``app`` in this process."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://unit", headers=headers)
    async with http, Client(streamable_http_client("http://unit/mcp", http_client=http), mode=mode) as client:
        yield client


@pytest.fixture
async def app() -> AsyncIterator[Any]:
    unit = create_agent_unit(AGENTS, store="memory://")
    yield unit
    await unit.engine.aclose()


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


# -- the official client against a real server ------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026-07-28 per-request era, and the handshake era
async def test_the_official_client_lists_calls_pauses_and_resumes(server: Server, mode: str) -> None:
    from mcp import Client

    async with Client(f"{server.url}/mcp", mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert sorted(tools) == sorted([*AGENTS, RESUME_TOOL])
        assert tools["echo"].description.startswith("Repeats a text.")
        assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
        assert tools[RESUME_TOOL].input_schema["required"] == ["run_id", "answer"]

        finished = await client.call_tool("echo", {"text": "hi", "times": 2})
        assert not finished.is_error
        assert finished.structured_content == {"echoed": "hi hi", "length": 5}
        assert json.loads(text(finished)) == {"echoed": "hi hi", "length": 5}

        paused = await client.call_tool("refund", {"order_id": "o_1"})
        assert not paused.is_error
        pending = paused.structured_content
        assert pending["status"] == "interrupted"
        assert pending["interrupt"]["name"] == "approve-refund"
        assert pending["interrupt"]["payload"] == {"id": "o_1", "amount": 42}
        assert pending["interrupt"]["answer_schema"]["required"] == ["approved"]
        assert RESUME_TOOL in text(paused) and pending["run_id"] in text(paused)

        done = await client.call_tool(RESUME_TOOL, {"run_id": pending["run_id"], "answer": {"approved": True}})
        assert not done.is_error and text(done) == "refunded"
        assert done.meta is not None and done.meta["agent-unit/run_id"] == pending["run_id"]

    async with fetch.AsyncClient(base_url=server.url) as http:
        record = (await http.get(f"/runs/{pending['run_id']}")).json()
    assert record["status"] == "completed" and record["output"] == "refunded"


async def test_a_run_paused_over_mcp_resumes_from_a_restarted_server(server: Server) -> None:
    from mcp import Client

    async with Client(f"{server.url}/mcp") as client:
        paused = await client.call_tool("refund", {"order_id": "o_2"})
    server.restart()  # stateless: the run id is all a client needs, in any process
    async with Client(f"{server.url}/mcp") as client:
        answer = {"approved": False, "note": "too late"}
        done = await client.call_tool(RESUME_TOOL, {"run_id": paused.structured_content["run_id"], "answer": answer})
    assert text(done) == "declined: too late"


# -- the MCP Inspector's CLI -------------------------------------------------------------


@pytest.fixture(scope="module")
def inspector(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the pinned Inspector installed, kept in pytest's cache between sessions."""
    if shutil.which("npx") is None or shutil.which("npm") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("npx is missing: CI must run the MCP Inspector test (install Node.js)")
        pytest.skip("npx is missing: the MCP Inspector test needs Node.js")
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("mcp-inspector-2.12.0") if cache is not None else tmp_path_factory.mktemp("inspector")
    installed = folder / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != "2.12.0":
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), INSPECTOR],
            check=True,
            capture_output=True,
            timeout=180,
        )
    return Path(folder)


def run_inspector(folder: Path, url: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "MCP_CATALOG_PATH": str(folder / "catalog.json")}  # never the user's own catalog
    done = subprocess.run(
        ["npx", "-y", INSPECTOR, "--cli", url, *args],
        cwd=folder,  # npx finds the pinned install here: no download per call
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_mcp_inspector_cli_lists_and_calls_tools(server: Server, inspector: Path) -> None:
    url = f"{server.url}/mcp"
    listed = run_inspector(inspector, url, "--method", "tools/list")
    assert sorted(tool["name"] for tool in listed["tools"]) == sorted([*AGENTS, RESUME_TOOL])

    called = run_inspector(inspector, url, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hey")
    assert called["isError"] is False and called["structuredContent"] == {"echoed": "hey", "length": 3}

    paused = run_inspector(
        inspector, url, "--method", "tools/call", "--tool-name", "refund", "--tool-arg", "order_id=o_3"
    )
    run_id = paused["structuredContent"]["run_id"]
    answer = json.dumps({"approved": True})
    done = run_inspector(
        inspector, url, "--method", "tools/call", "--tool-name", RESUME_TOOL, "--tool-arg", f"run_id={run_id}",
        f"answer={answer}",
    )  # fmt: skip
    assert done["isError"] is False and done["content"][0]["text"] == "refunded"


# -- results and errors, in-process -----------------------------------------------------


async def test_a_non_object_input_is_wrapped_and_unwrapped(app: Any) -> None:
    async with in_process(app) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["double"].input_schema == {
            "type": "object",
            "properties": {"input": {"type": "integer"}},
            "required": ["input"],
            "additionalProperties": False,
        }
        doubled = await client.call_tool("double", {"input": 21})
        assert text(doubled) == "42" and doubled.structured_content is None  # an object only

        assert "required" not in tools["ping"].input_schema  # the agent takes None: input may be left out
        assert text(await client.call_tool("ping", {})) == "pong"

        batch = tools["batch"].input_schema
        assert "$defs" in batch and batch["properties"]["input"]["items"] == {"$ref": "#/$defs/RefundInput"}
        assert text(await client.call_tool("batch", {"input": [{"order_id": "a"}, {"order_id": "b"}]})) == "2"

        extra = await client.call_tool("double", {"input": 1, "twice": True})
        assert extra.is_error and "twice" in text(extra)


def test_a_wrapped_schema_keeps_its_references_resolvable() -> None:
    import jsonschema

    inner = AGENTS["batch"].input_schema
    wrapped, was_wrapped = tool_input_schema(inner)
    assert was_wrapped and "$defs" not in wrapped["properties"]["input"]
    jsonschema.validate({"input": [{"order_id": "a"}]}, wrapped)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"input": [{}]}, wrapped)
    assert tool_input_schema(AGENTS["echo"].input_schema) == (AGENTS["echo"].input_schema, False)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_error_is_a_tool_error(app: Any, mode: str) -> None:
    async with in_process(app, mode) as client:
        bad_input = await client.call_tool("echo", {"times": "often"})
        assert bad_input.is_error and text(bad_input).startswith("invalid_input: ")
        assert bad_input.structured_content["error"]["code"] == "invalid_input"

        failed = await client.call_tool("broken", {})
        assert failed.is_error and "the ledger is closed" in text(failed)
        assert failed.structured_content["status"] == "failed"

        paused = await client.call_tool("refund", {"order_id": "o_1"})
        run_id = paused.structured_content["run_id"]
        wrong = await client.call_tool(RESUME_TOOL, {"run_id": run_id, "answer": {"approved": "maybe"}})
        assert wrong.is_error and wrong.structured_content["error"]["code"] == "invalid_answer"
        assert (await app.engine.get(run_id)).status == "interrupted"  # a wrong answer leaves it parked

        unknown = await client.call_tool(RESUME_TOOL, {"run_id": "run_nope", "answer": True})
        assert unknown.is_error and unknown.structured_content["error"]["code"] == "run_not_found"

        shapeless = await client.call_tool(RESUME_TOOL, {"run_id": run_id})
        assert shapeless.is_error and shapeless.structured_content["error"]["code"] == "invalid_argument"

        assert not (await client.call_tool(RESUME_TOOL, {"run_id": run_id, "answer": {"approved": True}})).is_error
        again = await client.call_tool(RESUME_TOOL, {"run_id": run_id, "answer": {"approved": True}})
        assert again.is_error and again.structured_content["error"]["code"] == "not_interrupted"

        no_tool = await client.call_tool("nope", {})
        assert no_tool.is_error and "tools/list" in text(no_tool)


async def test_concurrent_calls_each_get_their_own_run(app: Any) -> None:
    async with in_process(app) as client:
        results = await asyncio.gather(*(client.call_tool("double", {"input": n}) for n in range(8)))
    assert [text(result) for result in results] == [str(2 * n) for n in range(8)]
    assert len({result.meta["agent-unit/run_id"] for result in results}) == 8


async def test_a_sleeping_run_says_when_it_wakes(app: Any) -> None:
    async with in_process(app) as client:
        sleeping = await client.call_tool("nap", {})
    assert not sleeping.is_error
    assert sleeping.structured_content["status"] == "sleeping" and sleeping.structured_content["wake_at"]


async def test_raw_json_rpc_never_gets_a_server_error(app: Any) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
        answered = await http.post("/mcp", json=call, headers=JSON_RPC)  # stateless: no handshake needed
        assert answered.status_code == 200
        assert answered.headers["content-type"].startswith("application/json")
        assert answered.json()["result"]["isError"] is True

        garbled = await http.post("/mcp", content=b"{not json", headers=JSON_RPC)
        assert garbled.status_code == 400 and garbled.json()["error"]["code"] == -32700

        assert (await http.get("/mcp")).status_code == 405  # POST only: a stateless GET stream never ends


async def test_only_tools_is_declared_and_the_other_capabilities_are_method_not_found(app: Any) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://unit") as http:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
        started = (await http.post("/mcp", json=body, headers=JSON_RPC)).json()["result"]
        assert started["capabilities"] == {"tools": {"listChanged": False}}  # as spec/mcp.md says
        for method, params in [
            ("resources/list", {}),
            ("prompts/list", {}),
            ("logging/setLevel", {"level": "info"}),
            (
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}},
            ),
        ]:
            reply = await http.post(
                "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": method, "params": params}, headers=JSON_RPC
            )
            assert reply.json()["error"]["code"] == -32601, (method, reply.text)


async def test_a_body_over_max_body_bytes_is_refused() -> None:
    unit = create_agent_unit(AGENTS, store="memory://", max_body_bytes=200)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url="http://unit") as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
        call["params"]["arguments"] = {"text": "x" * 500}
        assert (await http.post("/mcp", json=call, headers=JSON_RPC)).status_code == 413
    await unit.engine.aclose()


async def test_authorize_guards_the_endpoint_and_each_run() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def authorize(request: Request, action: str, run: dict[str, Any]) -> bool:
        seen.append((action, run))
        if request.headers.get("authorization") != "Bearer user":
            raise Unauthorized("sign in")
        return run.get("agent") != "broken"

    unit = create_agent_unit(AGENTS, store="memory://", authorize=authorize)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url="http://unit") as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        refused = await http.post("/mcp", json=call, headers=JSON_RPC)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    async with in_process(unit, authorization="Bearer user") as client:
        forbidden = await client.call_tool("broken", {})
        assert forbidden.is_error and forbidden.structured_content["error"]["code"] == "forbidden"
        paused = await client.call_tool("refund", {"order_id": "o_1"})
        run_id = paused.structured_content["run_id"]
        await client.call_tool(RESUME_TOOL, {"run_id": run_id, "answer": {"approved": True}})
    await unit.engine.aclose()
    assert {action for action, _ in seen} == {"mcp", "start", "resume"}  # the REST routes' actions: one policy
    assert ("mcp", {}) in seen  # the endpoint, on every request
    assert ("start", {"agent": "refund", "thread_id": None}) in seen
    resumed = [run for action, run in seen if action == "resume" and run.get("id") == run_id]
    assert resumed and resumed[0]["agent"] == "refund" and resumed[0]["thread_id"]


async def test_an_agent_named_resume_run_is_refused_clearly() -> None:
    unit = create_agent_unit({"resume_run": AGENTS["echo"]}, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url="http://unit") as http:
        response = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=JSON_RPC)
        assert response.status_code == 500 and response.json()["error"]["code"] == "mcp_tool_clash"
        assert "rename the agent" in response.json()["error"]["message"]
        assert (await http.get("/agents")).status_code == 200  # the rest of the API is unaffected
    await unit.engine.aclose()


async def test_without_the_sdk_mcp_answers_501(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == "mcp" or name.startswith("mcp.")] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type] - None makes `import` fail
    unit = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url="http://unit") as http:
        response = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=JSON_RPC)
    await unit.engine.aclose()
    assert response.status_code == 501
    error = response.json()["error"]
    assert error["code"] == "mcp_not_installed" and 'pip install "agent-unit[mcp]"' in error["message"]


async def test_in_a_worker_without_the_sdk_the_501_says_why_and_where_mcp_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == "mcp" or name.startswith("mcp.")] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type] - None makes `import` fail
    monkeypatch.setattr(sys, "platform", "emscripten")  # what Pyodide reports in a Worker
    unit = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url="http://unit") as http:
        response = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=JSON_RPC)
    await unit.engine.aclose()
    assert response.status_code == 501
    message = response.json()["error"]["message"]
    assert "Cloudflare Workers" in message and "rpds-py" in message and "cryptography" in message
    assert "another preset" in message and "pip install" not in message


def test_importing_agent_unit_does_not_import_mcp() -> None:
    code = "import sys, agent_unit, agent_unit.http.app, agent_unit.http.mcp; print('mcp' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "False"


async def test_an_answer_for_an_interrupt_the_run_has_left_is_refused() -> None:
    unit = create_agent_unit(AGENTS, store="memory://")
    async with in_process(unit) as client:
        paused = await client.call_tool("refund", {"order_id": "o_1"})
        run_id, key = paused.structured_content["run_id"], paused.structured_content["interrupt"]["key"]
        stale = await client.call_tool(
            RESUME_TOOL, {"run_id": run_id, "answer": {"approved": True}, "interrupt": key + "-gone"}
        )
        assert stale.is_error and stale.structured_content["error"]["code"] == "conflict"
        done = await client.call_tool(RESUME_TOOL, {"run_id": run_id, "answer": {"approved": True}, "interrupt": key})
        assert not done.is_error  # it finished: the output, not an error
    await unit.engine.aclose()


async def test_a_page_from_a_foreign_origin_is_refused_and_allowed_ones_are_served() -> None:
    unit = create_agent_unit(
        AGENTS,
        store="memory://",
        public_url="https://agents.example.com/api",
        allowed_origins=["https://app.example.com", "http://tools.example.com:8080"],
    )
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "refund", "arguments": {"order_id": "o"}},
    }
    # sent to the deployment's own name: a Host it does not list is refused before any Origin is read
    own = "https://agents.example.com"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=unit), base_url=own) as http:
        for origin in [
            "https://evil.example",
            "null",
            "http://agents.example.com",
            "https://app.example.com.evil.example",
        ]:
            refused = await http.post("/mcp", json=call, headers={**JSON_RPC, "origin": origin})
            assert refused.status_code == 403, origin
            assert refused.json()["error"]["code"] == "forbidden_origin" and "allowed_origins" in refused.text
        assert (await unit.engine.list()).runs == []  # nothing ran
        for origin in [
            None,  # not a browser: a load balancer, an SDK, curl
            "http://localhost:5173",
            "http://127.0.0.1:3000",
            "https://agents.example.com",  # the deployment's own page
            "https://app.example.com",
            "http://tools.example.com:8080",
        ]:
            headers = JSON_RPC if origin is None else {**JSON_RPC, "origin": origin}
            served = await http.post("/mcp", json=call, headers=headers)
            assert served.status_code == 200 and served.json()["result"]["structuredContent"]["status"] == "interrupted"
    await unit.engine.aclose()


def test_an_allowed_origin_that_is_not_an_origin_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="allowed_origins"):
        create_agent_unit(AGENTS, store="memory://", allowed_origins=["https://app.example.com/path"])


async def test_a_tool_call_the_hook_refuses_says_nothing_of_which_tools_or_runs_exist() -> None:
    def endpoint_only(request: Request, action: str, run: dict[str, Any]) -> bool:
        return action == "mcp"  # may reach /mcp, may start or resume nothing

    unit = create_agent_unit(AGENTS, store="memory://", authorize=endpoint_only)
    async with in_process(unit) as client:
        for name, arguments in [
            ("refund", {"order_id": "o_1"}),
            ("nope", {}),  # no such tool
            ("refund", {"unknown": 1}),  # arguments that do not fit
            (RESUME_TOOL, {"run_id": "run_missing", "answer": True}),
            (RESUME_TOOL, {"answer": True}),  # no run_id at all
            (RESUME_TOOL, {"run_id": "run_missing", "stray": 1}),
        ]:
            result = await client.call_tool(name, arguments)
            assert result.is_error and result.structured_content["error"]["code"] == "forbidden", (name, arguments)
    assert (await unit.engine.list()).runs == []
    await unit.engine.aclose()
