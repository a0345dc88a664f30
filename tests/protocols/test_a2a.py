"""A2A: the card and ``POST /a2a``, checked with a2a-sdk's own types and driven by its own client.

The durable path runs against a real uvicorn process over SQLite, restarted between a task's
pause and its answer; the error cases run in process (httpx over ASGI).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from agent_unit import create_agent_unit

from ..support import fetch
from ..support.a2a_agents import AGENTS, echo
from ..support.server import Server

# a2a-sdk is imported by the helpers and tests that use it, not here: it costs ~0.25 s of CPU, which
# every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from a2a.client.base_client import BaseClient
    from a2a.types import AgentCard, Message, Part, StreamResponse, Task

URL = "http://unit"
LEGACY_CARD_FIELDS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"}  # A2A 0.3's


# -- helpers ---------------------------------------------------------------------------------


def message(*parts: Part, skill: str | None = None, task_id: str = "", context_id: str = "") -> Message:
    """A user's message, as an A2A client builds it."""
    from a2a.types import Message, Role

    built = Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, context_id=context_id, parts=list(parts)
    )
    if skill is not None:
        built.metadata.update({"skill": skill})
    return built


def text(value: str) -> Part:
    from a2a.types import Part

    return Part(text=value)


def data(value: Any) -> Part:
    from a2a.types import Part
    from google.protobuf.json_format import ParseDict

    return ParseDict({"data": value}, Part())


async def send(client: BaseClient, msg: Message, **configuration: Any) -> list[StreamResponse]:
    from a2a.types import SendMessageConfiguration, SendMessageRequest

    request = SendMessageRequest(message=msg, configuration=SendMessageConfiguration(**configuration))
    return [event async for event in client.send_message(request)]


def only_task(events: list[StreamResponse]) -> Task:
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


def output_of(found: Task) -> Any:
    """The output artifact's one part, as JSON."""
    from google.protobuf.json_format import MessageToDict

    [artifact] = found.artifacts
    assert artifact.artifact_id == "output"
    [part] = MessageToDict(artifact)["parts"]
    return part.get("text", part.get("data"))


def interrupt_of(found: Task) -> dict[str, Any]:
    """What an input-required task waits for: its status message's data part."""
    from google.protobuf.json_format import MessageToDict

    parts = MessageToDict(found.status.message)["parts"]
    return next(part["data"] for part in parts if "data" in part)


@contextlib.asynccontextmanager
async def a2a_client(
    base_url: str, *, streaming: bool = False, http: httpx.AsyncClient | None = None
) -> AsyncIterator[tuple[BaseClient, AgentCard]]:
    """a2a-sdk's client for the agent at ``base_url``: the card resolved, the transport chosen from it."""
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.client.base_client import BaseClient

    async with contextlib.AsyncExitStack() as stack:
        if http is None:
            http = await stack.enter_async_context(fetch.AsyncClient(timeout=30))
        card = await A2ACardResolver(http, base_url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)
        assert isinstance(client, BaseClient)
        yield client, card


def v03_client(http: httpx.AsyncClient, card: AgentCard, *, streaming: bool = False) -> BaseClient:
    """a2a-sdk's A2A 0.3 client (the JSON-RPC method names of older clients) on the card's 0.3 interface."""
    from a2a.client import ClientConfig
    from a2a.client.base_client import BaseClient
    from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport

    [interface] = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
    transport = CompatJsonRpcTransport(http, card, interface.url, is_shared_httpx=True)
    return BaseClient(card, ClientConfig(httpx_client=http, streaming=streaming), transport, [])


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_unit(AGENTS, store="memory://", public_url=URL)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as client:
        client.app = app  # type: ignore[attr-defined]
        yield client
    await app.engine.aclose()


async def rpc(http: httpx.AsyncClient, method: str, params: Any = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, **({"params": params} if params is not None else {})}
    response = await http.post("/a2a", json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def user(*parts: dict[str, Any], skill: str | None = "echo", **fields: Any) -> dict[str, Any]:
    """A 1.0 message as JSON."""
    msg = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": list(parts), **fields}
    if skill is not None:
        msg["metadata"] = {"skill": skill}
    return msg


def user03(*parts: dict[str, Any], skill: str | None = "echo", **fields: Any) -> dict[str, Any]:
    """A 0.3 message as JSON."""
    msg = {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user", "parts": list(parts), **fields}
    if skill is not None:
        msg["metadata"] = {"skill": skill}
    return msg


def strict(payload: dict[str, Any], proto: Any) -> Any:
    """Parse 1.0 JSON with a2a-sdk's protobuf types, refusing any field they do not define."""
    from google.protobuf.json_format import ParseDict

    return ParseDict(payload, proto)


def same_v03(payload: dict[str, Any], model: Any) -> None:
    """0.3 JSON that a2a-sdk's 0.3 models read and write back unchanged: no stray or misnamed field."""
    assert model.model_validate(payload).model_dump(mode="json", by_alias=True, exclude_none=True) == payload


# -- the card --------------------------------------------------------------------------------


async def test_card_at_both_paths_is_a_valid_card_with_one_skill_per_agent(http: httpx.AsyncClient) -> None:
    from a2a.client.card_resolver import parse_agent_card
    from a2a.compat.v0_3 import types as v03
    from a2a.types import AgentCard
    from google.protobuf.json_format import MessageToDict

    current = (await http.get("/.well-known/agent-card.json")).json()
    older = (await http.get("/.well-known/agent.json")).json()
    assert current == older
    card = parse_agent_card(json.loads(json.dumps(current)))  # a2a-sdk's own reading of a card
    assert [skill.id for skill in card.skills] == sorted(AGENTS)
    assert {skill.id: skill.description for skill in card.skills}["echo"] == "Echoes a text back."
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (f"{URL}/a2a", "JSONRPC", "1.0"),
        (f"{URL}/a2a", "JSONRPC", "0.3"),
    ]
    assert card.capabilities.streaming is True and card.capabilities.push_notifications is False
    strict({k: v for k, v in current.items() if k not in LEGACY_CARD_FIELDS}, AgentCard())  # no stray 1.0 field
    extension, links = card.capabilities.extensions
    schemas = MessageToDict(extension.params)["skills"]
    assert links.uri == "urn:agent-unit:a2a:agent-cards:v1"
    assert MessageToDict(links.params)["agents"]["echo"] == {
        "url": f"{URL}/agents/echo/a2a",
        "agentCard": f"{URL}/agents/echo/.well-known/agent-card.json",
    }
    assert schemas["refund"]["inputSchema"]["required"] == ["order_id"]
    assert schemas["count"]["inputSchema"] == {"type": "integer"}
    legacy = v03.AgentCard.model_validate(current)  # what an A2A 0.3 client reads
    assert legacy.url == f"{URL}/a2a" and legacy.preferred_transport == "JSONRPC"
    assert [skill.id for skill in legacy.skills] == sorted(AGENTS) and legacy.capabilities.streaming is True


async def test_each_agent_of_a_two_agent_deployment_has_its_own_card_and_endpoint_for_a_generic_client() -> None:
    from a2a.types import GetTaskRequest, ListTasksRequest, TaskNotFoundError, TaskState

    app = create_agent_unit({"echo": echo, "count": AGENTS["count"]}, store="memory://", public_url=URL)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http:
        deployment = (await http.get("/.well-known/agent-card.json")).json()
        [links] = [e for e in deployment["capabilities"]["extensions"] if e["uri"].endswith("agent-cards:v1")]
        card_url = links["params"]["agents"]["count"]["agentCard"]
        assert card_url == f"{URL}/agents/count/.well-known/agent-card.json"
        base = card_url.removesuffix("/.well-known/agent-card.json")
        async with a2a_client(base, http=http) as (client, card):  # A2A only: no skill, no agent-unit knowledge
            assert card.name == "count" and [skill.id for skill in card.skills] == ["count"]
            assert {i.url for i in card.supported_interfaces} == {f"{URL}/agents/count/a2a"}
            done = only_task(await send(client, message(text("41"))))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED and output_of(done) == 42
            assert (await client.get_task(GetTaskRequest(id=done.id))).id == done.id
            assert [found.id for found in (await client.list_tasks(ListTasksRequest())).tasks] == [done.id]
            echoed = (await rpc(http, "SendMessage", {"message": user({"text": "hi"})}))["result"]["task"]
            with pytest.raises(TaskNotFoundError):  # another agent's task is not this endpoint's
                await client.get_task(GetTaskRequest(id=echoed["id"]))
            assert [found.id for found in (await client.list_tasks(ListTasksRequest())).tasks] == [done.id]
        # the same card under the endpoint's own path, where a client given only the endpoint looks
        assert (await http.get("/agents/count/a2a/.well-known/agent-card.json")).json()["name"] == "count"
        assert (await http.get("/a2a/.well-known/agent-card.json")).json() == deployment
        other_skill = await http.post("/agents/count/a2a", json=call("SendMessage", {"message": user({"text": "1"})}))
        assert (
            other_skill.json()["error"]["code"] == -32602
            and "/agents/echo/a2a" in other_skill.json()["error"]["message"]
        )
        no_skill = await rpc(http, "SendMessage", {"message": user({"text": "1"}, skill=None)})
        assert "/agents/{name}/a2a" in no_skill["error"]["message"]
        missing = await http.post("/agents/nope/a2a", json=call("GetTask", {"id": "run_x"}))
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "agent_not_found"
        assert (await http.get("/agents/nope/.well-known/agent-card.json")).status_code == 404
    await app.engine.aclose()


async def test_the_configured_default_agent_takes_a_new_task_without_a_skill_on_the_deployment_endpoint() -> None:
    app = create_agent_unit(
        {"echo": echo, "count": AGENTS["count"]}, store="memory://", public_url=URL, a2a_default_agent="count"
    )
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
        a2a_client(URL, http=http) as (client, _),
    ):
        done = only_task(await send(client, message(text("1"))))
        assert output_of(done) == 2
        assert output_of(only_task(await send(client, message(text("hi"), skill="echo")))) == "echo: HI"
    await app.engine.aclose()
    with pytest.raises(ValueError, match="a2a_default_agent 'nope' is not an agent: the agents are count, echo"):
        create_agent_unit({"echo": echo, "count": AGENTS["count"]}, store="memory://", a2a_default_agent="nope")


async def test_the_card_never_takes_its_url_from_the_host_header(http: httpx.AsyncClient) -> None:
    # an address is never a rebinding, so it is answered: with the configured URL all the same
    card = (await http.get("/.well-known/agent-card.json", headers={"host": "10.0.0.7:8080"})).json()
    assert {i["url"] for i in card["supportedInterfaces"]} == {f"{URL}/a2a"} and card["url"] == f"{URL}/a2a"
    foreign = await http.get("/.well-known/agent-card.json", headers={"host": "evil.example"})
    assert foreign.status_code == 421 and foreign.json()["error"]["code"] == "forbidden_host"


async def test_without_a_public_url_the_card_is_a_503_that_tells_the_operator_what_to_set() -> None:
    app = create_agent_unit(AGENTS, store="memory://")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http:
        response = await http.get("/.well-known/agent-card.json")
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "public_url_missing" and "AGENT_UNIT_URL" in error["message"]
        # The endpoint itself needs no URL.
        reply = await rpc(http, "SendMessage", {"message": user({"text": "hi"})})
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    await app.engine.aclose()


@pytest.mark.parametrize(
    ("public_url", "base_path", "mount", "card_path", "endpoint"),
    [
        ("https://a.example", "/api/agents", "", "/api/agents", "https://a.example/api/agents/a2a"),
        ("https://a.example/api/agents", "/api/agents", "", "/api/agents", "https://a.example/api/agents/a2a"),
        ("https://a.example", "/", "/agents", "/agents", "https://a.example/agents/a2a"),
    ],
)
async def test_the_endpoint_url_follows_where_the_app_is_mounted(
    public_url: str, base_path: str, mount: str, card_path: str, endpoint: str
) -> None:
    unit = create_agent_unit(AGENTS, store="memory://", public_url=public_url, base_path=base_path)
    app: Any = Starlette(routes=[Mount(mount, app=unit)]) if mount else unit
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://a.example") as http:
        card = (await http.get(f"{card_path}/.well-known/agent-card.json")).json()
        assert card["supportedInterfaces"][0]["url"] == endpoint
        reply = (await http.post(f"{card_path}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})).json()
        assert reply["error"]["code"] == -32602
    await unit.engine.aclose()


# -- a real server, restarted between a pause and its answer ---------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(f"sqlite:///{tmp_path / 'runs.db'}", env={"TEST_AGENTS": "tests.support.a2a_agents:AGENTS"})
    running.start()
    yield running
    running.stop()


async def test_sdk_client_finishes_a_task_and_answers_one_across_a_restart(server: Server) -> None:
    from a2a.types import GetTaskRequest, InvalidParamsError, Role, TaskState, UnsupportedOperationError

    async with a2a_client(server.url) as (client, card):
        assert card.supported_interfaces[0].url == f"{server.url}/a2a"
        done = only_task(await send(client, message(text("hello"), skill="echo")))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED and output_of(done) == "echo: HELLO"

        parked = only_task(await send(client, message(data({"order_id": "o_1"}), skill="refund")))
        assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert parked.status.message.role == Role.ROLE_AGENT
        asked = interrupt_of(parked)
        assert asked["interrupt"] == "approve-refund" and asked["payload"] == {"id": "o_1", "amount": 42}
        assert asked["answerSchema"]["required"] == ["approved"]

    server.restart()  # a new process over the same SQLite file: nothing of the task was in memory

    async with a2a_client(server.url) as (client, _):
        again = await client.get_task(GetTaskRequest(id=parked.id))
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and again.context_id == parked.context_id
        with pytest.raises(InvalidParamsError, match="approved"):  # an answer that does not fit: still parked
            await send(client, message(data({"approved": "maybe"}), task_id=parked.id))
        assert (await client.get_task(GetTaskRequest(id=parked.id))).status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answered = only_task(await send(client, message(text('{"approved": true}'), task_id=parked.id)))
        assert answered.id == parked.id and answered.context_id == parked.context_id
        assert answered.status.state == TaskState.TASK_STATE_COMPLETED
        assert output_of(answered) == {"order_id": "o_1", "status": "refunded"}
        with pytest.raises(UnsupportedOperationError, match="terminal"):
            await send(client, message(text('{"approved": true}'), task_id=parked.id))


async def test_sdk_client_streams_a_task_to_its_pause_and_from_its_answer_across_a_restart(server: Server) -> None:
    from a2a.types import GetTaskRequest, TaskState
    from google.protobuf.json_format import MessageToDict

    async with a2a_client(server.url, streaming=True) as (client, card):
        assert card.capabilities.streaming
        events = await send(client, message(data({"order_id": "o_2"}), skill="refund"))
        assert events[0].HasField("task") and events[0].task.status.state == TaskState.TASK_STATE_WORKING
        run_id = events[0].task.id
        updates = [event.status_update for event in events[1:]]
        assert all(update.task_id == run_id for update in updates)
        assert [MessageToDict(u.metadata)["agUiEvent"]["type"] for u in updates] == [
            "RUN_STARTED",
            "STEP_STARTED",
            "STEP_FINISHED",
            "RUN_INTERRUPTED",
        ]
        assert updates[-1].status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert {u.status.state for u in updates[:-1]} == {TaskState.TASK_STATE_WORKING}

    server.restart()

    async with a2a_client(server.url, streaming=True) as (client, _):
        events = await send(client, message(data({"approved": False}), task_id=run_id))
        assert events[0].task.id == run_id and events[0].task.status.state == TaskState.TASK_STATE_WORKING
        [artifact] = [event.artifact_update for event in events if event.HasField("artifact_update")]
        assert MessageToDict(artifact.artifact)["parts"][0]["data"] == {"order_id": "o_2", "status": "declined"}
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        finished = await client.get_task(GetTaskRequest(id=run_id))
        assert output_of(finished) == {"order_id": "o_2", "status": "declined"}


# -- in process: the methods ------------------------------------------------------------------


async def test_get_and_cancel_tasks_with_the_sdk_client(http: httpx.AsyncClient) -> None:
    from a2a.types import CancelTaskRequest, GetTaskRequest, TaskNotCancelableError, TaskNotFoundError, TaskState

    async with a2a_client(URL, http=http) as (client, _):
        parked = only_task(await send(client, message(data({"order_id": "o_3"}), skill="refund")))
        canceled = await client.cancel_task(CancelTaskRequest(id=parked.id))
        assert canceled.id == parked.id and canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert (await client.get_task(GetTaskRequest(id=parked.id))).status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=parked.id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="run_nope"))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id="run_nope"))
        with pytest.raises(TaskNotFoundError):
            await send(client, message(text("hi"), task_id="run_nope"))


async def test_list_tasks_pages_the_run_list_with_the_filters_a2a_defines(http: httpx.AsyncClient) -> None:
    from a2a.types import InvalidParamsError, ListTasksRequest, ListTasksResponse, TaskState

    async with a2a_client(URL, http=http) as (client, _):
        first = only_task(await send(client, message(text("a"), skill="echo")))
        parked = only_task(
            await send(client, message(data({"order_id": "o"}), skill="refund", context_id=first.context_id))
        )
        other = only_task(await send(client, message(text("b"), skill="echo")))
        everything = await client.list_tasks(ListTasksRequest())
        assert [found.id for found in everything.tasks] == [other.id, parked.id, first.id]  # newest first
        assert everything.total_size == 3 and everything.next_page_token == "" and everything.page_size == 3
        assert not any(found.artifacts for found in everything.tasks)  # omitted unless includeArtifacts
        with_output = await client.list_tasks(ListTasksRequest(include_artifacts=True, context_id=first.context_id))
        assert [found.id for found in with_output.tasks] == [parked.id, first.id]
        assert output_of(with_output.tasks[1]) == "echo: A"
        waiting = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_INPUT_REQUIRED))
        assert [found.id for found in waiting.tasks] == [parked.id] and waiting.total_size == 1
        done = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED, page_size=1))
        assert [found.id for found in done.tasks] == [other.id] and done.total_size == 2 and done.next_page_token
        rest = await client.list_tasks(
            ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED, page_size=1, page_token=done.next_page_token)
        )
        assert [found.id for found in rest.tasks] == [first.id] and rest.next_page_token == ""
        assert not (await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))).tasks
        with pytest.raises(InvalidParamsError):
            await client.list_tasks(ListTasksRequest(page_size=500))
    strict((await rpc(http, "ListTasks", {"includeArtifacts": True}))["result"], ListTasksResponse())


async def test_a_task_keeps_its_messages_and_history_length_reads_the_latest(http: httpx.AsyncClient) -> None:
    from a2a.types import GetTaskRequest, ListTasksRequest, Role, TaskState
    from google.protobuf.json_format import MessageToDict

    async with a2a_client(URL, http=http) as (client, _):
        asked = only_task(await send(client, message(data({"order_id": "o_7"}), skill="refund")))
        answer = message(data({"approved": True}), task_id=asked.id, context_id=asked.context_id)
        done = only_task(await send(client, answer))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        whole = await client.get_task(GetTaskRequest(id=asked.id))
        latest = await client.get_task(GetTaskRequest(id=asked.id, history_length=1))
        none = await client.get_task(GetTaskRequest(id=asked.id, history_length=0))
        listed = await client.list_tasks(ListTasksRequest(history_length=2))
    said = [(m.role, MessageToDict(m)["parts"]) for m in whole.history]
    assert said == [
        (Role.ROLE_USER, [{"data": {"order_id": "o_7"}, "mediaType": "application/json"}]),
        (Role.ROLE_AGENT, MessageToDict(asked.status.message)["parts"]),  # what the paused task asked
        (Role.ROLE_USER, [{"data": {"approved": True}, "mediaType": "application/json"}]),
    ]
    assert whole.history[1].message_id == asked.status.message.message_id
    assert list(latest.history) == list(whole.history)[-1:] and not none.history
    assert [len(found.history) for found in listed.tasks] == [2]
    # the paused task's request is its status message, not yet history; 0.3 names the roles its way
    asked_v03 = (await rpc(http, "tasks/get", {"id": asked.id}))["result"]
    assert [m["role"] for m in asked_v03["history"]] == ["user", "agent", "user"]


async def test_the_pending_request_of_a_paused_task_is_its_status_message_not_its_history(
    http: httpx.AsyncClient,
) -> None:
    from a2a.types import GetTaskRequest, Role

    async with a2a_client(URL, http=http) as (client, _):
        asked = only_task(await send(client, message(data({"order_id": "o_8"}), skill="refund")))
        found = await client.get_task(GetTaskRequest(id=asked.id))
    assert [m.role for m in found.history] == [Role.ROLE_USER] and found.status.message.message_id


async def test_list_tasks_puts_the_last_updated_task_first_and_pages_in_that_order(http: httpx.AsyncClient) -> None:
    from a2a.types import ListTasksRequest

    async with a2a_client(URL, http=http) as (client, _):
        parked = only_task(await send(client, message(data({"order_id": "o"}), skill="refund")))
        later = only_task(await send(client, message(text("b"), skill="echo")))
        answer = message(data({"approved": False}), task_id=parked.id, context_id=parked.context_id)
        only_task(await send(client, answer))  # the older task is updated last
        everything = await client.list_tasks(ListTasksRequest())
        first = await client.list_tasks(ListTasksRequest(page_size=1))
        rest = await client.list_tasks(ListTasksRequest(page_size=1, page_token=first.next_page_token))
    assert [found.id for found in everything.tasks] == [parked.id, later.id]
    assert [found.id for found in first.tasks] == [parked.id] and first.next_page_token
    assert [found.id for found in rest.tasks] == [later.id] and rest.next_page_token == ""


async def test_list_tasks_is_authorized_like_the_run_list() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def authorize(request: Request, action: str, run: dict[str, Any]) -> bool:
        seen.append((action, run))
        return request.headers.get("x-user") != "mallory"

    app = create_agent_unit(AGENTS, store="memory://", public_url=URL, authorize=authorize)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http:
        listed = await rpc(http, "ListTasks", {"contextId": "thread_1"})
        assert listed["result"] == {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}
        refused = await http.post("/a2a", json=call("ListTasks", {"pageSize": 500}), headers={"x-user": "mallory"})
        assert refused.status_code == 403
    await app.engine.aclose()
    assert seen[0] == ("list", {"agent": None, "thread_id": "thread_1"})


async def test_return_immediately_then_subscribe_to_the_task(http: httpx.AsyncClient) -> None:
    from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState, UnsupportedOperationError

    async with a2a_client(URL, http=http) as (client, _):
        started = only_task(await send(client, message(text("hi"), skill="echo"), return_immediately=True))
        assert started.status.state == TaskState.TASK_STATE_WORKING
        await http.app.engine.wait(started.id)  # type: ignore[attr-defined]
        assert output_of(await client.get_task(GetTaskRequest(id=started.id))) == "echo: HI"
        working = only_task(
            await send(client, message(data({"order_id": "o_4"}), skill="refund"), return_immediately=True)
        )
    async with a2a_client(URL, http=http, streaming=True) as (client, _):
        events = [event async for event in client.subscribe(SubscribeToTaskRequest(id=working.id))]
        assert events[0].HasField("task") and events[0].task.id == working.id
        last = events[-1].task.status if len(events) == 1 else events[-1].status_update.status
        assert last.state == TaskState.TASK_STATE_INPUT_REQUIRED  # followed until it asked for input
        again = [event async for event in client.subscribe(SubscribeToTaskRequest(id=working.id))]
        assert len(again) == 1 and again[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        with pytest.raises(UnsupportedOperationError, match="terminal"):
            _ = [event async for event in client.subscribe(SubscribeToTaskRequest(id=started.id))]


async def test_failed_sleeping_and_thread_continued_tasks(http: httpx.AsyncClient) -> None:
    from a2a.types import TaskState
    from google.protobuf.json_format import MessageToDict

    async with a2a_client(URL, http=http) as (client, _):
        failed = only_task(await send(client, message(text("x"), skill="broken")))
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        assert "cannot handle 'x'" in failed.status.message.parts[0].text
        sleeping = only_task(await send(client, message(text("x"), skill="nap")))
        assert sleeping.status.state == TaskState.TASK_STATE_WORKING
        meta = MessageToDict(sleeping.metadata)["agentUnit"]
        assert meta["status"] == "sleeping" and meta["wakeAt"].endswith("Z")
        first = only_task(await send(client, message(text("one"), skill="echo")))
        second = only_task(await send(client, message(text("two"), skill="echo", context_id=first.context_id)))
        assert second.context_id == first.context_id and second.id != first.id


async def test_text_is_the_string_input_or_the_json_of_it(http: httpx.AsyncClient) -> None:
    from a2a.types import InvalidParamsError, TaskState

    async with a2a_client(URL, http=http) as (client, _):
        as_string = only_task(await send(client, message(text('{"a": 1}'), skill="echo")))
        assert output_of(as_string) == 'echo: {"A": 1}'  # echo takes a string: the text as it is
        as_number = only_task(await send(client, message(text("41"), skill="count")))
        assert output_of(as_number) == 42
        as_object = only_task(await send(client, message(text('{"order_id": "o_5"}'), skill="refund")))
        assert as_object.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        with pytest.raises(InvalidParamsError, match="valid dictionary"):
            await send(client, message(text("not json"), skill="refund"))


async def test_the_only_agent_needs_no_skill() -> None:
    app = create_agent_unit({"echo": echo}, store="memory://", public_url=URL)
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http,
        a2a_client(URL, http=http) as (client, card),
    ):
        assert card.description == "Echoes a text back." and [s.id for s in card.skills] == ["echo"]
        assert output_of(only_task(await send(client, message(text("solo"))))) == "echo: SOLO"
    await app.engine.aclose()


async def test_older_clients_speak_a2a_0_3_on_the_same_endpoint(http: httpx.AsyncClient) -> None:
    from a2a.types import CancelTaskRequest, GetTaskRequest, TaskNotCancelableError, TaskState

    async with a2a_client(URL, http=http) as (_, card):
        for streaming in (False, True):
            client = v03_client(http, card, streaming=streaming)
            events = await send(client, message(text('{"order_id": "o_6"}'), skill="refund"))
            run_id = events[0].task.id
            parked = await client.get_task(GetTaskRequest(id=run_id))
            assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert interrupt_of(parked)["interrupt"] == "approve-refund"
            await send(client, message(data({"approved": True}), task_id=run_id))
            done = await client.get_task(GetTaskRequest(id=run_id))
            assert output_of(done) == {"order_id": "o_6", "status": "refunded"}
            counted = await send(client, message(data(41), skill="count"))  # not an object: wrapped the 0.3 way
            assert output_of(await client.get_task(GetTaskRequest(id=counted[0].task.id))) == 42
            parked = only_task(await send(v03_client(http, card), message(data({"order_id": "o_7"}), skill="refund")))
            canceled = await client.cancel_task(CancelTaskRequest(id=parked.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=parked.id))


# -- every shape, checked against a2a-sdk's types ----------------------------------------------


def sse_results(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:])["result"] for line in body.splitlines() if line.startswith("data: ")]


async def stream(http: httpx.AsyncClient, method: str, params: Any) -> list[dict[str, Any]]:
    response = await http.post("/a2a", json={"jsonrpc": "2.0", "id": "s", "method": method, "params": params})
    assert response.headers["content-type"].startswith("text/event-stream")
    return sse_results(response.text)


async def test_every_1_0_result_parses_strictly_with_the_sdk_types(http: httpx.AsyncClient) -> None:
    from a2a.types import SendMessageResponse, StreamResponse, Task, TaskState

    reply = await rpc(http, "SendMessage", {"message": user({"data": {"order_id": "o_8"}}, skill="refund")})
    parked = strict(reply["result"], SendMessageResponse()).task
    assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    strict((await rpc(http, "GetTask", {"id": parked.id}))["result"], Task())
    answer = user({"data": {"approved": True}}, skill=None, taskId=parked.id, contextId=parked.context_id)
    results = [
        strict(result, StreamResponse()) for result in await stream(http, "SendStreamingMessage", {"message": answer})
    ]
    kinds = [result.WhichOneof("payload") for result in results]
    assert kinds == ["task", "status_update", "status_update", "status_update", "artifact_update", "status_update"]
    failed = strict(
        (await rpc(http, "SendMessage", {"message": user({"text": "x"}, skill="broken")}))["result"],
        SendMessageResponse(),
    )
    assert failed.task.status.state == TaskState.TASK_STATE_FAILED
    reply = await rpc(http, "SendMessage", {"message": user({"data": {"order_id": "o_9"}}, skill="refund")})
    canceled = strict((await rpc(http, "CancelTask", {"id": reply["result"]["task"]["id"]}))["result"], Task())
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    subscribed = await stream(
        http,
        "SubscribeToTask",
        {
            "id": (await rpc(http, "SendMessage", {"message": user({"data": {"order_id": "o"}}, skill="refund")}))[
                "result"
            ]["task"]["id"]
        },
    )
    assert [strict(result, StreamResponse()).task.status.state for result in subscribed] == [
        TaskState.TASK_STATE_INPUT_REQUIRED
    ]


async def test_every_0_3_result_reads_and_writes_back_unchanged_with_the_sdk_models(http: httpx.AsyncClient) -> None:
    from a2a.compat.v0_3 import types as v03

    reply = await rpc(
        http, "message/send", {"message": user03({"kind": "data", "data": {"order_id": "o_10"}}, skill="refund")}
    )
    same_v03(reply, v03.SendMessageSuccessResponse)
    parked = reply["result"]
    assert parked["kind"] == "task" and parked["status"]["state"] == "input-required"
    assert parked["status"]["message"]["role"] == "agent"
    same_v03(await rpc(http, "tasks/get", {"id": parked["id"]}), v03.GetTaskSuccessResponse)
    [resubscribed] = await stream(http, "tasks/resubscribe", {"id": parked["id"]})
    same_v03(resubscribed, v03.Task)
    assert resubscribed["status"]["state"] == "input-required"
    answer = user03({"kind": "text", "text": '{"approved": true}'}, skill=None, taskId=parked["id"])
    results = await stream(http, "message/stream", {"message": answer})
    models = {
        "task": v03.Task,
        "status-update": v03.TaskStatusUpdateEvent,
        "artifact-update": v03.TaskArtifactUpdateEvent,
    }
    for result in results:
        same_v03(result, models[result["kind"]])
    assert [r["final"] for r in results if r["kind"] == "status-update"] == [False, False, False, True]
    assert results[-1]["status"]["state"] == "completed"
    counted = (await rpc(http, "message/send", {"message": user03({"kind": "text", "text": "41"}, skill="count")}))[
        "result"
    ]
    assert counted["artifacts"][0]["parts"] == [
        {"kind": "data", "data": {"value": 42}, "metadata": {"data_part_compat": True}}
    ]
    other = (
        await rpc(
            http, "message/send", {"message": user03({"kind": "text", "text": '{"order_id": "o"}'}, skill="refund")}
        )
    )["result"]
    same_v03(await rpc(http, "tasks/cancel", {"id": other["id"]}), v03.CancelTaskSuccessResponse)


# -- errors -------------------------------------------------------------------------------------


def call(method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params is not None else {})}


ERRORS = [
    # (what, the body (text, or JSON), code, words in the message)
    ("not JSON", "{nope", -32700, "not valid JSON"),
    ("a batch", [call("GetTask")], -32600, "batch"),
    ("not an object", 3, -32600, "request object"),
    ("no jsonrpc", {"id": 1, "method": "GetTask", "params": {"id": "x"}}, -32600, "jsonrpc"),
    ("a boolean id", {"jsonrpc": "2.0", "id": True, "method": "GetTask"}, -32600, "id"),
    ("no method", {"jsonrpc": "2.0", "id": 1}, -32600, "method"),
    ("unknown method", call("tasks/explode"), -32601, "tasks/explode"),
    ("params not an object", call("GetTask", [1]), -32602, "params"),
    ("no task id", call("GetTask", {}), -32602, "params.id"),
    ("unknown task", call("GetTask", {"id": "run_x"}), -32001, "run_x"),
    ("no message", call("SendMessage", {}), -32602, "params.message"),
    (
        "an agent's message",
        call("SendMessage", {"message": {**user({"text": "x"}), "role": "ROLE_AGENT"}}),
        -32602,
        "ROLE_USER",
    ),
    ("no parts", call("SendMessage", {"message": user()}), -32602, "parts"),
    (
        "no skill among many",
        call("SendMessage", {"message": user({"text": "x"}, skill=None)}),
        -32602,
        "metadata.skill",
    ),
    (
        "an unknown skill",
        call("SendMessage", {"message": user({"text": "x"}, skill="nope")}),
        -32602,
        "broken, count, echo",
    ),
    ("a file", call("SendMessage", {"message": user({"url": "https://f.example/a.pdf"})}), -32005, "file"),
    (
        "text and data in one part",
        call("SendMessage", {"message": user({"text": "a", "data": 1})}),
        -32602,
        "holds one",
    ),
    (
        "no messageId",
        call(
            "SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": {"skill": "echo"}}}
        ),
        -32602,
        "messageId",
    ),
    ("an empty messageId", call("SendMessage", {"message": user({"text": "x"}, messageId="")}), -32602, "messageId"),
    ("a numeric messageId", call("SendMessage", {"message": user({"text": "x"}, messageId=7)}), -32602, "messageId"),
    (
        "no messageId, streaming",
        call(
            "SendStreamingMessage",
            {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": {"skill": "echo"}}},
        ),
        -32602,
        "messageId",
    ),
    (
        "0.3 no messageId",
        call(
            "message/send", {"message": {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "x"}]}}
        ),
        -32602,
        "messageId",
    ),
    (
        "referenceTaskIds not a list of strings",
        call("SendMessage", {"message": user({"text": "x"}, referenceTaskIds="run_1")}),
        -32602,
        "referenceTaskIds",
    ),
    ("historyLength -1 on GetTask", call("GetTask", {"id": "run_x", "historyLength": -1}), -32602, "historyLength"),
    ("0.3 historyLength -1", call("tasks/get", {"id": "run_x", "historyLength": -1}), -32602, "historyLength"),
    (
        "historyLength -1 on SendMessage",
        call("SendMessage", {"message": user({"text": "x"}), "configuration": {"historyLength": -1}}),
        -32602,
        "historyLength",
    ),
    (
        "historyLength -1 on SendStreamingMessage",
        call("SendStreamingMessage", {"message": user({"text": "x"}), "configuration": {"historyLength": -1}}),
        -32602,
        "historyLength",
    ),
    (
        "input that does not fit",
        call("SendMessage", {"message": user({"data": {}}, skill="refund")}),
        -32602,
        "order_id",
    ),
    (
        "part metadata not an object",
        call("SendMessage", {"message": user({"data": {"order_id": "o"}, "metadata": [1]}, skill="refund")}),
        -32602,
        "parts[0].metadata",
    ),
    (
        "0.3 data part metadata not an object",
        call("message/send", {"message": user03({"kind": "data", "data": {"value": 1}, "metadata": "compat"})}),
        -32602,
        "parts[0].metadata",
    ),
    (
        "a lone surrogate in a text part",
        json.dumps(call("SendMessage", {"message": user({"text": "@"})})).replace("@", "\\ud800"),
        -32700,
        "surrogate",
    ),
    (
        "a lone surrogate in the context id",
        json.dumps(call("SendMessage", {"message": user({"text": "x"}, contextId="@")})).replace("@", "\\udfff"),
        -32700,
        "surrogate",
    ),
    ("push notifications", call("CreateTaskPushNotificationConfig"), -32003, "push"),
    ("extended card", call("GetExtendedAgentCard"), -32007, "extended"),
    ("list tasks, a page of 101", call("ListTasks", {"pageSize": 101}), -32602, "pageSize"),
    ("list tasks, a page of 0", call("ListTasks", {"pageSize": 0}), -32602, "pageSize"),
    ("list tasks, historyLength -1", call("ListTasks", {"historyLength": -1}), -32602, "historyLength"),
    ("list tasks, an unknown state", call("ListTasks", {"status": "running"}), -32602, "TASK_STATE_WORKING"),
    ("list tasks, a made-up page token", call("ListTasks", {"pageToken": "page2"}), -32602, "pageToken"),
    ("list tasks, a bad timestamp", call("ListTasks", {"statusTimestampAfter": "today"}), -32602, "RFC 3339"),
    ("0.3 unknown task", call("tasks/get", {"id": "run_x"}), -32001, "run_x"),
    ("0.3 push notifications", call("tasks/pushNotificationConfig/set"), -32003, "push"),
    ("0.3 a 1.0 role", call("message/send", {"message": user({"text": "x"})}), -32602, "'user'"),
    (
        "0.3 a file",
        call("message/send", {"message": user03({"kind": "file", "file": {"uri": "https://f.example/a"}})}),
        -32005,
        "file",
    ),
]


@pytest.mark.parametrize(("what", "body", "code", "words"), ERRORS, ids=[error[0] for error in ERRORS])
async def test_errors_are_json_rpc_errors_with_a2a_codes(
    http: httpx.AsyncClient, what: str, body: Any, code: int, words: str
) -> None:
    from a2a.compat.v0_3 import types as v03

    content = body if isinstance(body, str) else json.dumps(body)
    response = await http.post("/a2a", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    streamed = "Streaming" in str(body) or "message/stream" in str(body)
    reply = stream_error(response)[1] if streamed else response.json()
    assert reply["jsonrpc"] == "2.0" and "result" not in reply
    assert reply["error"]["code"] == code, reply
    assert words in reply["error"]["message"], reply
    assert "Traceback" not in response.text
    method = body.get("method", "") if isinstance(body, dict) else ""
    if "/" in method:
        same_v03(reply, v03.JSONRPCErrorResponse)
    elif code not in (-32700, -32600):
        assert reply["error"]["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"


def stream_error(response: httpx.Response) -> tuple[str | None, dict[str, Any]]:
    """The one event of a stream that is an error: its SSE event name and its JSON-RPC response."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.headers
    [event] = [chunk for chunk in response.text.split("\n\n") if chunk.strip()]
    fields = dict(line.split(": ", 1) for line in event.split("\n"))
    return fields.get("event"), json.loads(fields["data"])


async def test_a_streaming_call_refused_before_its_stream_starts_is_a_stream_of_that_one_error(
    http: httpx.AsyncClient,
) -> None:
    from a2a.types import InvalidParamsError, SubscribeToTaskRequest, TaskNotFoundError, UnsupportedOperationError

    done = (await rpc(http, "SendMessage", {"message": user({"text": "x"})}))["result"]["task"]
    for method, params, code in [
        ("SendStreamingMessage", {"message": user({"text": "x"}, skill="nope")}, -32602),
        ("SendStreamingMessage", {"message": user({"text": "x"}, skill=None, taskId="run_x")}, -32001),
        ("SubscribeToTask", {"id": "run_x"}, -32001),
        ("SubscribeToTask", {"id": done["id"]}, -32004),  # a terminal task
        ("message/stream", {"message": user03({"kind": "text", "text": "x"}, skill="nope")}, -32602),
        ("tasks/resubscribe", {"id": "run_x"}, -32001),
    ]:
        response = await http.post("/a2a", json=call(method, params), headers={"accept": "text/event-stream"})
        assert response.status_code == 200, method
        event, reply = stream_error(response)
        assert event == ("error" if "/" not in method else None), method  # 0.3 clients read errors from data
        assert reply["error"]["code"] == code and reply["id"] == 1 and "result" not in reply, method
    # not a streaming call yet: a body that is not a request is a plain JSON-RPC error
    garbled = await http.post("/a2a", content=b"{nope", headers={"content-type": "application/json"})
    assert garbled.headers["content-type"] == "application/json" and garbled.json()["error"]["code"] == -32700
    async with a2a_client(URL, http=http, streaming=True) as (client, card):  # each client raises the error's type
        with pytest.raises(TaskNotFoundError):
            [event async for event in client.subscribe(SubscribeToTaskRequest(id="run_x"))]
        with pytest.raises(UnsupportedOperationError):
            [event async for event in client.subscribe(SubscribeToTaskRequest(id=done["id"]))]
        with pytest.raises(InvalidParamsError):
            await send(client, message(text("x"), skill="nope"))
        older = v03_client(http, card, streaming=True)
        with pytest.raises(TaskNotFoundError):
            [event async for event in older.subscribe(SubscribeToTaskRequest(id="run_x"))]


async def test_a_wrong_answer_is_an_error_and_the_task_still_waits(http: httpx.AsyncClient) -> None:
    parked = (await rpc(http, "SendMessage", {"message": user({"data": {"order_id": "o"}}, skill="refund")}))["result"]
    run_id = parked["task"]["id"]
    for answer, words in [
        (user({"data": {"approved": "perhaps"}}, skill=None, taskId=run_id), "approved"),
        (user({"text": "yes"}, skill=None, taskId=run_id), "still waits"),
        (user({"data": {"approved": True}}, skill=None, taskId=run_id, contextId="thread_other"), "context"),
        (user({"data": {"approved": True}}, skill="echo", taskId=run_id), "refund"),
    ]:
        reply = await rpc(http, "SendMessage", {"message": answer})
        assert reply["error"]["code"] == -32602 and words in reply["error"]["message"], reply
    invalid = await rpc(http, "SendMessage", {"message": user({"data": {"approved": 1.5}}, skill=None, taskId=run_id)})
    assert invalid["error"]["data"][1]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert (await rpc(http, "GetTask", {"id": run_id}))["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = (await rpc(http, "SendMessage", {"message": user({"text": "x"})}))["result"]["task"]
    reply = await rpc(http, "SendMessage", {"message": user({"text": "x"}, skill=None, taskId=done["id"])})
    assert reply["error"]["code"] == -32004 and "terminal" in reply["error"]["message"]


async def test_text_and_data_parts_together_reach_the_agent_as_one_value(http: httpx.AsyncClient) -> None:
    both = await rpc(http, "SendMessage", {"message": user({"text": "ship"}, {"data": {"box": 1}}, skill="note")})
    assert both["result"]["task"]["artifacts"][0]["parts"][0]["data"] == {"text": "ship", "data": [{"box": 1}]}
    two = await rpc(http, "SendMessage", {"message": user({"data": 1}, {"data": [2]}, skill="note")})
    assert two["result"]["task"]["artifacts"][0]["parts"][0]["data"] == {"text": "", "data": [1, [2]]}
    # an agent that takes a string (a chat agent's prompt) reads the text, then each data part as JSON
    prompt = await rpc(http, "SendMessage", {"message": user({"text": "a"}, {"data": {"b": 1}})})
    assert prompt["result"]["task"]["artifacts"][0]["parts"][0]["text"] == 'echo: A\n{"B": 1}'
    older = await rpc(
        http,
        "message/send",
        {"message": user03({"kind": "text", "text": "t"}, {"kind": "data", "data": {"x": 1}}, skill="note")},
    )
    assert older["result"]["artifacts"][0]["parts"][0]["data"] == {"text": "t", "data": [{"x": 1}]}


async def test_a_message_to_a_working_task_reaches_the_run_and_its_history(http: httpx.AsyncClient) -> None:
    started = await rpc(http, "SendMessage", {"message": user({"text": "listen"}, skill="listener")})
    task_id = started["result"]["task"]["id"]
    assert started["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    sent = []
    for words in ("hello", {"order": 7}, "stop"):
        part = {"text": words} if isinstance(words, str) else {"data": words}
        message = user(part, skill=None, taskId=task_id)
        reply = await rpc(http, "SendMessage", {"message": message})
        assert reply["result"]["task"]["id"] == task_id, reply  # accepted: the task was working
        sent.append(message["messageId"])
    for _ in range(100):
        got = (await rpc(http, "GetTask", {"id": task_id}))["result"]
        if got["status"]["state"] == "TASK_STATE_COMPLETED":
            break
        await asyncio.sleep(0.1)
    assert got["artifacts"][0]["parts"][0]["data"] == ["hello", {"order": 7}, "stop"]  # what run.messages() gave
    users = [entry for entry in got["history"] if entry["role"] == "ROLE_USER"]
    assert [entry["messageId"] for entry in users] == [f"{task_id}:input", *sent]  # each message, in order
    streamed = await http.post(
        "/a2a", json=call("SendStreamingMessage", {"message": user({"text": "late"}, skill=None, taskId=task_id)})
    )
    assert json.loads(streamed.text.split("data: ", 1)[1].split("\n", 1)[0])["error"]["code"] == -32004  # ended


async def test_unsupported_versions_and_oversized_bodies(http: httpx.AsyncClient) -> None:
    body = call("GetTask", {"id": "x"})
    reply = (await http.post("/a2a", json=body, headers={"A2A-Version": "2.0"})).json()
    assert reply["error"]["code"] == -32009
    for version in ("1.0", "0.3", "0.3.0", "1.2"):
        assert (await http.post("/a2a", json=body, headers={"A2A-Version": version})).json()["error"]["code"] == -32001
    app = create_agent_unit(AGENTS, store="memory://", public_url=URL, max_body_bytes=100)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as small:
        reply = (await small.post("/a2a", json=call("SendMessage", {"message": user({"text": "x" * 200})}))).json()
        assert reply["error"]["code"] == -32600 and "max_body_bytes" in reply["error"]["message"]
    await app.engine.aclose()


async def test_authorize_sees_the_same_actions_as_the_http_routes() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def authorize(request: Request, action: str, run: dict[str, Any]) -> bool:
        seen.append((action, run))
        return action != "resume" and request.headers.get("x-user") != "mallory"

    app = create_agent_unit(AGENTS, store="memory://", public_url=URL, authorize=authorize)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http:
        assert (await http.get("/.well-known/agent-card.json", headers={"x-user": "mallory"})).status_code == 403
        parked = (await rpc(http, "SendMessage", {"message": user({"data": {"order_id": "o"}}, skill="refund")}))[
            "result"
        ]
        run_id = parked["task"]["id"]
        await rpc(http, "GetTask", {"id": run_id})
        answer = user({"data": {"approved": True}}, skill=None, taskId=run_id)
        refused = await http.post("/a2a", json=call("SendMessage", {"message": answer}))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        await rpc(http, "CancelTask", {"id": run_id})
    await app.engine.aclose()
    assert [action for action, _ in seen] == ["manifest", "start", "get", "resume", "cancel"]
    assert seen[1][1] == {"agent": "refund", "thread_id": None}
    assert seen[2][1] == {"id": run_id, "agent": "refund", "thread_id": parked["task"]["contextId"]}


def test_the_endpoint_imports_no_a2a_sdk() -> None:
    code = "import sys, agent_unit.http.a2a\nprint(sorted({m.split('.')[0] for m in sys.modules} & {'a2a', 'google'}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


async def test_a_body_not_sent_as_json_is_refused_before_json_rpc(http: httpx.AsyncClient) -> None:
    body = json.dumps(call("SendMessage", {"message": user({"data": {"order_id": "o"}}, skill="refund")}))
    for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"content-type": media} if media else {}
        response = await http.post("/a2a", content=body, headers=headers)
        assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type", media
    assert (await http.app.engine.list()).runs == []  # type: ignore[attr-defined]
    sent = await http.post("/a2a", content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_the_project_configuration_names_the_default_agent(tmp_path: Path) -> None:
    from agent_unit_cli.dev import create_app

    (tmp_path / "agents").mkdir()
    for name, body in (("shout", "return input.upper()"), ("whisper", "return input.lower()")):
        (tmp_path / "agents" / f"{name}.py").write_text(
            f"from agent_unit import define_agent\n\n\n@define_agent\nasync def agent(input: str) -> str:\n    {body}\n"
        )
    (tmp_path / "agent-unit.toml").write_text('storage = "memory://"\na2a_default_agent = "whisper"\n')
    app = create_app(tmp_path, public_url=URL)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL) as http:
        reply = await rpc(http, "SendMessage", {"message": user({"text": "Hi"}, skill=None)})
        assert reply["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "hi"
    await app.engine.aclose()


def test_an_agents_streamed_text_is_one_message_of_the_history_however_many_deltas_it_came_in() -> None:
    from datetime import UTC, datetime

    from agent_unit._records import RunRecord, RunStatus
    from agent_unit.http.a2a_shapes import history

    now = datetime.now(UTC)
    record = RunRecord(
        id="run_1", agent="chat", thread_id="t", status=RunStatus.completed, input="hi", created_at=now, updated_at=now
    )
    events = [
        {"type": "RUN_STARTED"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hel"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "result": "hello"},
    ]
    messages = history(record, events, {})
    assert [(m["role"], m["messageId"], m["parts"]) for m in messages] == [
        ("ROLE_USER", "run_1:input", [{"text": "hi", "mediaType": "text/plain"}]),
        ("ROLE_AGENT", "m1", [{"text": "hello"}]),
    ]
