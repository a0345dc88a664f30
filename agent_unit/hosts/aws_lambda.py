"""AWS Lambda: one handler for HTTP events (through Mangum) and the scheduled sweep.

- The app, its engine and its store client are made once per container, at the first
  invocation, and reused: Mangum runs every invocation on the same event loop, so the store's
  connections stay open between them. Lifespan is off: it would run per invocation.
- An EventBridge schedule whose input is ``{"agent_unit": "sweep"}`` runs the sweep: it wakes
  due sleepers and recovers runs whose invocation ended mid-step (their lease lapsed).
- Lambda's Python runtime sends a response only once it is complete, so the app is
  ``buffered``: a start or resume runs the run in the invocation until it parks, ends or
  yields at its budget, then answers with the events so far; the client reads the rest from
  ``/runs/{id}/events`` with ``Last-Event-ID``.
- An EventBridge schedule whose input is ``{"agent_unit": "task", "task": NAME, "scheduled_at":
  "<aws.scheduler.scheduled-time>"}`` runs that task once per tick (:func:`run_host_tick`:
  claimed in the store first, so a repeated delivery runs nothing).
- Lambda freezes the process once the handler returns, so ``wait_until`` work started by the
  invocation is finished before the response is returned (within the invocation's time left).
- OpenTelemetry's buffered spans, metrics and logs are exported before the handler returns (a
  frozen process would hold them until its next invocation, or lose them).
- A run that yields continues in a fresh invocation: :func:`continue_at` POSTs
  ``/__agent-unit/continue`` at the function's own URL (configured, never taken from a
  request) with the secret, and returns once the request is on its way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import telemetry
from .._host import Host, use_host
from ..errors import TaskError
from . import continuation

if TYPE_CHECKING:
    import asyncio

    from .._tasks import Task

# What a cold start imports is this module and the handler: asyncio, the task registry, the engine,
# pydantic and Starlette wait for the first invocation (it builds the app and needs them then).

__all__ = ["continue_at", "lambda_handler", "lambda_host"]

log = logging.getLogger("agent_unit.hosts.aws_lambda")

SWEEP = {"agent_unit": "sweep"}
TASK = "task"


def continue_at(url: str | None, secret: str | None) -> Callable[[str], Any]:
    """The engine's ``on_continue``: hand a yielded run to a fresh invocation at ``url``.

    Without a URL the run stays queued and the next scheduled sweep continues it (continuing
    here would run past this invocation's budget).
    """
    if url:
        return continuation.continue_at(url, secret)

    async def sweep_later(run_id: str) -> None:
        log.warning("run %s yielded but AGENT_UNIT_URL is not set: the next sweep continues it", run_id)

    return sweep_later


def lambda_host(url: str | None, secret: str | None, *, allowed_hosts: Iterable[str] = ("*",)) -> Host:
    """AWS Lambda's :class:`~agent_unit.Host`, for a function at ``url`` (its own, from
    configuration) whose internal routes take ``secret``.

    Whole responses (``buffered``: Lambda's Python runtime sends a response once it is complete);
    the EventBridge schedule sweeps (the container is frozen between invocations); a run that
    yields continues under its unit's path at ``url`` (:func:`continue_at`); the internal routes
    need the secret. ``allowed_hosts`` ``["*"]``: the platform routes by Host, so a rebinding
    cannot arrive. ``wait_until`` work is this process's, drained before each response.
    """
    return Host(
        name="aws-lambda",
        buffered=True,
        sweep="scheduled",
        continues=lambda path: continue_at(url and url.rstrip("/") + path, secret),
        secret=secret,
        require_secret=True,
        allowed_hosts=tuple(allowed_hosts),
    )


def lambda_handler(
    create_app: Callable[[], Any],
    tasks: Mapping[str, Any] | None = None,
    *,
    lifespan: bool = False,
    host: Host | None = None,
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda handler for the app ``create_app()`` makes (once per container), and for the
    scheduled ``tasks`` (``{name: {"schedule", "handler"}}``) its EventBridge schedules name.

    ``lifespan=True`` (a user's own app) runs the app's lifespan startup once per container, at
    its first invocation, and never its shutdown: Lambda freezes and then ends the container
    without notice. (Mangum's own ``lifespan="auto"`` would start and stop it every invocation.)
    ``host`` (:func:`lambda_host`): every invocation, ``create_app()`` included, runs inside
    :func:`~agent_unit.use_host` with it, so the agent units a user's own app creates (at
    import, in its lifespan, at a request) are Lambda's.
    """
    state: dict[str, Any] = {}
    registry: Mapping[str, Task] = {}
    if tasks:  # checked at the cold start: a task that cannot run fails the deploy, not its first tick
        from .._tasks import tasks_from_config

        registry = tasks_from_config(tasks)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            if host is None:
                return invoke(event, context)
            with use_host(host):
                return invoke(event, context)
        finally:
            telemetry.flush(_time_left(context) or 5.0)  # Lambda freezes the process once this returns

    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if "app" not in state:
            from mangum import Mangum

            from ..env import drain

            state["drain"] = drain

            state["app"] = app = create_app()
            state["mangum"] = Mangum(app, lifespan="off")
            if lifespan:
                state["lifespan"] = _start_lifespan(app)
        if isinstance(event, dict) and event.get("agent_unit") == TASK:
            done = _loop().run_until_complete(_task(registry, event, state["app"]))
            _loop().run_until_complete(state["drain"](_time_left(context)))
            return done
        if isinstance(event, dict) and event.get("agent_unit") == SWEEP["agent_unit"]:
            return _loop().run_until_complete(_sweep(state["app"]))
        response: dict[str, Any] = state["mangum"](event, context)
        _loop().run_until_complete(state["drain"](_time_left(context)))  # the response waits for wait_until work
        return response

    return handler


def _start_lifespan(app: Any) -> Any:
    """The app's lifespan startup, run to completion on the invocations' loop; its task then
    waits there for a shutdown that never comes (the container is ended without one)."""
    from mangum.protocols.lifespan import LifespanCycle

    _loop()  # the loop Mangum and the lifespan share
    cycle = LifespanCycle(app, "auto")
    cycle.__enter__()
    return cycle


def _engines(app: Any) -> list[Any]:
    """The engines the host serves: the agent-unit app's own, or those of every agent unit a
    user's own app created (``agent_units()``)."""
    engine = getattr(app, "engine", None)
    if engine is not None:
        return [engine]
    from ..http import agent_units

    return [unit.engine for unit in agent_units()]


async def _sweep(app: Any) -> dict[str, int]:
    total = {"woken": 0, "recovered": 0, "deleted": 0}
    for engine in _engines(app):
        result = await engine.sweep(wait=True)
        total = {
            "woken": total["woken"] + result.woken,
            "recovered": total["recovered"] + result.recovered,
            "deleted": total["deleted"] + result.deleted,
        }
    return total


async def _task(registry: Mapping[str, Task], event: dict[str, Any], app: Any) -> dict[str, Any]:
    name = event.get("task")
    task = registry.get(name) if isinstance(name, str) else None
    if task is None:
        raise TaskError(f"no task named {name!r} in this build: the tasks are {', '.join(sorted(registry)) or 'none'}")
    from .._tasks import last_tick

    given = event.get("scheduled_at")
    now = datetime.now(UTC)
    at = (
        datetime.fromisoformat(given.replace("Z", "+00:00"))
        if isinstance(given, str)
        else last_tick(task.schedule, now)
    )
    engines = _engines(app)  # the tick is claimed in the (first) agent unit's store, if there is one
    if engines:
        return dict(await engines[0].run_tick(task, at))
    from .._scheduler import run_host_tick  # the store and its records: at a task's tick, not at a cold start

    return await run_host_tick(task, at, None, owner="aws-lambda")


def _time_left(context: Any) -> float | None:
    """Seconds this invocation has left, less a second to return the response; None if unknown."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return None if remaining is None else max(0.0, remaining() / 1000 - 1.0)


def _loop() -> asyncio.AbstractEventLoop:
    """The event loop Mangum runs invocations on (one per container), made if there is none yet."""
    import asyncio

    try:
        return asyncio.get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop
