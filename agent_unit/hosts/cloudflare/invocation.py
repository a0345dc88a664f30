"""What one invocation of a Worker (a request, a Cron Trigger, an alarm) runs on, and how it is served.

:data:`HOST` is the Cloudflare host; :func:`cloudflare_host` is it for one invocation, with that
invocation's bindings (``env`` reads them: :class:`~.bindings.WorkerBindings`) and its
``ctx.waitUntil`` (:func:`agent_unit.env.wait_until` goes there). :func:`serve` answers a request
with an ASGI app through the Workers ASGI adapter (``workers.asgi``, the one Cloudflare ships)
on that host, and hands the runs the request started that go on after its response (a 202) to
``ctx.waitUntil``, so the Worker does not cancel them.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from ..._host import Host, use_host
from .bindings import WorkerBindings

__all__ = ["HOST", "cloudflare_host", "hand_to_wait_until", "serve"]

HOST = Host(name="cloudflare", sweep="scheduled", require_secret=True, allowed_hosts=("*",))
"""Cloudflare Workers: the Cron Trigger sweeps (run objects: their alarms), the internal routes need
the secret, and any ``Host`` is accepted: Cloudflare routes a request to the Worker only under its
own routes and domains, so a DNS rebinding cannot arrive."""


def cloudflare_host(worker_env: Any = None, ctx: Any = None, base: Host = HOST) -> Host:
    """``base`` for one invocation: ``env`` reads the Worker's bindings and secrets
    (``worker_env``), and :func:`agent_unit.env.wait_until` goes to ``ctx.waitUntil``."""
    wait = getattr(ctx, "waitUntil", None)
    return replace(
        base,
        bindings=None if worker_env is None else WorkerBindings(worker_env),
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
        from ...http import agent_units

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
