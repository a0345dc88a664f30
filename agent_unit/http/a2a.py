"""A2A: the agent card and ``POST /a2a``, where an A2A task is a durable agent-unit run.

Task id = run id, context id = thread id. Nothing is kept in this process: every answer is
read from the engine, so a task survives a restart and any server over the same store
serves it (an in-memory task store, as A2A servers commonly keep, would lose it).

The JSON-RPC methods are the ones a2a-sdk's client sends: ``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``, ``SubscribeToTask`` and ``ListTasks`` (A2A 1.0), and
``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel`` and ``tasks/resubscribe``
(A2A 0.3) on the same endpoint. The contract a client author follows is ``spec/a2a.md``.

The app imports this module at the first A2A request, and it imports no A2A SDK at all
(see :mod:`.a2a_shapes`). Authorization goes through the app's ``authorize`` hook with the
same actions as the HTTP routes (``start``, ``resume``, ``get``, ``cancel``, ``events``, ``list``;
``manifest`` for the card), so one policy governs a run whichever protocol touches it.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import _jsontext as jsontext
from .._answers import check_answer
from .._ids import is_id
from .._records import RunRecord, RunStatus
from ..errors import (
    AgentNotFound,
    AgentUnitError,
    BadRequest,
    Forbidden,
    InvalidAnswer,
    InvalidInput,
    PayloadTooLarge,
    PublicUrlMissing,
    RpcError,
    RunConflict,
    RunNotFound,
    Unauthorized,
    UnsupportedMediaType,
)
from .a2a_shapes import (
    CONTENT_TYPE_NOT_SUPPORTED,
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PUSH_NOT_SUPPORTED,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    TASK_STATES,
    UNSUPPORTED_OPERATION,
    VERSION_NOT_SUPPORTED,
    Dialect,
    Incoming,
    Json,
    agent_card,
    field_violations,
    history,
    input_from,
    read_message,
    run_statuses,
    stream_items,
    task,
    to_v03,
)
from .bodies import parse_json, read_body, require_json
from .responses import JSONResponse
from .sse import KEEP_ALIVE_COMMENT, SSEResponse, message
from .stream import KeepAlive

if TYPE_CHECKING:
    from .gateway import Gateway

__all__ = ["CARD_PATH", "app", "card"]

log = logging.getLogger("agent_unit.http.a2a")

# The reason each code carries in a 1.0 error's ``google.rpc.ErrorInfo``, as a2a-sdk writes it.
_REASONS = {
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    EXTENDED_CARD_NOT_CONFIGURED: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
    INVALID_PARAMS: "INVALID_PARAMS",
    INVALID_REQUEST: "INVALID_REQUEST",
    METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}
_INTERNAL = "internal error: the server logged the details"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
_V03_CODES = frozenset(
    {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR} | set(range(-32007, -32000))
)

# Methods of A2A that are not served, and why: a precise error beats "method not found".
_NOT_SERVED = {
    **dict.fromkeys(
        (
            "CreateTaskPushNotificationConfig",
            "GetTaskPushNotificationConfig",
            "ListTaskPushNotificationConfigs",
            "DeleteTaskPushNotificationConfig",
            "tasks/pushNotificationConfig/set",
            "tasks/pushNotificationConfig/get",
            "tasks/pushNotificationConfig/list",
            "tasks/pushNotificationConfig/delete",
        ),
        (PUSH_NOT_SUPPORTED, "push notifications are not served: stream the task, or poll GetTask"),
    ),
    **dict.fromkeys(
        ("GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"),
        (EXTENDED_CARD_NOT_CONFIGURED, "there is no extended card: the public card lists every skill"),
    ),
}
_PAGE_SIZE, _MAX_PAGE_SIZE = 50, 100  # ListTasks' default and largest page, as a2a-sdk's server has them
_SCAN = 200  # runs read from the store at a time while a ListTasks filter is applied here
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def listen_url(host: str, port: int | str, *, note: bool = True) -> str:
    """The card's URL for a server with no configured ``url``: the address it listens on.

    A server started by ``python main.py`` (server and docker builds) or ``agent-unit dev``
    knows that address; a serverless host does not and keeps refusing the card. All
    interfaces (``0.0.0.0``, ``::``) show as ``localhost``. ``note`` logs, once at start,
    that a deployment should set ``url`` (clients outside this machine cannot use it).
    """
    shown = "localhost" if host in ("", "0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
    url = f"http://{shown}:{port}"
    if note:
        everywhere = " (it listens on all interfaces)" if shown == "localhost" else ""
        log.warning(
            "agent-unit: `url` is not set, so the agent card shows %s%s: set url (or AGENT_UNIT_URL) to the "
            "address clients reach in production",
            url,
            everywhere,
        )
    return url


def card(gateway: Gateway) -> ASGIApp:
    """``GET /.well-known/agent-card.json`` (and the older ``agent.json``): the agent card.

    The deployment's card (every agent a skill, each agent's own card linked) or, under
    ``/agents/{name}/``, one agent's card whose endpoint is ``/agents/{name}/a2a``.
    The endpoint's URL is the configured public URL (``public_url`` / ``AGENT_UNIT_URL``)
    plus the path the app is mounted at; never the request's Host header, which the client
    chooses. Without a public URL the card is a 503 that tells the operator to set it.
    """

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        agent = request.path_params.get("agent")
        await gateway.authorize(request, "manifest", {})
        agents = gateway.agents
        if agent is not None and agent not in agents:
            gateway.check_agent(agent)
            raise AgentNotFound(f"no agent named {jsontext.shown(agent)}: GET /agents lists them")
        if not gateway.public_url:
            raise PublicUrlMissing(
                "the agent card needs this deployment's own URL: set AGENT_UNIT_URL (or public_url=) "
                "to the URL clients reach it at, e.g. https://agents.example.com"
            )
        base = _base_url(gateway.public_url, scope.get("root_path", ""))
        if agent is None:
            links = {name: (f"{base}/agents/{name}/a2a", f"{base}/agents/{name}{CARD_PATH}") for name in agents}
            body = agent_card(gateway.name, agents, f"{base}/a2a", links)
        else:
            body = agent_card(agent, {agent: agents[agent]}, f"{base}/agents/{agent}/a2a")
        await JSONResponse(body)(scope, receive, send)

    return endpoint


CARD_PATH = "/.well-known/agent-card.json"


def _base_url(public_url: str, root_path: str) -> str:
    """``public_url`` + the mount path; a public URL that already ends with the mount path keeps it once."""
    root = root_path.rstrip("/")
    if root and urlsplit(public_url).path.rstrip("/").endswith(root):
        root = ""
    return f"{public_url}{root}"


def app(gateway: Gateway) -> ASGIApp:
    """``POST /a2a`` (the deployment's) and ``POST /agents/{name}/a2a`` (one agent's): the JSON-RPC endpoint."""
    return _JsonRpc(gateway)


Handler = Callable[[Request, Json, Dialect, "str | int | None"], Awaitable["Json | SSEResponse"]]


class _JsonRpc:
    """One JSON-RPC 2.0 request per POST; errors are JSON-RPC errors (HTTP 200), as a2a-sdk's server answers.

    The exceptions come before JSON-RPC: authentication and authorization (the ``authorize``
    hook's 401/403 stay HTTP statuses, as A2A asks of its transports), and a body that is not
    sent as ``application/json`` (415, as A2A's JSON-RPC binding requires that type: a browser
    page could send the others cross-site without a preflight).

    Every error is answered only once the request is authorized: one refused before a method
    reached its own check (not JSON, an unknown method, a malformed message) is first
    authorized with action ``"a2a"`` and ``run = {}``, as ``POST /mcp`` is with ``"mcp"``.
    """

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.engine = gateway.engine
        self.methods: dict[str, tuple[Handler, Dialect]] = {
            "SendMessage": (self.send, "1.0"),
            "SendStreamingMessage": (self.send_streaming, "1.0"),
            "GetTask": (self.get, "1.0"),
            "CancelTask": (self.cancel, "1.0"),
            "SubscribeToTask": (self.subscribe, "1.0"),
            "ListTasks": (self.list_tasks, "1.0"),  # A2A 0.3 has no such method
            "message/send": (self.send, "0.3"),
            "message/stream": (self.send_streaming, "0.3"),
            "tasks/get": (self.get, "0.3"),
            "tasks/cancel": (self.cancel, "0.3"),
            "tasks/resubscribe": (self.subscribe, "0.3"),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self.handle(request)
        await response(scope, receive, send)

    async def handle(self, request: Request) -> Response | SSEResponse:
        request_id: str | int | None = None
        dialect: Dialect = "1.0"
        streaming = False  # a streaming method answers even its errors as a stream
        scoped = _scope(request)
        if scoped is not None and scoped not in self.engine.agents:
            await self._authorize_error(request)
            self.gateway.check_agent(scoped)
            raise AgentNotFound(
                f"no agent named {jsontext.shown(scoped)}: GET /agents lists them"
            )  # no such endpoint: a 404
        try:
            require_json(request)
            payload = await self._read(request)
            if isinstance(payload, list):
                raise RpcError(INVALID_REQUEST, "batch requests are not supported: send one request object")
            if not isinstance(payload, dict):
                raise RpcError(INVALID_REQUEST, "the body must be a JSON-RPC request object")
            raw_id = payload.get("id")
            if raw_id is None or (isinstance(raw_id, str | int) and not isinstance(raw_id, bool)):
                request_id = raw_id
            else:
                raise RpcError(INVALID_REQUEST, "id must be a string, a whole number or null")
            if payload.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, "jsonrpc must be exactly '2.0'")
            method = payload.get("method")
            if not isinstance(method, str) or not method:
                raise RpcError(INVALID_REQUEST, "method is required")
            if method not in self.methods:
                code, message = _NOT_SERVED.get(method, (METHOD_NOT_FOUND, f"method {method!r} does not exist"))
                raise RpcError(code, message)
            handler, dialect = self.methods[method]
            streaming = handler in (self.send_streaming, self.subscribe)
            _check_version(request)
            params = payload.get("params", {})
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            result = await handler(request, params, dialect, request_id)
        except (Unauthorized, Forbidden):
            raise  # the app answers 401/403
        except UnsupportedMediaType:
            await self._authorize_error(request)
            raise  # the app answers 415: not a JSON-RPC request at all
        except RpcError as exc:
            await self._authorize_error(request)
            return _error(request_id, exc, dialect, streaming)
        except AgentUnitError as exc:
            await self._authorize_error(request)
            return _error(request_id, _rpc_error(exc), dialect, streaming)
        except ClientDisconnect:
            raise  # the client left before its body arrived: the app notes it quietly
        except Exception:
            log.exception("agent-unit: unexpected error on POST /a2a")
            return _error(request_id, RpcError(INTERNAL_ERROR, _INTERNAL), dialect, streaming)
        if isinstance(result, SSEResponse):
            return result
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _authorize_error(self, request: Request) -> None:
        """Authorize ``"a2a"`` on ``{}`` unless a method's own check ran already: an error is answered
        only to a caller who may act (and a refusal says nothing of which skills or tasks exist)."""
        if not self.gateway.authorized(request):
            await self.gateway.authorize(request, "a2a", {})

    async def _read(self, request: Request) -> Any:
        """The body as JSON, refused past ``max_body_bytes`` before it is read whole (as every route is)."""
        try:
            body = await read_body(request, self.gateway.max_body_bytes)
        except PayloadTooLarge as exc:
            raise RpcError(INVALID_REQUEST, exc.message) from None
        try:
            return parse_json(body)
        except BadRequest as exc:  # not JSON, or strings that are not valid Unicode
            raise RpcError(PARSE_ERROR, exc.message) from None

    # -- methods -----------------------------------------------------------------------------

    async def send(self, request: Request, params: Json, dialect: Dialect, request_id: str | int | None) -> Json:
        """SendMessage: start a task, or answer one that waits for input; by default wait until it parks or ends."""
        incoming = read_message(params, dialect)
        configuration = _configuration(params)
        length = _optional_int(configuration, "historyLength", 0)
        if dialect == "1.0":
            wait = not configuration.get("returnImmediately", False)
        else:
            wait = configuration.get("blocking", True) is not False
        if incoming.task_id is not None:
            record = await self._waiting_task(request, incoming)
            if record.status == RunStatus.interrupted:
                answer = input_from(incoming, lambda value: _fits_answer(record, value))
                resumed = await self.gateway.resume(record.id, answer, wait=wait, request=request, record=record)
                record = resumed if wait else await self.engine.get(record.id)
            else:  # working: the message goes to the run, which reads it with run.messages()
                value = input_from(incoming, lambda value: isinstance(value, str))
                record = await self.gateway.send(record.id, value, message_id=incoming.message_id)
        else:
            agent = await self._new_task(request, incoming)
            value = input_from(incoming, lambda value: _fits_input(self.engine.agents[agent], value))
            record = await self.gateway.start(agent, value, thread_id=incoming.context_id, wait=wait)
        body = task(record, history=await self._history(record, length))
        return to_v03(body) if dialect == "0.3" else {"task": body}

    async def send_streaming(
        self, request: Request, params: Json, dialect: Dialect, request_id: str | int | None
    ) -> SSEResponse:
        """SendStreamingMessage: the task, then its status and artifact updates until it parks or ends."""
        incoming = read_message(params, dialect)
        _configuration(params)
        if incoming.task_id is not None:
            record = await self._waiting_task(request, incoming)
            after = await self.gateway.last_seq(record.id)
            if record.status == RunStatus.interrupted:
                answer = input_from(incoming, lambda value: _fits_answer(record, value))
                await self.gateway.resume(record.id, answer, request=request, record=record)
            else:  # working: the message goes to the run, as SendMessage's does
                value = input_from(incoming, lambda value: isinstance(value, str))
                await self.gateway.send(record.id, value, message_id=incoming.message_id)
        else:
            agent = await self._new_task(request, incoming)
            value = input_from(incoming, lambda value: _fits_input(self.engine.agents[agent], value))
            started = await self.gateway.start(agent, value, thread_id=incoming.context_id)
            record, after = started, 0
        first = {"task": task(record, state="TASK_STATE_WORKING")}
        return self._stream(record, first, after, dialect, request_id)

    async def get(self, request: Request, params: Json, dialect: Dialect, request_id: str | int | None) -> Json:
        length = _optional_int(params, "historyLength", 0)
        record = await self._task(request, params, "get")
        body = task(record, history=await self._history(record, length))
        return to_v03(body) if dialect == "0.3" else body

    async def cancel(self, request: Request, params: Json, dialect: Dialect, request_id: str | int | None) -> Json:
        record = await self._task(request, params, "cancel")
        try:
            if record.finished:
                raise RunConflict(f"run {record.id} is already {record.status.value}")
            record = await self.gateway.cancel(record.id)
        except RunConflict:
            state = task(await self.engine.get(record.id))["status"]["state"]
            raise RpcError(TASK_NOT_CANCELABLE, f"task {record.id} cannot be canceled: it is {state}") from None
        body = task(record)
        return to_v03(body) if dialect == "0.3" else body

    async def subscribe(
        self, request: Request, params: Json, dialect: Dialect, request_id: str | int | None
    ) -> SSEResponse:
        """SubscribeToTask: the task as it is, then its updates until it parks or ends."""
        record = await self._task(request, params, "events")
        if record.finished:
            state = task(record)["status"]["state"]
            raise RpcError(
                UNSUPPORTED_OPERATION, f"task {record.id} is in a terminal state ({state}): GetTask reads it"
            )
        after = await self.gateway.last_seq(record.id)
        record = await self.engine.get(record.id)  # after the seq: its status covers every event up to it
        return self._stream(record, {"task": task(record)}, after, dialect, request_id)

    async def list_tasks(self, request: Request, params: Json, dialect: Dialect, request_id: str | int | None) -> Json:
        """ListTasks: the run list as tasks, last updated first (as A2A sorts them), authorized like
        ``GET /runs`` (action ``list``).

        ``pageToken`` is the sort key (update time, run id) of the page before's last task;
        ``totalSize`` counts every task the filters match, so it reads them all once, keeping
        only one page in memory. A task updated between two pages moves, as in a2a-sdk's server.
        """
        context_id = _optional_str(params.get("contextId"), "contextId")
        agent = _scope(request)
        await self.gateway.authorize(request, "list", {"agent": agent, "thread_id": context_id})
        statuses = _status_filter(params.get("status"))
        page_size = _optional_int(params, "pageSize", 1, _MAX_PAGE_SIZE)
        page_size = _PAGE_SIZE if page_size is None else page_size
        length = _optional_int(params, "historyLength", 0)
        token = _optional_str(params.get("pageToken"), "pageToken")
        before = _read_token(token) if token is not None else None
        after = _optional_timestamp(params.get("statusTimestampAfter"))
        include_artifacts = params.get("includeArtifacts", False)
        if not isinstance(include_artifacts, bool):
            raise RpcError(INVALID_PARAMS, "includeArtifacts must be true or false")

        def wanted(record: RunRecord) -> bool:
            return (statuses is None or record.status in statuses) and (after is None or record.updated_at >= after)

        total = 0
        page: list[tuple[tuple[int, str], RunRecord]] = []  # the page_size + 1 latest after the token
        async for record in self._runs(agent, context_id, statuses):
            if not wanted(record):
                continue
            total += 1
            if before is not None and _order(record) >= before:
                continue  # on an earlier page
            heapq.heappush(page, (_order(record), record))
            if len(page) > page_size + 1:
                heapq.heappop(page)
        latest = [record for _, record in sorted(page, key=lambda item: item[0], reverse=True)]
        more = len(latest) > page_size
        tasks: list[Json] = []
        for record in latest[:page_size]:
            body = task(record, history=await self._history(record, length))
            if not include_artifacts:
                body.pop("artifacts", None)  # the specification: omitted, not empty
            tasks.append(body)
        next_token = _token(latest[page_size - 1]) if more else ""
        # pageSize: "the page size used for this response", read as the A2A TCK reads it: how many it holds
        return {"tasks": tasks, "nextPageToken": next_token, "pageSize": len(tasks), "totalSize": total}

    # -- helpers -----------------------------------------------------------------------------

    async def _runs(
        self, agent: str | None, context_id: str | None, statuses: frozenset[RunStatus] | None
    ) -> AsyncIterator[RunRecord]:
        """The agent's runs in the context (either None: all), newest first; by status in the store when it is one."""
        if statuses is not None and not statuses:
            return
        status = next(iter(statuses)) if statuses is not None and len(statuses) == 1 else None
        cursor: str | None = None
        while True:
            page = await self.engine.list(status=status, agent=agent, thread_id=context_id, limit=_SCAN, cursor=cursor)
            for record in page.runs:
                yield record
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def _history(self, record: RunRecord, length: int | None) -> list[Json] | None:
        """The task's last ``length`` messages (None: all; 0: none, and nothing is read).

        Two reads of the store (the run's events and its journal): only where a task is answered."""
        if length == 0:
            return None
        events = [json.loads(event.data) for event in await self.engine.events(record.id)]
        answers = await self.engine.journal_values(record.id)
        messages = history(record, events, answers)
        return messages[-length:] if length is not None else messages

    async def _task(self, request: Request, params: Json, action: str) -> RunRecord:
        task_id = params.get("id")
        if not isinstance(task_id, str) or not task_id:
            raise RpcError(INVALID_PARAMS, "params.id (the task id) is required")
        return _in_scope(request, await self.gateway.run(request, action, task_id))

    async def _waiting_task(self, request: Request, incoming: Incoming) -> RunRecord:
        """The task a message goes to: it must exist, belong to the message's context, and not have ended."""
        assert incoming.task_id is not None
        record = _in_scope(request, await self.gateway.run(request, "resume", incoming.task_id))
        if incoming.context_id is not None and incoming.context_id != record.thread_id:
            raise RpcError(
                INVALID_PARAMS, f"task {record.id} belongs to context {record.thread_id!r}, not {incoming.context_id!r}"
            )
        if incoming.skill is not None and incoming.skill != record.agent:
            raise RpcError(INVALID_PARAMS, f"task {record.id} runs skill {record.agent!r}, not {incoming.skill!r}")
        if record.finished:
            state = task(record)["status"]["state"]
            raise RpcError(UNSUPPORTED_OPERATION, f"task {record.id} is in a terminal state ({state})")
        return record

    async def _new_task(self, request: Request, incoming: Incoming) -> str:
        """The agent a new task runs: the endpoint's own agent; on the deployment's endpoint the
        skill the message names, else the configured default agent (``a2a_default_agent``), else
        the only one there is.

        Authorized before the skill is checked, an unknown skill as if it existed: a caller who
        may not start it learns nothing of which skills there are.
        """
        agents = self.engine.agents
        scoped = _scope(request)
        if scoped is not None:
            agent: str | None = scoped
        elif incoming.skill is not None:
            agent = incoming.skill
        else:
            agent = self.gateway.a2a_default_agent or (next(iter(agents)) if len(agents) == 1 else None)
        await self.gateway.authorize(request, "start", {"agent": agent, "thread_id": incoming.context_id})
        names = ", ".join(sorted(agents)) or "none"
        if scoped is not None and incoming.skill not in (None, scoped):
            raise RpcError(
                INVALID_PARAMS,
                f"this endpoint runs {scoped!r} only, not {incoming.skill!r}: send to /agents/{incoming.skill}/a2a",
            )
        if agent is None:
            raise RpcError(
                INVALID_PARAMS,
                f"name the skill to run in message.metadata.skill: one of {names} (the card lists them), "
                "or send to the agent's own endpoint /agents/{name}/a2a",
            )
        if agent not in agents:
            raise RpcError(INVALID_PARAMS, f"no skill {agent!r}: the skills are {names}")
        return agent

    def _stream(
        self, record: RunRecord, first: Json, after: int, dialect: Dialect, request_id: str | int | None
    ) -> SSEResponse:
        run_id, thread_id = record.id, record.thread_id

        def frame(result: Json, final: bool = False) -> bytes:
            if dialect == "0.3":
                result = to_v03(result, final=final)
            return message(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, separators=(",", ":")))

        def body(stop: asyncio.Event) -> AsyncIterator[bytes]:
            async def frames() -> AsyncIterator[bytes]:
                yield frame(first)
                # a2a-sdk's default client gives up after 5 s without a byte: keep-alives come sooner
                items = self.gateway.events(run_id, after=after, stop=stop, keepalive=min(self.gateway.keepalive, 3.0))
                try:
                    async for item in items:
                        if isinstance(item, KeepAlive):
                            yield KEEP_ALIVE_COMMENT
                            continue
                        for result, final in stream_items(run_id, thread_id, item.seq, json.loads(item.data)):
                            yield frame(result, final)
                except Exception:  # the response has started: the error can only be the stream's last event
                    log.exception("agent-unit: the A2A stream of run %s failed", run_id)
                    failure = _error_body(request_id, RpcError(INTERNAL_ERROR, _INTERNAL), dialect)
                    yield message(json.dumps(failure, separators=(",", ":")), event="error")

            return frames()

        return SSEResponse(body, headers={"x-run-id": run_id})


def _scope(request: Request) -> str | None:
    """The agent whose own endpoint this is (``/agents/{name}/a2a``); None on the deployment's ``/a2a``."""
    return request.path_params.get("agent")


def _in_scope(request: Request, record: RunRecord) -> RunRecord:
    """On an agent's own endpoint, a task of another agent does not exist."""
    scoped = _scope(request)
    if scoped is not None and record.agent != scoped:
        raise RpcError(TASK_NOT_FOUND, f"task not found: agent {scoped!r} has no task {record.id!r}")
    return record


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"{where} must be a string")
    return value


def _configuration(params: Json) -> Json:
    """SendMessage's ``configuration``: an object whose ``historyLength``, when sent, is 0 or more."""
    configuration = params.get("configuration") or {}
    if not isinstance(configuration, dict):
        raise RpcError(INVALID_PARAMS, "configuration must be an object")
    _optional_int(configuration, "historyLength", 0)
    return configuration


def _optional_int(params: Json, name: str, low: int, high: int | None = None) -> int | None:
    """``params[name]``, a whole number from ``low`` to ``high`` when sent (proto JSON may send it as a string)."""
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) < 12:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise RpcError(INVALID_PARAMS, f"{name} is {params[name]!r}: use a whole number {bounds}")
    return value


def _status_filter(value: Any) -> frozenset[RunStatus] | None:
    """ListTasks' ``status`` (a TaskState name or number) as the run statuses it covers; None for no filter."""
    if value is None or value in (0, "TASK_STATE_UNSPECIFIED"):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < len(TASK_STATES):
        value = TASK_STATES[value]
    if not isinstance(value, str) or value not in TASK_STATES:
        raise RpcError(INVALID_PARAMS, f"status {value!r} is not a task state: use one of {', '.join(TASK_STATES[1:])}")
    return run_statuses(value)


def _order(record: RunRecord) -> tuple[int, str]:
    """ListTasks' sort key, latest first: the last update (whole microseconds), then the run id."""
    return _micros(record.updated_at), record.id


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _token(record: RunRecord) -> str:
    """A page token: the sort key of the page's last task."""
    micros, run_id = _order(record)
    return f"{micros}.{run_id}"


def _read_token(token: str) -> tuple[int, str]:
    micros, _, run_id = token.partition(".")
    if not (micros.isascii() and micros.isdigit() and len(micros) < 20 and is_id(run_id, "run")):
        raise RpcError(INVALID_PARAMS, f"pageToken {token!r} is not a nextPageToken: send the one the last page gave")
    return int(micros), run_id


def _optional_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (proto JSON's form of ``google.protobuf.Timestamp``)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise RpcError(
            INVALID_PARAMS, f"statusTimestampAfter {value!r} is not an RFC 3339 time such as 2026-01-01T00:00:00Z"
        )
    return moment


def _fits_input(agent: Any, value: Any) -> bool:
    try:
        agent.validate_input(value)
    except InvalidInput:
        return False
    return True


def _fits_answer(record: RunRecord, value: Any) -> bool:
    try:
        check_answer(record, value)
    except InvalidAnswer:
        return False
    return True


def _check_version(request: Request) -> None:
    """``A2A-Version``, when sent, must be 0.3 or 1.x; a client that sends none is served by method name."""
    version = request.headers.get("a2a-version", "").strip()
    if not version:
        return
    major, _, minor = version.partition(".")
    if major == "1" or (major == "0" and minor.split(".")[0] == "3"):
        return
    raise RpcError(VERSION_NOT_SUPPORTED, f"A2A version {version!r} is not supported: this server speaks 1.0 and 0.3")


def _rpc_error(exc: AgentUnitError) -> RpcError:
    """The engine's errors as A2A's codes."""
    if isinstance(exc, RunNotFound):
        return RpcError(TASK_NOT_FOUND, f"task not found: {exc.message}", reason=exc.code)
    if isinstance(exc, InvalidInput):
        hint = " (send the input as a data part, or as text: a string, or the JSON of the input)"
        return RpcError(INVALID_PARAMS, exc.message + hint, details=exc.details, reason=exc.code)
    if isinstance(exc, InvalidAnswer):
        message = f"{exc.message}; the task still waits for input"
        return RpcError(INVALID_PARAMS, message, details=exc.details, reason=exc.code)
    if isinstance(exc, RunConflict):
        return RpcError(UNSUPPORTED_OPERATION, exc.message, reason=exc.code)
    if exc.status >= 500:
        log.error("agent-unit: %s on POST /a2a: %s", exc.code, exc.message)
    return RpcError(INTERNAL_ERROR if exc.status >= 500 else INVALID_PARAMS, exc.message, reason=exc.code)


def _error(
    request_id: str | int | None, error: RpcError, dialect: Dialect, streaming: bool = False
) -> JSONResponse | SSEResponse:
    """The error response; for a streaming method, a stream of that one error.

    A2A's JSON-RPC binding answers ``SendStreamingMessage`` and ``SubscribeToTask`` with
    ``text/event-stream``, so an error found before the first result is the stream's only
    event: ``event: error`` in 1.0 (as a2a-sdk's server ends a failed stream; its client raises
    the error's type), a plain ``data:`` event in 0.3 (what 0.3 clients read an error from).
    """
    body = _error_body(request_id, error, dialect)
    if not streaming:
        return JSONResponse(body)
    frame = message(json.dumps(body, separators=(",", ":")), event="error" if dialect == "1.0" else None)

    def one(stop: Any) -> AsyncIterator[bytes]:
        async def frames() -> AsyncIterator[bytes]:
            yield frame

        return frames()

    return SSEResponse(one)


def _error_body(request_id: str | int | None, error: RpcError, dialect: Dialect) -> Json:
    """The JSON-RPC error response: 1.0 carries typed details (``google.rpc.ErrorInfo``), 0.3 plain data."""
    body: Json = {"code": error.code, "message": error.message}
    if dialect == "1.0":
        if error.code in _REASONS:
            metadata = {"code": error.reason} if error.reason else {}
            details: list[Json] = [
                {
                    "@type": _ERROR_INFO,
                    "reason": _REASONS[error.code],
                    "domain": "a2a-protocol.org",
                    "metadata": metadata,
                }
            ]
            if error.details:
                details.append({"@type": _BAD_REQUEST, "fieldViolations": field_violations(error.details)})
            body["data"] = details
    else:
        if error.code not in _V03_CODES:
            body["code"] = INTERNAL_ERROR  # a code 0.3 does not know
        data = {key: value for key, value in (("code", error.reason), ("details", error.details)) if value}
        if data:
            body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}
