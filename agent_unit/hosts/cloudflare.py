"""Cloudflare Workers: what a build's ``src/entry.py`` exports, and what a Worker written by hand can use.

    from workers import WorkerEntrypoint
    from agent_unit.hosts.cloudflare import create_worker

    worker = create_worker(load_agents, crons={"0 8 * * *": ["send-digest"]}, tasks=TASKS)
    AgentUnitRun = worker.AgentUnitRun        # bound as AGENT_UNIT_RUNS
    AgentUnitIndex = worker.AgentUnitIndex    # bound as AGENT_UNIT_INDEX

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            return await worker.fetch(request, self.env, self.ctx)

        async def scheduled(self, controller, env, ctx):
            await worker.scheduled(controller, self.env, self.ctx)

Runtimes:

- ``"durable-objects"`` (the default): every run lives and executes in its own Durable Object
  (:mod:`agent_unit.hosts.durable_objects`). A request that may start a run (``POST
  /agents/{name}/runs``, AG-UI, MCP, A2A) is served by a new, empty run object; a request about
  a run (``/runs/{id}/...``) by that run's object; the rest (the run list, the manifest, the
  cards, ``/healthz``, the inbox) by the Worker itself, reading the index object.
- ``"default"``: the Worker serves everything over ``store`` (``"d1://BINDING"``: the D1
  database bound under that name). A Cron Trigger runs the sweep (the task name
  ``"agent-unit:sweep"``); a run that yields continues at ``$AGENT_UNIT_URL``.

Both serve through the Workers ASGI adapter (``workers.asgi``), the one Cloudflare ships. It
runs an app's lifespan around every request: agent-unit's own app needs none and is served
without it; a user's own app (``server``) gets its lifespan around each request. ``env``
(:data:`agent_unit.env.env`) reads the Worker's bindings and secrets; ``wait_until`` is the
invocation's ``ctx.waitUntil``, which also holds the runs a request started that go on after its
response (a 202): each request, cron and alarm runs inside ``use_host`` with
:func:`cloudflare_host` (the Worker's :class:`~agent_unit.host.Host` with that invocation's
bindings and ``waitUntil``), so a user's own app imported there gets its units on it. Crons run
tasks from ``scheduled``: ``crons`` maps each Cron Trigger (in Cloudflare's own syntax, as
``wrangler.jsonc`` lists it) to task names, and each tick is claimed once in the store, so a
repeated delivery runs nothing.

Nothing here starts a thread, a signal handler or a subprocess (Pyodide has none), and the
import is cheap: the app and the agents are made at the first request.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from .. import env as agent_env
from ..host import Host, OnContinue, entered_host, use_host
from ..stores.durable_objects import DurableObjectsStore
from .durable_objects import durable_object_classes

__all__ = [
    "HOST",
    "RETRIES",
    "SWEEP_TASK",
    "Worker",
    "cloudflare_host",
    "continue_in_worker",
    "create_worker",
    "forward",
    "hand_to_wait_until",
    "retryable",
    "serve",
]

HOST = Host(name="cloudflare", sweep="scheduled", require_secret=True, allowed_hosts=("*",))
"""Cloudflare Workers: the Cron Trigger sweeps (run objects: their alarms), the internal routes need
the secret, and any ``Host`` is accepted: Cloudflare routes a request to the Worker only under its
own routes and domains, so a DNS rebinding cannot arrive."""

SWEEP_TASK = "agent-unit:sweep"
"""The task name that, in ``crons``, means the sweep (the default runtime's wake-ups and recovery)."""

Runtime = Literal["durable-objects", "default"]

# Requests that may start or execute a run: a new run object serves them (relative to the base
# path), so no run ever executes in the Worker itself. One that goes on with an existing run
# (an A2A message to a task, a continuation) executes it there, fenced by the run's lease.
_STARTS = (
    ("agents", "*", "runs"),
    ("agents", "*", "ag-ui"),
    ("agents", "*", "a2a"),
    ("mcp",),
    ("a2a",),
    ("__agent-unit", "continue"),
)


class _NoLifespan:
    """agent-unit's app without its lifespan: the adapter would run it around every request,
    and on Workers it has nothing to do (no background sweep, the store is checked when used)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.engine = app.engine
        self.agent_host = app.agent_host

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await self.app(scope, receive, send)


def cloudflare_host(worker_env: Any = None, ctx: Any = None, base: Host = HOST) -> Host:
    """``base`` for one invocation: ``env`` reads the Worker's bindings and secrets
    (``worker_env``), and :func:`agent_unit.env.wait_until` goes to ``ctx.waitUntil``."""
    wait = getattr(ctx, "waitUntil", None)
    return replace(
        base,
        bindings=None if worker_env is None else agent_env.WorkerBindings(worker_env),
        wait_until=None if wait is None else (lambda work: hand_to_wait_until(wait, work)),
    )


async def serve(app: Any, request: Any, worker_env: Any, ctx: Any = None) -> Any:
    """Answer ``request`` with the ASGI ``app`` through the Workers ASGI adapter, on
    :func:`cloudflare_host` for this invocation (its bindings, ``ctx.waitUntil``)."""
    import workers  # type: ignore[import-not-found]
    from workers import asgi

    if callable(getattr(workers, "import_from_javascript", None)) and "wait_until" not in vars(workers):
        # workers-runtime-sdk (1.9.5) hands a streamed response's clean-up to JS's waitUntil as a
        # borrowed proxy (an SSE stream: "Uncaught Error: This borrowed proxy was automatically
        # destroyed"): its `wait_until` is given the one that keeps the proxy alive.
        workers.wait_until = _sdk_wait_until
    marker = object()
    token = _request.set(marker)
    try:
        with use_host(cloudflare_host(worker_env, ctx, getattr(app, "agent_host", HOST))):
            response = await asgi.fetch(app, request, worker_env, ctx)
            _hold_runs(app, marker, ctx)
    finally:
        _request.reset(token)
    return response


_request: contextvars.ContextVar[object | None] = contextvars.ContextVar("agent_unit_cloudflare_request", default=None)


def _hold_runs(app: Any, marker: object, ctx: Any) -> None:
    """Hand the runs this request started and that go on after its response (a 202) to ``ctx.waitUntil``.

    Workers cancel an invocation's unfinished work once its response is sent unless
    ``waitUntil`` holds it: without this, a run started with a 202 on the default runtime
    stopped at its first step that waited for anything.
    """
    wait = getattr(ctx, "waitUntil", None)
    if wait is None or not _started(app, marker):
        return

    async def settle() -> None:
        while running := _started(app, marker):  # a run continued in this request starts another task
            await asyncio.wait(running)

    hand_to_wait_until(wait, settle())


def _started(app: Any, marker: object) -> list[asyncio.Task[None]]:
    """The executions still running that were started in the request ``marker`` stands for."""
    engine = getattr(app, "engine", None)
    if engine is not None:
        engines = [engine]
    else:  # a user's own app: the agent units it mounted
        from ..http import agent_units

        engines = [unit.engine for unit in agent_units()]
    return [
        task
        for engine in engines
        for task in engine.executing().values()
        if not task.done() and _started_in(task, marker)
    ]


def _started_in(task: asyncio.Task[Any], marker: object) -> bool:
    get_context = getattr(task, "get_context", None)  # Python 3.12+, as Pyodide's is
    return get_context is None or get_context().get(_request) is marker


def hand_to_wait_until(wait: Callable[[Any], Any], work: Awaitable[Any]) -> None:
    """Give ``work`` to a JavaScript ``waitUntil`` (``ctx.waitUntil``) so that it finishes.

    A Python awaitable passed to JavaScript crosses as a *borrowed* proxy, destroyed when the
    call returns; ``waitUntil`` awaits it later and finds it destroyed, so the runtime does not
    keep the invocation alive for the work. The task crosses as a proxy of its own instead,
    destroyed once the task is done. Outside Pyodide (a simulation) the task is given as it is.
    """
    task = asyncio.ensure_future(work)
    try:
        from pyodide.ffi import create_proxy  # type: ignore[import-not-found]
    except ImportError:
        wait(task)
        return
    proxy = create_proxy(task)
    task.add_done_callback(lambda _done: proxy.destroy())
    wait(proxy)


def _sdk_wait_until(work: Awaitable[Any]) -> None:
    from workers import import_from_javascript

    hand_to_wait_until(import_from_javascript("cloudflare:workers").waitUntil, work)


class Worker:
    """The Worker's handlers and Durable Object classes (see :func:`create_worker`)."""

    def __init__(
        self,
        agents: Callable[[], Mapping[str, Any]] | None,
        *,
        runtime: Runtime,
        server: Callable[[], Any] | None,
        crons: Mapping[str, Sequence[str]],
        tasks: Mapping[str, Any],
        store: str | None,
        unit_options: dict[str, Any],
        host: Host = HOST,
    ) -> None:
        from ..tasks import tasks_from_config

        if runtime not in ("durable-objects", "default"):
            raise ValueError(f"unknown runtime {runtime!r}: use 'durable-objects' or 'default'")
        if (agents is None) == (server is None):
            raise TypeError("create_worker takes agents, or server= for your own app: one of the two")
        if runtime == "default" and server is None and not store:
            raise ValueError('the default runtime needs store="d1://BINDING" (or runtime="durable-objects")')
        self.runtime = runtime
        self.tasks = tasks_from_config(tasks)
        unknown = sorted({name for names in crons.values() for name in names} - {SWEEP_TASK, *self.tasks})
        if unknown:
            raise ValueError(f"crons name tasks that are not in tasks: {', '.join(unknown)}")
        self.crons = {cron: tuple(names) for cron, names in crons.items()}
        self._load_agents = agents
        self._load_server = server
        self._store_url = store
        self._options = unit_options
        self._agents: Mapping[str, Any] | None = None
        self._app: Any = None
        self._store: DurableObjectsStore | None = None  # the Worker's own (durable-objects runtime)
        self.host = host
        self.AgentUnitRun, self.AgentUnitIndex = durable_object_classes(
            self._object_unit, serve, lambda worker_env, ctx: cloudflare_host(worker_env, ctx, self.host)
        )

    # -- the apps, made at the first request (Workers limit startup time) ------------------

    def agents(self) -> Mapping[str, Any]:
        if self._agents is None:
            assert self._load_agents is not None
            self._agents = self._load_agents()
        return self._agents

    def _unit(self, store: Any, host: Host) -> Any:
        """The agent-unit app over ``store`` on ``host`` (made inside an invocation's ``use_host``,
        so ``$AGENT_UNIT_SECRET`` is read from the Worker's secrets)."""
        from ..http import create_agent_unit

        return create_agent_unit(self.agents(), store=store, host=host, **self._options)

    def _object_unit(self, store: DurableObjectsStore, on_continue: OnContinue) -> Any:
        # A run object's alarm sweeps its run; a run that yields continues in its next alarm.
        return _NoLifespan(self._unit(store, replace(self.host, sweep="alarm", continues=lambda _path: on_continue)))

    def app(self, worker_env: Any) -> Any:
        """The app the Worker itself serves (made once per isolate, with its first ``env``)."""
        if self._app is not None:
            return self._app
        with use_host(entered_host() or cloudflare_host(worker_env, None, self.host)):
            if self._load_server is not None:
                # The units your app creates while it is imported (or at a request) get this host.
                self._app = self._load_server()
            elif self.runtime == "durable-objects":
                self._store = DurableObjectsStore(worker_env)
                self._app = _NoLifespan(self._unit(self._store, replace(self.host, sweep="alarm")))
            else:
                host = replace(self.host, continues=_continue_at)
                self._app = _NoLifespan(self._unit(self._open_store(worker_env), host))
        return self._app

    def _open_store(self, worker_env: Any) -> Any:
        url = self._store_url or ""
        if url.startswith("d1://"):
            from ..stores.d1 import D1Store  # type: ignore[import-not-found,import-untyped,unused-ignore]

            binding = url.removeprefix("d1://").strip("/")
            database = getattr(worker_env, binding, None)
            if database is None:
                raise ValueError(f"store {url!r}: the Worker has no binding named {binding}: add it to wrangler.jsonc")
            return D1Store(database, binding=binding)
        from ..stores import open_store

        return open_store(url)

    # -- the handlers ------------------------------------------------------------------------

    async def fetch(self, request: Any, worker_env: Any, ctx: Any = None) -> Any:
        """The Worker's ``fetch``: route a run's requests to its object, serve the rest here."""
        with use_host(cloudflare_host(worker_env, ctx, self.host)):
            app = self.app(worker_env)
            if self._load_server is None and self.runtime == "durable-objects":
                assert self._store is not None  # made with the app
                store, run_id = self._store, self._object_for(request)
                if run_id is not None:

                    async def stub() -> Any:
                        return await store.stub_for(run_id) if run_id else store.fresh_stub()

                    first = await stub()
                    if first is not None:  # else no object holds the run: the Worker answers 404
                        return await forward(request, first, stub)
            return await serve(app, request, worker_env, ctx)

    def _object_for(self, request: Any) -> str | None:
        """The run whose object serves ``request`` ("" for a start: a new, empty object); None
        when the Worker serves it itself."""
        from urllib.parse import unquote, urlsplit

        path = unquote(urlsplit(str(request.url)).path)
        base = "/" + str(self._options.get("base_path", "/")).strip("/")
        if base != "/":
            if not (path == base or path.startswith(base + "/")):
                return None
            path = path[len(base) :]
        parts = tuple(part for part in path.split("/") if part)
        if str(request.method).upper() == "POST" and any(_matches(parts, start) for start in _STARTS):
            return ""
        if len(parts) >= 2 and parts[0] == "runs":
            return parts[1]
        return None

    async def scheduled(self, controller: Any, worker_env: Any, ctx: Any = None) -> None:
        """The Worker's ``scheduled``: run the tasks (and the sweep) of the Cron Trigger that fired."""
        from ..scheduler import run_host_tick

        at = datetime.fromtimestamp(float(controller.scheduledTime) / 1000, UTC)
        names = self.crons.get(str(controller.cron), ())
        with use_host(cloudflare_host(worker_env, ctx, self.host)):
            engines = self._engines(self.app(worker_env))
            for name in names:
                if name == SWEEP_TASK:
                    for engine in engines:
                        if engine.host.sweep == "scheduled":  # run objects sweep by their alarms
                            await engine.sweep(wait=True)
                    continue
                if engines:  # claimed in the (first) agent unit's store
                    await engines[0].run_tick(self.tasks[name], at, owner="cloudflare-cron")
                else:
                    await run_host_tick(self.tasks[name], at, None, owner="cloudflare-cron")

    def _engines(self, app: Any) -> list[Any]:
        if self._load_server is None:
            return [app.engine]
        from ..http import agent_units

        return [unit.engine for unit in agent_units()]


def _continue_at(path: str) -> OnContinue | None:
    """A yielded run continues at the Worker's own URL (``$AGENT_UNIT_URL``) under ``path``, else in
    this request (the default runtime; read from the Worker's bindings when the unit is made)."""
    url = agent_env.get("AGENT_UNIT_URL")
    secret = agent_env.get("AGENT_UNIT_SECRET")
    if not url or not secret:
        return None
    return continue_in_worker(url.rstrip("/") + path, secret)


def continue_in_worker(url: str, secret: str) -> Callable[[str], Awaitable[None]]:
    """The default runtime's ``on_continue``: POST ``{url}/__agent-unit/continue?wait=0`` with the
    Worker's own ``fetch``.

    Not :func:`agent_unit.hosts.continuation.continue_at`: it sends with httpx, which a Worker
    does not have, and holds the request open while the next slice runs, which a Worker cannot
    do (its ``waitUntil`` ends 30 seconds after the response, and a subrequest cut then cancels
    the invocation it reached). With ``wait=0`` the continuation answers as soon as it has
    claimed the run, and its own ``waitUntil`` holds the slice (:func:`serve`).
    """
    import json
    import logging

    target = f"{url.rstrip('/')}/__agent-unit/continue?wait=0"
    headers = {"authorization": f"Bearer {secret}", "content-type": "application/json"}

    async def on_continue(run_id: str) -> None:
        from pyodide.http import pyfetch  # type: ignore[import-not-found]

        log = logging.getLogger("agent_unit.hosts")
        try:
            response = await pyfetch(target, method="POST", body=json.dumps({"run_id": run_id}), headers=headers)
        except OSError as exc:  # pyfetch's error for a request that got no answer
            log.warning("continuing run %s at %s failed (%s): the next sweep continues it", run_id, url, exc)
            return
        if not response.ok:
            log.warning("continuing run %s at %s: HTTP %s: the next sweep continues it", run_id, url, response.status)

    return on_continue


RETRIES = 3
"""Attempts of a read sent to a run's Durable Object when the platform says it may be retried."""


def retryable(error: BaseException) -> bool:
    """Whether Cloudflare marks ``error`` (a Durable Object call's) as safe to retry: ``retryable``
    and not ``overloaded`` (retrying an overloaded object only adds to its load)."""
    js = getattr(error, "js_error", error)  # Pyodide's JsException carries the JavaScript Error
    try:
        return bool(getattr(js, "retryable", False)) and not bool(getattr(js, "overloaded", False))
    except Exception:  # noqa: BLE001 (a JavaScript proxy that cannot be read is not marked)
        return False


async def forward(request: Any, stub: Any, renew: Callable[[], Awaitable[Any]]) -> Any:
    """Send ``request`` to its run object through ``stub``. A read (GET, HEAD) is sent again, with
    a new stub from ``renew`` and backoff, when the call fails with an error Cloudflare marks
    retryable (the object was restarting or moving: seen as ``Network connection lost`` in the
    first read after a restart). A write is sent once: whether the object ran it is unknown, and
    a resume must not run twice."""
    reads = str(request.method).upper() in ("GET", "HEAD")
    for attempt in range(RETRIES):
        try:
            return await stub.fetch(getattr(request, "js_object", request))
        except Exception as exc:
            if not reads or attempt == RETRIES - 1 or not retryable(exc):
                raise
            await asyncio.sleep(0.05 * 2**attempt)
            stub = await renew() or stub  # a stub that failed is not used again (Cloudflare's advice)
    raise AssertionError("unreachable")


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(parts) == len(pattern) and all(p == "*" or p == part for part, p in zip(parts, pattern, strict=True))


def create_worker(
    agents: Callable[[], Mapping[str, Any]] | None = None,
    *,
    runtime: Runtime = "durable-objects",
    server: Callable[[], Any] | None = None,
    crons: Mapping[str, Sequence[str]] | None = None,
    tasks: Mapping[str, Any] | None = None,
    store: str | None = None,
    host: Host = HOST,
    **unit_options: Any,
) -> Worker:
    """The Worker for ``agents`` (a function that loads them: called at the first request).

    ``server`` loads your own ASGI app instead (no agents then). ``crons`` maps each Cron
    Trigger to task names (``"agent-unit:sweep"`` is the sweep); ``tasks`` are the ``[tasks.NAME]``
    tables. ``store`` is the default runtime's ``"d1://BINDING"``. ``unit_options`` go to
    :func:`agent_unit.http.create_agent_unit` (``name``, ``base_path``, ``authorize``, ``budget``...).
    The Durable Object bindings are named ``AGENT_UNIT_RUNS`` and ``AGENT_UNIT_INDEX``.
    ``host`` (default :data:`HOST`) is what the Worker's units are given, with each invocation's
    bindings and ``ctx.waitUntil`` (:func:`cloudflare_host`); its ``allowed_hosts`` is ``["*"]``:
    Cloudflare routes a request to the Worker only under its own routes and domains, so a DNS
    rebinding cannot arrive.
    """
    return Worker(
        agents,
        runtime=runtime,
        server=server,
        crons=crons or {},
        tasks=tasks or {},
        store=store,
        unit_options=unit_options,
        host=host,
    )
