"""Vercel: the app a function built by ``agent-unit build --preset vercel`` serves.

Vercel's Python runtime (the ``vercel-runtime`` package, vendored into the function) imports
the build's entry and serves its ``app``. Around the agent-unit app this adds what the host
needs, and nothing at import time beyond the standard library:

- An invocation ends only when the runs it started have parked, ended or yielded. Vercel
  may freeze an instance once its requests are answered, so a run left working after a
  ``202`` would stall; the response itself is not held back (the runtime streams).
- ``wait_until`` work started by a request is part of its invocation: the app awaits it after
  the response is sent, as the launcher's own ``waitUntil`` does (the launcher ends the
  invocation when the app returns). The ``vercel`` package's ``wait_until`` is not used: outside
  an invocation it closes a coroutine without running it.
- A run that reaches its ``budget`` continues in a fresh invocation: a POST to the
  deployment's own ``/__agent-unit/continue`` with the secret. The URL comes from the
  configuration or Vercel's environment, never from a request's Host header.
- A scheduled task is a cron entry of its own: Vercel calls ``/__agent-unit/tasks/{name}``
  (under the base path) with ``Bearer $CRON_SECRET``, and the task's latest tick runs once
  (:func:`~agent_unit._scheduler.run_host_tick`: claimed in the store first, so a repeated
  call runs nothing).
- Vercel's cron calls the sweep with ``GET`` and ``Authorization: Bearer $CRON_SECRET``:
  that request reaches the sweep route as a POST, and the cron secret is accepted there.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .. import env, telemetry
from .._host import Host, use_host
from .._threads import run_in_thread
from ..errors import TaskNotFound, Unauthorized
from . import continuation

__all__ = ["VercelApp", "continue_at", "create_app", "deployment_url", "secrets", "serve", "vercel_host"]

log = logging.getLogger("agent_unit.hosts.vercel")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# The request a run's execution was started in: its task inherits the context it was made in.
_request: contextvars.ContextVar[object | None] = contextvars.ContextVar("agent_unit_vercel_request", default=None)


def deployment_url(configured: str | None = None) -> str | None:
    """This deployment's own URL: ``$AGENT_UNIT_URL``, the configured ``url``, else Vercel's.

    In production that is the project's production domain (a deployment's own ``*.vercel.app``
    URL is behind Deployment Protection there); elsewhere it is the deployment's URL, so a
    preview continues its runs on the preview's code and store.
    """
    url = env.get("AGENT_UNIT_URL") or configured
    if not url:
        production = env.get("VERCEL_ENV") == "production"
        url = (production and env.get("VERCEL_PROJECT_PRODUCTION_URL")) or env.get("VERCEL_URL")
    if not url:
        return None
    return (url if "://" in url else f"https://{url}").rstrip("/")


def secrets() -> tuple[str | None, str | None]:
    """``(secret, cron secret)``: the internal routes' secret is ``$AGENT_UNIT_SECRET``, or
    ``$CRON_SECRET`` when only that one is set (one secret is then enough)."""
    cron = env.get("CRON_SECRET") or None
    return env.get("AGENT_UNIT_SECRET") or cron, cron


def continue_at(url: str | None, secret: str | None) -> Callable[[str], Awaitable[None]] | None:
    """The engine's ``on_continue`` (see :func:`agent_unit.hosts.continuation.continue_at`).

    ``None`` without a URL or a secret: the run then continues in this invocation, which is
    what a local run wants. With Deployment Protection on, the bypass secret lets the
    deployment call itself.
    """
    if not url or not secret:
        return None
    bypass = env.get("VERCEL_AUTOMATION_BYPASS_SECRET")
    return continuation.continue_at(url, secret, {"x-vercel-protection-bypass": bypass} if bypass else None)


def vercel_host(url: str | None = None, *, allowed_hosts: Iterable[str] = ("*",)) -> Host:
    """Vercel's :class:`~agent_unit.Host`, read from the environment at start.

    Vercel's cron sweeps (instances freeze between requests); a run that yields continues under
    its unit's path at :func:`deployment_url` (``url``: the configured one); the internal routes
    need the secret (``$AGENT_UNIT_SECRET``, else ``$CRON_SECRET``). ``allowed_hosts`` ``["*"]``:
    Vercel routes a request to the function only under the deployment's own domains (its URL,
    branch URL, aliases, custom domains), so a DNS rebinding cannot arrive. Each request's
    ``wait_until`` is its invocation's (:class:`VercelApp` adds it per request).
    """
    own, secret = deployment_url(url), secrets()[0]
    return Host(
        name="vercel",
        sweep="scheduled",
        continues=lambda path: continue_at(own and own + path, secret),
        secret=secret,
        require_secret=True,
        allowed_hosts=tuple(allowed_hosts),
    )


class VercelApp:
    """The ASGI app Vercel's runtime serves: the agent-unit app, held open until its runs settle."""

    def __init__(
        self,
        app: Any,
        *,
        base_path: str = "/",
        secret: str | None,
        cron_secret: str | None,
        tasks: Mapping[str, Any] | None = None,
        host: Host | None = None,
    ) -> None:
        self.app = app
        self.host = host or vercel_host()
        self.engine = getattr(app, "engine", None)  # None: a user's own app (server = "module:app")
        prefix = "/" + base_path.strip("/")
        self.sweep_path = ("" if prefix == "/" else prefix) + "/__agent-unit/sweep"
        self.tasks_path = ("" if prefix == "/" else prefix) + "/__agent-unit/tasks/"
        from .._tasks import tasks_from_config

        self.tasks = tasks_from_config(tasks or {})
        self._secret = secret
        self._cron_secret = cron_secret

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            with use_host(self.host):  # the units a user's app creates in its lifespan are Vercel's
                await self.app(scope, receive, send)  # lifespan: the store is checked once per instance
            return
        if scope["path"] == self.sweep_path and self.engine is not None:
            scope = self._from_cron(scope)
        request = object()
        reset = _request.set(request)
        later: list[asyncio.Future[Any]] = []
        try:
            with use_host(replace(self.host, wait_until=lambda work: later.append(asyncio.ensure_future(work)))):
                serve = self.app
                if scope["path"].startswith(self.tasks_path) or (
                    scope["path"] == self.sweep_path and self.engine is None
                ):
                    serve = self._internal
                await serve(scope, receive, send)
                await self.settle(request)
            while waiting := [task for task in later if not task.done()]:  # work may start more work
                await asyncio.wait(waiting)
            if telemetry.active() is not None:  # the instance may be frozen once this returns
                await run_in_thread(telemetry.flush)
        finally:
            _request.reset(reset)

    async def settle(self, request: object) -> None:
        """Wait until the runs this request started have parked, ended or yielded.

        Only this request's: Vercel may send another invocation (a continuation, say) to the
        same instance, and this one must not stay open for that one's work.
        """
        while running := [task for task in self._executing() if _started_in(task, request)]:
            await asyncio.wait(running)

    async def _internal(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A cron request: with one of the secrets, run a task's latest tick once, or (around a
        user's own app) sweep every agent unit it created."""
        from starlette.responses import JSONResponse

        from .._scheduler import run_host_tick
        from .._tasks import last_tick

        given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = given.partition(" ")
        accepted = [secret for secret in (self._cron_secret, self._secret) if secret]
        if scheme.lower() != "bearer" or not any(
            hmac.compare_digest(token.strip().encode(), secret.encode()) for secret in accepted
        ):
            message = "send Authorization: Bearer $CRON_SECRET (or $AGENT_UNIT_SECRET)"
            response = JSONResponse({"error": {"code": Unauthorized.code, "message": message}}, status_code=401)
        elif scope["path"] == self.sweep_path:
            total = {"woken": 0, "recovered": 0, "deleted": 0}
            for engine in self._engines():
                result = await engine.sweep(wait=True)
                total = {key: total[key] + getattr(result, key) for key in total}
            response = JSONResponse(total)
        elif (task := self.tasks.get(scope["path"].removeprefix(self.tasks_path))) is None:
            message = f"no task named {scope['path'].removeprefix(self.tasks_path)!r} in this deployment"
            response = JSONResponse({"error": {"code": TaskNotFound.code, "message": message}}, status_code=404)
        else:
            at = last_tick(task.schedule, datetime.now(UTC))  # Vercel calls at the tick, or a little after
            engines = self._engines()  # claimed in the (first) agent unit's store, if there is one
            done = await (engines[0].run_tick(task, at) if engines else run_host_tick(task, at, None, owner="vercel"))
            response = JSONResponse(done)
        await response(scope, receive, send)

    def _engines(self) -> list[Any]:
        """The agent-unit app's engine, or those of every agent unit a user's own app created."""
        if self.engine is not None:
            return [self.engine]
        from ..http import agent_units

        return [unit.engine for unit in agent_units()]

    def _executing(self) -> list[asyncio.Task[None]]:
        """The engines' executions still running in this process."""
        return [task for engine in self._engines() for task in engine.executing().values() if not task.done()]

    def _from_cron(self, scope: Scope) -> Scope:
        """Vercel's cron sends ``GET`` with its own secret; the sweep route takes a POST with ours."""
        headers = list(scope["headers"])
        given = dict(headers).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = given.partition(" ")
        if (
            self._cron_secret
            and self._secret
            and self._cron_secret != self._secret
            and scheme.lower() == "bearer"
            and hmac.compare_digest(token.strip().encode(), self._cron_secret.encode())
        ):
            headers = [(k, v) for k, v in headers if k != b"authorization"]
            headers.append((b"authorization", f"Bearer {self._secret}".encode("latin-1")))
        method = "POST" if scope["method"] == "GET" else scope["method"]
        return {**scope, "method": method, "headers": headers}


def _started_in(task: asyncio.Task[Any], request: object) -> bool:
    get_context = getattr(task, "get_context", None)  # Python 3.12+, as Vercel's runtime needs
    return get_context is None or get_context().get(_request) is request


def create_app(
    agents: Mapping[str, Any],
    *,
    store: Any,
    url: str | None = None,
    base_path: str = "/",
    tasks: Mapping[str, Any] | None = None,
    **options: Any,
) -> VercelApp:
    """The agent-unit app for a Vercel function: ``options`` go to ``create_agent_unit``;
    ``tasks`` (``{name: {"schedule", "handler"}}``) run when their cron entries call them.

    The unit is on :func:`vercel_host` (``url``): its internal routes need a secret
    (``$AGENT_UNIT_SECRET`` or ``$CRON_SECRET``), the engine does not sweep by itself (Vercel's
    cron does) and continues yielded runs at :func:`deployment_url`, and any ``Host`` is accepted.
    """
    from ..http import create_agent_unit

    secret, cron_secret = secrets()
    host = vercel_host(url)
    unit = create_agent_unit(
        agents, store=store, base_path=base_path, public_url=deployment_url(url), host=host, **options
    )
    return VercelApp(unit, base_path=base_path, secret=secret, cron_secret=cron_secret, tasks=tasks, host=host)


def serve(app: Any, *, tasks: Mapping[str, Any] | None = None, host: Host | None = None) -> VercelApp:
    """A user's own ASGI app (``server = "module:app"``) for a Vercel function: its ``wait_until``
    work is part of each invocation, ``tasks`` run when their cron entries call them, and the
    sweep's cron reaches every agent unit the app created. Each request runs inside
    :func:`~agent_unit.use_host` with ``host`` (default :func:`vercel_host`), so the units
    the app creates at a request are Vercel's; the entry imports the app inside it too."""
    secret, cron_secret = secrets()
    return VercelApp(app, secret=secret, cron_secret=cron_secret, tasks=tasks, host=host)
