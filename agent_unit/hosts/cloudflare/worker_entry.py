"""The Worker: its ``fetch`` and ``scheduled`` handlers and its Durable Object classes (:func:`create_worker`).

Runtimes:

- ``"durable-objects"`` (the default): every run lives and executes in its own Durable Object
  (:mod:`.durable_objects_runtime`). A request that may start a run (``POST
  /agents/{name}/runs``, AG-UI, MCP, A2A) is served by a new, empty run object; a request about
  a run (``/runs/{id}/...``) by that run's object (:func:`.forward.forward`); the rest (the run
  list, the manifest, the cards, ``/healthz``, the inbox) by the Worker itself, reading the index
  object.
- ``"default"``: the Worker serves everything over ``store`` (``"d1://BINDING"``: the D1
  database bound under that name, :class:`.d1_store.D1Store`). A Cron Trigger runs the sweep (the
  task name ``"agent-unit:sweep"``); a run that yields continues at ``$AGENT_UNIT_URL``.

Both serve through the Workers ASGI adapter (:func:`.invocation.serve`). It runs an app's
lifespan around every request: agent-unit's own app needs none and is served without it; a
user's own app (``server``) gets its lifespan around each request. Each request, cron and alarm
runs inside ``use_host`` with :func:`.invocation.cloudflare_host` (the Worker's
:class:`~agent_unit.Host` with that invocation's bindings and ``waitUntil``), so a user's own
app imported there gets its units on it. Crons run tasks from ``scheduled``: ``crons`` maps each
Cron Trigger (in Cloudflare's own syntax, as ``wrangler.jsonc`` lists it) to task names, and each
tick is claimed once in the store, so a repeated delivery runs nothing.

Nothing here starts a thread, a signal handler or a subprocess (Pyodide has none), and the
import is cheap: the app and the agents are made at the first request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

from ... import env as agent_env
from ..._host import Host, OnContinue, entered_host, use_host
from .durable_objects_runtime import durable_object_classes
from .durable_objects_store import DurableObjectsStore
from .forward import forward
from .invocation import HOST, cloudflare_host, serve

__all__ = ["SWEEP_TASK", "Runtime", "Worker", "continue_in_worker", "create_worker"]

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
        from ..._tasks import tasks_from_config

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
        from ...http import create_agent_unit

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
            from .d1_store import D1Store

            binding = url.removeprefix("d1://").strip("/")
            database = getattr(worker_env, binding, None)
            if database is None:
                raise ValueError(f"store {url!r}: the Worker has no binding named {binding}: add it to wrangler.jsonc")
            return D1Store(database, binding=binding)
        from ...stores import open_store

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
        from ..._scheduler import run_host_tick

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
        from ...http import agent_units

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
