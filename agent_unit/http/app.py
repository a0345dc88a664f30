"""``create_agent_unit``: the HTTP API of DESIGN.md as one Starlette app (an ASGI callable).

Every route goes through the one :class:`~agent_unit.RunEngine`; every error is JSON
``{"error": {"code", "message"}}`` with its status, and nothing else (no stack trace) ever
reaches a client. The app needs no lifespan: serverless hosts run lifespan per invocation,
and a mounted sub-app gets none, so anything it needs starts on the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import itertools
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from .. import env, telemetry
from .._agent import Agent
from .._engine import RunEngine
from .._host import SERVER, Host, current_host, entered_host, use_host
from .._ids import is_id
from .._records import RunRecord
from .._scheduler import Scheduler
from ..discovery import discover_agents
from ..env import drain
from ..errors import (
    AgentUnitError,
    BadRequest,
    HttpError,
    InternalError,
    InvalidArgument,
    MethodNotAllowed,
    RouteNotFound,
)
from .auth import Authorize, check_secret, load_authorize, production
from .bodies import read_json, refuse_non_json
from .gateway import Gateway
from .headers import header, query
from .hostnames import HostNames
from .inbox import page
from .origins import Origins
from .responses import JSONResponse, run_response
from .routes import served_routes
from .sse import SSEResponse, event_messages

__all__ = ["AgentUnit", "agent_units", "create_agent_unit"]

log = logging.getLogger("agent_unit.http")

_TRUE = {"1", "true", "yes", "on"}
_HEALTH_TIMEOUT = 5.0  # seconds: a store that takes longer is not answering, as far as traffic goes
_MAX_SEQ = 2**63 - 1  # a seq is a signed 64-bit integer in every store
_BUSIEST = frozenset({"start", "resume"})  # the routes tried first

DRAIN_SECONDS = 8.0
"""How long a shutdown waits for ``wait_until`` work: ``docker stop`` kills 10 s after SIGTERM."""


class AgentUnit(Starlette):
    """The ASGI app; ``engine`` is the :class:`RunEngine` behind it, ``scheduler`` the in-process
    scheduler of its ``tasks`` (None without tasks)."""

    engine: RunEngine
    gateway: Gateway  # what a protocol module of your own uses, as the built-in ones do
    scheduler: Scheduler | None
    created: int  # this process's count of units when it was made: agent_units() lists them in order
    mount_path: str = ""  # where an outer app mounts it (its first request's root_path): continuations go there

    agent_host: Host  # what its host provides: a request outside any use_host() is served on it

    _busiest: tuple[tuple[Route, Callable[[Request], Awaitable[Response]]], ...] = ()
    """The routes of a run's start and resume, the two Starlette tries first, with their handlers:
    what :meth:`_lane` may answer without Starlette's stack."""
    _lanes: tuple[tuple[Route, Callable[[Request], Awaitable[Response]]], ...] | None = None
    _stack_seen: Any = None  # the stack, route table and Starlette.__call__ the lanes were opened beside
    _routes_seen: list[BaseRoute] | None = None
    _call_seen: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.mount_path = scope.get("root_path", "")
            observed = telemetry.active()
            if observed is not None:  # a run started here joins the caller's trace (its traceparent)
                with observed.incoming(scope.get("headers", [])):
                    await self._serve(scope, receive, send)
                return
        if entered_host() is not None or self.agent_host is SERVER:  # _serve's first case: a coroutine fewer
            lane = self._lane(scope)
            if lane is not None:
                await self._answer(*lane, scope, receive, send)
            else:
                await super().__call__(scope, receive, send)
            return
        await self._serve(scope, receive, send)

    async def _serve(self, scope: Any, receive: Any, send: Any) -> None:
        if entered_host() is not None or self.agent_host is SERVER:
            await self._route(scope, receive, send)
            return
        with use_host(self.agent_host):  # a host given to create_agent_unit: its bindings and wait_until
            await self._route(scope, receive, send)

    async def _route(self, scope: Any, receive: Any, send: Any) -> None:
        lane = self._lane(scope)
        if lane is not None:
            await self._answer(*lane, scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    def _lane(self, scope: Any) -> tuple[Route, Callable[[Request], Awaitable[Response]], dict[str, str]] | None:
        """The start or resume route a request is for, its handler and its path's parameters, if
        the request may skip Starlette's stack; else None.

        Starlette answers every request through ``ServerErrorMiddleware``, ``ExceptionMiddleware``
        and its router: two send wrappers, two closures, a ``Request`` and a regular expression per
        route tried, about 50k instructions of a resume's 1.17M (measured: see BENCHMARKS.md). For
        the two busiest requests :meth:`_answer` does what that stack would do and no more: it is
        taken for a JSON ``POST`` to one of them, matched by its route's own expression, while the
        stack holds nothing else (no middleware of the user's, no debug pages, no body limit, no
        exception handler but agent-unit's). A stream's body runs as it is sent, and a mounted app
        routes on its ``root_path``: both take the stack.
        """
        lanes = self._lanes
        if lanes is None:
            lanes = self._open_lanes()
        if not lanes or scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return None
        if (
            self.middleware_stack is not self._stack_seen
            or self.router.routes != self._routes_seen
            or Starlette.__call__ is not self._call_seen
        ):
            return None  # the stack rebuilt, a route added, removed or moved, Starlette wrapped since: the stack's now
        path = scope["path"]
        for route, respond in lanes:
            match = route.path_regex.match(path)
            if match is not None:
                if "text/event-stream" in (header(scope, b"accept") or ""):
                    return None
                return route, respond, match.groupdict()
        return None

    def _open_lanes(self) -> tuple[tuple[Route, Callable[[Request], Awaitable[Response]]], ...]:
        """At the first request: build Starlette's stack as its own first request does (no middleware
        can be added after it), and take the lanes only if the stack holds nothing but agent-unit's.

        Nor while an instrumentation wraps Starlette (Sentry patches ``Starlette.__call__``,
        OpenTelemetry's instrumentors wrap ``build_middleware_stack``), now or after this first
        request (:meth:`_lane` looks again each time): it sees every request."""
        if self.middleware_stack is None:
            self.middleware_stack = self.build_middleware_stack()
        plain = (
            not self.user_middleware
            and not self.debug
            and getattr(self, "max_body_size", None) is None
            and self.exception_handlers == _HANDLERS
            and _starlettes(Starlette.__call__)
            and _starlettes(self.build_middleware_stack)  # on the class or set on the app
        )
        self._lanes = self._busiest if plain else ()
        self._stack_seen, self._routes_seen = self.middleware_stack, list(self.router.routes)
        self._call_seen = Starlette.__call__
        return self._lanes

    async def _answer(
        self,
        route: Route,
        respond: Callable[[Request], Awaitable[Response]],
        params: dict[str, str],
        scope: Any,
        receive: Any,
        send: Any,
    ) -> None:
        """What Starlette's stack does for :meth:`_lane`'s request: the scope its router sets, the
        handler's response, an error answered by the handler ``ExceptionMiddleware`` would pick,
        and one with none answered 500 and raised on to the server, as ``ServerErrorMiddleware`` does.
        The response is a whole body (never a stream), so its sending raises nothing to answer."""
        scope["app"] = self
        if "router" not in scope:  # an outer router's (a Host or a Mount at "/") stays, as Starlette's does
            scope["router"] = self.router
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        outer = scope.get("path_params")
        scope["path_params"] = {**outer, **params} if outer else params
        request = Request(scope, receive, send)
        try:
            try:
                response = await respond(request)
            except Exception as exc:
                handler = next((_ANSWERED[cls] for cls in type(exc).__mro__ if cls in _ANSWERED), None)
                if handler is None:
                    raise
                response = await handler(request, exc)
        except Exception as exc:  # no handler, or the handler failed: ServerErrorMiddleware's 500
            await (await _server_error(request, exc))(scope, receive, send)
            raise
        await response(scope, receive, send)


def _starlettes(method: Any) -> bool:
    """``method`` is Starlette's own, not a wrapper an instrumentation put in its place."""
    function = getattr(method, "__func__", method)
    return getattr(function, "__module__", None) == "starlette.applications" and not hasattr(function, "__wrapped__")


_count = itertools.count()
_created: weakref.WeakSet[AgentUnit] = weakref.WeakSet()


def agent_units() -> list[AgentUnit]:
    """Every agent unit this process created and still holds, oldest first.

    A host that runs a user's own app (``server = "module:app"``) reaches the units the app
    mounted through this: its schedule sweeps each, and tasks claim their ticks in the first's store.
    """
    return sorted(_created, key=lambda unit: unit.created)


def create_agent_unit(
    agents: Mapping[str, Agent] | None = None,
    *,
    engine: RunEngine | None = None,
    store: Any = None,
    name: str = "agent-unit",
    base_path: str = "/",
    authorize: Authorize | str | None = None,
    max_body_bytes: int = 1_000_000,
    secret: str | None = None,
    require_secret: bool | None = None,
    keepalive_seconds: float = 15.0,
    poll_interval: float = 1.0,
    public_url: str | None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] | None = None,
    a2a_default_agent: str | None = None,
    require_answerer: bool = False,
    mcp: bool = True,
    ui: bool = False,
    buffered: bool | None = None,
    tasks: Mapping[str, Any] | None = None,
    host: Host | None = None,
    temporal: Any = None,
    temporal_worker: bool = True,
    **engine_options: Any,
) -> AgentUnit:
    """The HTTP API for ``agents`` (default: discovered from ``./agents``) over ``store``.

    ``authorize(request, action, run)`` guards every public route (``"module:function"``
    works too); ``secret`` (default ``$AGENT_UNIT_SECRET``) guards the internal ones, and
    ``require_secret`` (default: ``AGENT_UNIT_ENV=production``) refuses them without one.
    ``public_url`` (default ``$AGENT_UNIT_URL``) is the deployment's own URL, as the A2A card
    shows it: never taken from a request's Host header. ``allowed_origins`` are the browser
    origins (``https://app.example.com``) that may call ``POST /mcp`` besides loopback and the
    public URL's own. ``allowed_hosts`` are the names (``agents.example.com``, ``.example.com``
    with its subdomains, ``*.example.com``, or ``*`` for any) a request's ``Host`` may be besides
    the public URL's, loopback names and addresses: a Host not listed is refused (421) where
    the deployment names itself or the request came over loopback, so DNS rebinding cannot
    act (default: the host's ``allowed_hosts``). ``a2a_default_agent`` is the
    agent a new A2A task on ``POST /a2a`` runs when its message names no skill (each agent
    also has its own ``/agents/{name}/a2a``). ``require_answerer=True`` refuses (401) a resume
    that names nobody: ``authorize`` returns the answerer's identity, or the request is
    authenticated (``request.user``); every resume records who answered and when.
    ``mcp=False`` leaves out ``POST /mcp``; ``ui=True`` serves the approvals inbox at
    ``{base_path}/ui/`` (``authorize`` action ``"ui"``).
    ``buffered=True`` is for hosts that send a response only once it is complete (AWS Lambda's
    Python runtime): starts and resumes run the run in the request until it parks, ends or
    yields, and event streams return the events stored so far.
    ``tasks`` (``{name: {"schedule", "handler"}}``, as ``[tasks.NAME]``) run on the in-process
    scheduler from the lifespan's start, each tick claimed once across servers in the store.
    ``host`` (:class:`~agent_unit.Host`; default the one of :func:`~agent_unit.use_host`
    around this call, else a plain server's) says what the host provides: the engine gets it, a
    run that yields continues through ``host.continues`` under the unit's own path, and
    ``buffered``, ``secret``, ``require_secret`` and ``allowed_hosts`` default to its answers.
    ``temporal`` (a :class:`~agent_unit.temporal.TemporalSettings`, or the ``[temporal]`` table as a
    mapping) runs the runs on Temporal (:class:`~agent_unit.temporal.TemporalEngine`); this process
    runs a Temporal worker too unless ``temporal_worker=False`` (HTTP servers and workers apart).
    """
    public_url = public_url if public_url is not None else env.get("AGENT_UNIT_URL")
    origins = Origins(public_url, allowed_origins)  # a wrong entry fails here, not at a request
    host = host if host is not None else current_host()
    hosts = HostNames(public_url, host.allowed_hosts if allowed_hosts is None else allowed_hosts)
    buffered = host.buffered if buffered is None else buffered
    holder: list[AgentUnit] = []  # the app, made below: a host's continuation reads its mount path
    prefix = "/" + base_path.strip("/")
    own_path = "" if prefix == "/" else prefix
    continues = host.continues
    # A host whose continuation is None here continues a yielded run in this process.
    if engine is None and continues is not None and "on_continue" not in engine_options and continues(own_path):

        async def on_continue(run_id: str) -> None:
            handed = continues((holder[0].mount_path if holder else "") + own_path)
            if handed is not None:
                await _maybe_await(handed(run_id))

        engine_options["on_continue"] = on_continue
    if engine is None and temporal is not None:
        from ..temporal import TemporalEngine, temporal_settings

        engine_options.setdefault("host", host)
        engine = TemporalEngine(
            agents if agents is not None else discover_agents("."),
            store,
            temporal=temporal_settings(temporal),
            worker=temporal_worker,
            **engine_options,
        )
    elif engine is None:
        engine_options.setdefault("host", host)
        engine = RunEngine(agents if agents is not None else discover_agents("."), store, **engine_options)
    elif agents is not None or store is not None or engine_options:
        raise TypeError("pass either engine=, or agents/store/engine options, not both")
    if a2a_default_agent is not None and a2a_default_agent not in engine.agents:
        names = ", ".join(sorted(engine.agents)) or "none"
        raise ValueError(f"a2a_default_agent {a2a_default_agent!r} is not an agent: the agents are {names}")
    gateway = Gateway(
        engine,
        name=name,
        authorize=load_authorize(authorize),
        max_body_bytes=max_body_bytes,
        keepalive=keepalive_seconds,
        poll_interval=poll_interval,
        public_url=public_url,
        origins=origins,
        hosts=hosts,
        buffered=buffered,
        a2a_default_agent=a2a_default_agent,
        require_answerer=require_answerer,
    )
    api = _Routes(
        gateway,
        secret=secret if secret is not None else host.secret or env.get("AGENT_UNIT_SECRET"),
        require_secret=_first(require_secret, host.require_secret, production()),
    )
    # The protocols: each module is imported at its first request, so no other route and no
    # cold start pays for its SDK.
    endpoints: dict[str, Any] = {
        "manifest": api.manifest,
        "start": api.start,
        "list": api.list,
        "run": api.run,
        "events": api.events,
        "resume": api.resume,
        "cancel": api.cancel,
        "retry": api.retry,
        "healthz": api.healthz,
        "continue": api.continue_run,
        "sweep": api.sweep,
        "ag_ui": _Lazy("agui", gateway),
        "a2a_card": _Lazy("a2a", gateway, "card"),
        "a2a": _Lazy("a2a", gateway),
        "mcp": _Lazy("mcp", gateway),
        "ui": api.ui,
    }
    # Starlette tries the routes in order (a regular expression each), and no two of these match
    # one path: the busiest go first (a resume was the sixth route tried).
    served = sorted(served_routes(mcp=mcp, ui=ui), key=lambda spec: spec.name not in _BUSIEST)
    served_as = [
        Route(spec.path, _endpoint(endpoints[spec.name]), methods=list(spec.methods), name=spec.name) for spec in served
    ]
    routes: list[BaseRoute] = [*served_as] if prefix == "/" else [Mount(prefix, routes=served_as)]

    scheduler = engine.scheduler(tasks) if tasks else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await engine.check_store()  # an unreachable store or a wrong password: one clear error at start
        engine.start_background()
        if scheduler is not None:
            scheduler.start()
        yield
        if scheduler is not None:
            await scheduler.stop()  # its running handlers are wait_until work: drained next
        await drain(DRAIN_SECONDS)  # a graceful shutdown (SIGTERM) lets wait_until work finish first
        await engine.aclose()

    app = AgentUnit(routes=routes, lifespan=lifespan, exception_handlers=_HANDLERS)
    if prefix == "/":  # under a Mount the router matches the prefix first: every request takes the stack
        app._busiest = tuple((route, endpoints[route.name]) for route in served_as if route.name in _BUSIEST)
    app.engine = engine
    app.gateway = gateway
    app.agent_host = host
    app.scheduler = scheduler
    app.created = next(_count)
    _created.add(app)
    holder.append(app)
    return app


def _first(*answers: bool | None) -> bool:
    """The first answer given: an argument's, then the host's, then the library's default."""
    return next(answer for answer in answers if answer is not None)


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


def _error(status: int, code: str, message: str, details: Any = None) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status)


async def _agent_unit_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentUnitError)
    return JSONResponse(exc.to_dict(), status_code=exc.status, headers=exc.headers())


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: RouteNotFound.code, 405: MethodNotAllowed.code}
    message = {404: f"no route {request.method} {request.url.path}", 405: f"{request.method} is not allowed here"}
    code = codes.get(exc.status_code, HttpError.code)
    response = _error(exc.status_code, code, message.get(exc.status_code, exc.detail))
    response.headers.update(exc.headers or {})  # e.g. Allow on 405
    return response


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client went away before its body arrived: nothing was done, and nobody reads the answer."""
    log.debug("agent-unit: the client left %s %s before sending its whole body", request.method, request.url.path)
    return Response(status_code=499)  # nginx's "client closed request", for access logs


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("agent-unit: unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error(500, InternalError.code, "internal error: the server logged the details")


# Keyed by class: what ExceptionMiddleware answers (the first class of an error's MRO found), and
# the 500 that ServerErrorMiddleware answers for any other error (raised on to the server after).
_ANSWERED: dict[type, Callable[[Request, Exception], Awaitable[Response]]] = {
    AgentUnitError: _agent_unit_error,
    HTTPException: _http_error,
    ClientDisconnect: _client_gone,
}
_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {**_ANSWERED, Exception: _server_error}


def _flag(request: Request, name: str) -> bool:
    return (query(request.scope, name) or "").lower() in _TRUE


def _wants_stream(request: Request) -> bool:
    return "text/event-stream" in (header(request.scope, b"accept") or "")


class _Endpoint:
    """A route's ``endpoint(request) -> response`` as an ASGI app, without Starlette's wrapping.

    Starlette wraps a function endpoint in a second exception handler (a ``Request``, a closure
    and a send wrapper per request) inside the app's own ``ExceptionMiddleware``, which holds the
    same handlers: an error raised here reaches those, and is answered the same way. (Measured with
    the resume path: see BENCHMARKS.md.)
    """

    __slots__ = ("_function",)

    def __init__(self, function: Any) -> None:
        self._function = function

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        response = await self._function(Request(scope, receive, send))
        await response(scope, receive, send)


def _endpoint(endpoint: Any) -> Any:
    """A route's endpoint as an ASGI app: a method as :class:`_Endpoint`, an ASGI app (``_Lazy``) as it is."""
    return _Endpoint(endpoint) if inspect.ismethod(endpoint) else endpoint


class _Lazy:
    """An ASGI endpoint whose module is imported on its first request: ``agent_unit.http.<module>``
    exposes ``<factory>(gateway) -> ASGI app``, built once per app."""

    def __init__(self, module: str, gateway: Gateway, factory: str = "app") -> None:
        self._module, self._factory, self._gateway = module, factory, gateway
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            module = importlib.import_module(f"agent_unit.http.{self._module}")
            self._app = getattr(module, self._factory)(self._gateway)
        await self._app(scope, receive, send)


class _Routes:
    """The REST routes of DESIGN.md, on the gateway as every protocol is; the internal routes
    (continue, sweep) are guarded by the secret instead."""

    def __init__(self, gateway: Gateway, *, secret: str | None, require_secret: bool) -> None:
        self.gateway = gateway
        self.engine = gateway.engine
        self.secret = secret
        self.require_secret = require_secret

    async def guard(self, request: Request, action: str, run: dict[str, Any]) -> None:
        await self.gateway.authorize(request, action, run)

    async def _run(self, request: Request, action: str) -> RunRecord:
        return await self.gateway.run(request, action, request.path_params["run_id"])

    def _stream(self, run_id: str, after: int, follow: bool = False) -> SSEResponse:
        def body(stop: asyncio.Event) -> AsyncIterator[bytes]:
            return event_messages(self.gateway.events(run_id, after=after, follow=follow, stop=stop))

        # x-stream-after: the seq this stream starts after, so a client that loses it
        # before the first event continues from there (never from the run's beginning).
        return SSEResponse(body, headers={"x-run-id": run_id, "x-stream-after": str(after)})

    # -- public routes ---------------------------------------------------------------------

    async def manifest(self, request: Request) -> Response:
        await self.guard(request, "manifest", {})
        agents = [
            {
                "name": agent_name,
                "description": agent.description,
                "framework": agent.framework,
                "input_schema": agent.input_schema,
                "output_schema": agent.output_schema,
            }
            for agent_name, agent in sorted(self.engine.agents.items())
        ]
        manifest: dict[str, Any] = {"name": self.gateway.name, "agents": agents}
        if self.engine.broken:  # agent-unit dev serves the others: say which do not load, and where
            manifest["broken"] = [
                {"name": agent_name, **error.to_dict()} for agent_name, error in sorted(self.engine.broken.items())
            ]
        return JSONResponse(manifest)

    async def start(self, request: Request) -> Response | SSEResponse:
        agent = request.path_params["agent"]
        try:
            body = await read_json(request, self.gateway.max_body_bytes)
            unknown = sorted(set(body) - {"input", "thread_id", "limits"})
            if unknown:
                raise BadRequest(
                    f"unknown field(s) {', '.join(unknown)}: send {{'input': ..., 'thread_id': ..., 'limits': ...}}"
                )
            limits = body.get("limits")
            if limits is not None and not isinstance(limits, dict):
                raise BadRequest("limits must be an object, e.g. {'total_tokens': 5000}")
            thread_id = body.get("thread_id")
            if thread_id is not None and (not isinstance(thread_id, str) or not thread_id):
                raise BadRequest("thread_id must be a non-empty string")
        except AgentUnitError:
            await self.guard(request, "start", {"agent": agent, "thread_id": None})  # authorized before answered
            raise
        # an unknown agent is authorized as if it existed: a refusal is the same for both
        await self.guard(request, "start", {"agent": agent, "thread_id": thread_id})
        if _wants_stream(request):  # the engine refuses an agent that is not here, or does not load
            record = await self.gateway.start(agent, body.get("input"), thread_id=thread_id, limits=limits)
            return self._stream(record.id, after=0)
        wait = self.gateway.waits(_flag(request, "wait"))
        record = await self.gateway.start(agent, body.get("input"), thread_id=thread_id, wait=wait, limits=limits)
        return run_response(record, 200 if wait else 202)

    async def list(self, request: Request) -> Response:
        query = request.query_params
        agent, thread_id = query.get("agent"), query.get("thread_id")
        await self.guard(request, "list", {"agent": agent, "thread_id": thread_id})
        raw_limit = query.get("limit", "50")
        limit = int(raw_limit) if raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) < 4 else 0
        if not 1 <= limit <= 200:
            raise InvalidArgument(f"limit={raw_limit!r}: use a number from 1 to 200")
        cursor = query.get("cursor")
        if cursor is not None and not is_id(cursor, "run"):
            raise InvalidArgument(f"cursor={cursor!r} is not a page's next_cursor: send the one the last page gave")
        page = await self.engine.list(
            status=query.get("status"), agent=agent, thread_id=thread_id, limit=limit, cursor=cursor
        )
        body: dict[str, Any] = {"runs": [run.public() for run in page.runs], "next_cursor": page.next_cursor}
        if thread_id is not None:  # the thread's totals: every run of it, not only this page's
            body["thread_usage"] = await self.engine.thread_usage(thread_id)
        return JSONResponse(body)

    async def run(self, request: Request) -> Response:
        return await (self.delete(request) if request.method == "DELETE" else self.get(request))

    async def get(self, request: Request) -> Response:
        record = await self._run(request, "get")
        return run_response(record)

    async def events(self, request: Request) -> Response | SSEResponse:
        record = await self._run(request, "events")
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and int(raw) <= _MAX_SEQ):
            raise InvalidArgument(
                f"Last-Event-ID / after = {raw[:40]!r}: send the seq (a whole number of ASCII digits, "
                "below 2**63) of the last event seen"
            )
        return self._stream(record.id, after=int(raw), follow=_flag(request, "follow"))

    async def resume(self, request: Request) -> Response | SSEResponse:
        record = await self.gateway.run(request, "resume", request.path_params["run_id"])  # _run: a coroutine fewer
        body = await read_json(request, self.gateway.max_body_bytes, required=False)
        unknown = sorted(set(body) - {"answer"})
        if unknown:
            raise BadRequest(f"unknown field(s) {', '.join(unknown)}: send {{'answer': ...}}")
        if _wants_stream(request):
            after = await self.gateway.last_seq(record.id)
            await self.gateway.resume(record.id, body.get("answer"), request=request, record=record)
            return self._stream(record.id, after=after)
        wait = self.gateway.waits(_flag(request, "wait"))
        # Without wait: the record as claimed, before its execution (a task of its own) has run at all.
        resumed = await self.gateway.resume(record.id, body.get("answer"), wait=wait, request=request, record=record)
        return run_response(resumed, 200 if wait else 202)

    async def cancel(self, request: Request) -> Response:
        record = await self._run(request, "cancel")
        refuse_non_json(request)
        return run_response(await self.gateway.cancel(record.id))

    async def retry(self, request: Request) -> Response | SSEResponse:
        record = await self._run(request, "retry")
        refuse_non_json(request)
        if _wants_stream(request):
            after = await self.gateway.last_seq(record.id)
            await self.gateway.retry(record.id)
            return self._stream(record.id, after=after)
        wait = self.gateway.waits(_flag(request, "wait"))
        retried = await self.gateway.retry(record.id, wait=wait)
        return run_response(retried if wait else await self.engine.get(record.id), 200 if wait else 202)

    async def delete(self, request: Request) -> Response:
        record = await self._run(request, "delete")
        refuse_non_json(request)
        await self.engine.delete(record.id)
        return Response(status_code=204)

    async def ui(self, request: Request) -> Response:
        await self.guard(request, "ui", {})
        return await page(request)

    async def healthz(self, request: Request) -> Response:
        """200 while the store answers, 503 when it does not. Outside ``authorize``: it tells a
        load balancer or a container's health check whether to send traffic here, and says
        nothing about agents or runs."""
        self.engine.start_background()
        await self.engine.ping(_HEALTH_TIMEOUT)  # StoreUnavailable (503) when it does not answer
        return JSONResponse({"status": "ok"})

    # -- internal routes -------------------------------------------------------------------

    async def continue_run(self, request: Request) -> Response:
        self.gateway.refuse_foreign_pages(request)
        check_secret(request, self.secret, required=self.require_secret)
        body = await read_json(request, self.gateway.max_body_bytes)
        run_id = body.get("run_id")
        if not isinstance(run_id, str):
            raise BadRequest("send {'run_id': ...}")
        # ?wait=0: answer once the run is claimed (a Worker: its waitUntil holds the slice)
        wait = request.query_params.get("wait") != "0"
        record = await self.engine.continue_run(run_id, wait=wait)
        return run_response(record, 200 if wait else 202)

    async def sweep(self, request: Request) -> Response:
        self.gateway.refuse_foreign_pages(request)
        check_secret(request, self.secret, required=self.require_secret)
        refuse_non_json(request)
        result = await self.engine.sweep(wait=True)
        return JSONResponse({"woken": result.woken, "recovered": result.recovered, "deleted": result.deleted})
