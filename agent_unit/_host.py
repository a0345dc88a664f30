"""``Host``: everything a host gives the runtime, in one object.

    from dataclasses import replace
    from agent_unit import Host, create_agent_unit

    host = Host(name="my-host", sweep="scheduled", continues=lambda path: continue_at(url + path, secret))
    app = create_agent_unit(agents, store=..., host=host)

A host (a server, AWS Lambda, Vercel, Cloudflare Workers, the test unit, one of your own) differs
from another in a few answers, and this is all of them:

- ``continues(path)``: how a run that yielded at its ``budget`` continues. Given the path the unit
  is served under (``""`` at the root, ``"/api/ai"`` when mounted there), the engine's
  ``on_continue(run_id)`` for it, or ``None``: the run continues in this process.
- ``schedule_wake(run_id, at)``: hands a sleeping run's wake-up to another scheduler (else timers).
- ``sweep``: who sweeps (wakes due sleepers, recovers runs whose lease lapsed, deletes expired
  runs): ``"background"``, the engine itself every ``sweep_interval`` (a long-lived process);
  ``"scheduled"``, the host's scheduler calls ``engine.sweep()`` (EventBridge, Vercel Cron, Cron
  Triggers); ``"alarm"``, each run's own alarm (Durable Objects): no schedule sweeps it.
- ``buffered``: the host sends a response only once it is complete (Lambda's Python runtime), so a
  start or resume runs the run in the request until it parks, ends or yields.
- ``wait_until(work)``: the host's own ``waitUntil`` (``None``: this process tracks the work and a
  graceful shutdown drains it).
- ``bindings``: names read before the process environment by :data:`agent_unit.env.env` and
  ``run.secrets`` (a Worker's bindings and secrets).
- ``secret``, ``require_secret``, ``allowed_hosts``: the internal routes' secret (``None``:
  ``$AGENT_UNIT_SECRET``), whether they refuse a request without one (``None``:
  ``AGENT_UNIT_ENV=production``), and the ``Host`` names a request may carry besides the
  deployment's own (``["*"]`` where the platform routes only the deployment's domains to it).

A host hands its ``Host`` to :func:`~agent_unit.http.create_agent_unit` (``host=``) and to
:class:`~agent_unit.RunEngine` (``host=``). Where it cannot, because the user's own app
(``server = "module:app"``) calls ``create_agent_unit()`` itself, the host's entry runs the import
of that app, and each request or invocation it serves, inside :func:`use_host`: a context
variable, so the units the app creates then (at import, in its lifespan, at a request) get the
host's answers, and nothing outlives the block. A context variable rather than a process-wide
default: two hosts in one process (a test suite, a Worker's isolate serving several objects)
never see each other's, and the tasks a request starts inherit its host (its ``wait_until``)
without anything to clear afterwards.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "Continues",
    "Host",
    "OnContinue",
    "ScheduleWake",
    "Sweep",
    "WaitUntil",
    "current_host",
    "entered_host",
    "use_host",
]

OnContinue = Callable[[str], Awaitable[None] | None]
"""The engine's ``on_continue(run_id)``: hands a run that yielded at its budget to a fresh execution."""

ScheduleWake = Callable[[str, datetime], Awaitable[None] | None]
"""``schedule_wake(run_id, at)``: hands a sleeping run's wake-up to another scheduler."""

Continues = Callable[[str], OnContinue | None]
"""``continues(path)``: the ``on_continue`` for a unit served under ``path``, or None (in-process)."""

WaitUntil = Callable[[Awaitable[Any]], None]
"""A host's ``waitUntil``: takes an awaitable and keeps the invocation alive until it is done."""

Sweep = Literal["background", "scheduled", "alarm"]


@dataclass(frozen=True)
class Host:
    """What a host provides (see the module's docstring); the defaults are a long-lived server's."""

    name: str = "server"
    continues: Continues | None = None
    schedule_wake: ScheduleWake | None = None
    sweep: Sweep = "background"
    buffered: bool = False
    wait_until: WaitUntil | None = None
    bindings: Mapping[str, Any] | None = None
    secret: str | None = None
    require_secret: bool | None = None
    allowed_hosts: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.sweep not in ("background", "scheduled", "alarm"):
            raise ValueError(f"Host(sweep={self.sweep!r}): use 'background', 'scheduled' or 'alarm'")
        if isinstance(self.allowed_hosts, str):  # a lone name, not its letters
            raise TypeError(f"Host(allowed_hosts={self.allowed_hosts!r}): pass a list of names")
        object.__setattr__(self, "allowed_hosts", tuple(self.allowed_hosts))

    @property
    def background_sweep(self) -> bool:
        """Whether the engine sweeps by itself (a long-lived process) rather than the host."""
        return self.sweep == "background"

    def on_continue(self, path: str = "") -> OnContinue | None:
        """The engine's ``on_continue`` for a unit served under ``path`` (None: in this process)."""
        return None if self.continues is None else self.continues(path)


SERVER = Host()
"""The plain server's (``agent-unit dev``, docker, uvicorn): the defaults."""

_current: contextvars.ContextVar[Host | None] = contextvars.ContextVar("agent_unit_host", default=None)


def current_host() -> Host:
    """The host of the code running now: the innermost :func:`use_host`, else the plain server's."""
    return _current.get() or SERVER


def entered_host() -> Host | None:
    """The innermost :func:`use_host`'s host, or None outside every one."""
    return _current.get()


@contextlib.contextmanager
def use_host(host: Host) -> Iterator[Host]:
    """Run the block (and the tasks started in it, which inherit the context) on ``host``.

    A host's entry wraps the import of a user's own app and each request or invocation in it.
    """
    token = _current.set(host)
    try:
        yield host
    finally:
        _current.reset(token)
