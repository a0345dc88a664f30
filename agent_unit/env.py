"""The host's configuration and background work, read and used the same way on every host.

    from agent_unit.env import env, wait_until

    api_key = env["MAIL_API_KEY"]
    wait_until(send_receipt(order))   # runs after the response

``env`` is a read-only mapping: the process environment, and on Cloudflare Workers the Worker's
bindings and secrets under the same names (the current :class:`~agent_unit.Host`'s
``bindings``: the Worker's entry serves each request inside ``use_host`` with them).

``wait_until(work)`` keeps ``work`` running after the response. Where it runs depends on the host:

- server, docker, ``agent-unit dev``, tests: a task this process tracks. A graceful shutdown
  awaits :func:`drain` (the app's lifespan does), which waits for the work within a bound and
  then cuts what is left, logging each piece it cut by name.
- AWS Lambda freezes the process once a response is returned, so the handler drains the work
  before it returns the response.
- Vercel and Cloudflare give each invocation a ``waitUntil`` of their own: the host's entry
  serves the invocation inside ``use_host`` with a :class:`~agent_unit.Host` whose
  ``wait_until`` is it.

Work that raises is logged (logger ``agent_unit``) with its name and traceback, never swallowed.
The work lives in memory only: a crash of the process (``kill -9``, an out-of-memory kill, a host
that ends the instance) loses it. Work that must survive a crash belongs in a run's steps.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from ._host import WaitUntil, current_host

__all__ = ["WaitUntil", "drain", "env", "get", "pending", "wait_until"]

log = logging.getLogger("agent_unit")


def get(name: str, default: str | None = None) -> Any:
    """``name`` from the host's bindings, else the process environment, else ``default``."""
    bound = current_host().bindings
    if bound is not None and name in bound:
        return bound[name]
    return os.environ.get(name, default)


class _Env(Mapping[str, Any]):
    """The host's bindings over the process environment, read at each access (never a stale copy)."""

    def __getitem__(self, name: str) -> Any:
        bound = current_host().bindings
        if bound is not None and name in bound:
            return bound[name]
        return os.environ[name]

    def __iter__(self) -> Iterator[str]:
        seen = set(current_host().bindings or ())
        yield from seen
        yield from (name for name in os.environ if name not in seen)

    def __len__(self) -> int:
        return len(set(current_host().bindings or ()) | set(os.environ))

    def __repr__(self) -> str:
        return f"<agent_unit.env: {len(self)} names>"  # never the values: they hold secrets


env: Mapping[str, Any] = _Env()
"""The host's configuration, read-only: ``env["NAME"]``, ``env.get("NAME", default)``."""


# -- background work --------------------------------------------------------------------------

_tasks: set[asyncio.Task[Any]] = set()


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(text: str, missing: Callable[[str], Exception]) -> str:
    """``${NAME}`` in ``text`` from :func:`get`, where the code runs, so a secret never sits in a
    file or a build; ``missing(NAME)`` is the error raised for a name that is not set."""

    def value(match: re.Match[str]) -> str:
        found = get(match.group(1))
        if found is None:
            raise missing(match.group(1))
        return str(found)

    return _VARIABLE.sub(value, text)


def wait_until(work: Awaitable[Any], *, name: str | None = None) -> None:
    """Keep ``work`` running after the response, in this process's memory.

    A graceful shutdown waits for it (and logs what it cuts); work that raises is logged. A
    crash of the process loses it: work that must survive one belongs in a run's steps.

    Call it from async code, or from a sync route's worker thread while the app's event loop
    runs (the work is handed to that loop). ``name`` (default: the coroutine's name) is what the
    logs say if the work raises or is cut at shutdown.
    """
    if not inspect.isawaitable(work):
        raise TypeError(f"wait_until takes an awaitable (a coroutine, a task), not {type(work).__name__}")
    label = name or _name(work)
    hook = current_host().wait_until  # the host's own waitUntil, if it has one
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if _in_worker_thread(lambda: _accept(work, label, hook)):
            return
        if inspect.iscoroutine(work):
            work.close()  # no "coroutine was never awaited" warning on top of the error
        raise RuntimeError(
            f"wait_until({label}) needs a running event loop: call it from async code or a request"
        ) from None
    _accept(work, label, hook)


def _accept(work: Awaitable[Any], label: str, hook: WaitUntil | None) -> None:
    """On the event loop: hand ``work`` to the host's ``waitUntil``, or track it here."""
    if hook is not None:
        hook(_logged(work, label))
    else:
        _track(asyncio.get_running_loop(), work, label)


def pending() -> list[str]:
    """The names of the work this process tracks that has not finished yet (on this event loop)."""
    return [task.get_name() for task in _current()]


async def drain(seconds: float | None = 30.0) -> list[str]:
    """Wait for the tracked work of this event loop, for at most ``seconds`` (None: no bound).

    Work started while draining is waited for too. What is still running at the bound is
    cancelled and logged by name; the names are returned. A graceful shutdown awaits this.
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    while work := _current():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        await asyncio.wait(work, timeout=left)
    cut = _current()
    for task in cut:
        log.error("wait_until: %s was still running at shutdown after %ss: cut", task.get_name(), seconds)
        task.cancel()
    if cut:
        await asyncio.gather(*cut, return_exceptions=True)
    return [task.get_name() for task in cut]


def _current() -> list[asyncio.Task[Any]]:
    loop = asyncio.get_running_loop()
    return [task for task in _tasks if not task.done() and task.get_loop() is loop]


def _in_worker_thread(call: Callable[[], None]) -> bool:
    """Run ``call`` on the event loop whose worker thread this is (a sync route runs in one)."""
    try:
        from anyio.from_thread import run_sync
    except ImportError:
        return False
    try:
        run_sync(call)
    except RuntimeError:  # not a worker thread of a running loop
        return False
    return True


def _track(loop: asyncio.AbstractEventLoop, work: Awaitable[Any], label: str) -> None:
    task = asyncio.ensure_future(work, loop=loop)
    task.set_name(label)
    _tasks.add(task)
    task.add_done_callback(_finished)


def _finished(task: asyncio.Task[Any]) -> None:
    _tasks.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("wait_until: %s failed", task.get_name(), exc_info=error)


async def _logged(work: Awaitable[Any], label: str) -> Any:
    """``work`` for a host's ``waitUntil``: a failure is logged with its name, as here."""
    try:
        return await work
    except Exception:
        log.exception("wait_until: %s failed", label)
        return None


def _name(work: Awaitable[Any]) -> str:
    if isinstance(work, asyncio.Task):
        return work.get_name()
    return getattr(work, "__qualname__", None) or type(work).__name__
