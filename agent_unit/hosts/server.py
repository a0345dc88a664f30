"""Any ASGI app on a long-lived server (uvicorn, docker): its scheduled tasks and background work.

    from agent_unit.hosts.server import serve

    app = serve(user_app, tasks={"send-digest": {...}}, store="redis://...")

The wrapper adds what a process that lives between requests owes the app, around the app's
own lifespan (FastAPI, Starlette, Litestar, Quart) and without one (Django's ASGI app has none):

- after the app's startup, the in-process :class:`~agent_unit._scheduler.Scheduler` runs the
  tasks, each tick claimed once in ``store`` across servers;
- at shutdown (uvicorn on SIGTERM), before the app's own shutdown, the scheduler stops and
  ``wait_until`` work gets ``drain_seconds`` to finish; what is cut is logged by name.

Everything else passes through untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._host import SERVER
from .._scheduler import Scheduler
from ..env import drain
from ..stores import Store, open_store

__all__ = ["HOST", "ServerApp", "serve"]

HOST = SERVER
"""A long-lived server's :class:`~agent_unit.Host` (the defaults): the engine sweeps by
itself, a yielded run continues in this process, ``wait_until`` work is drained at shutdown."""

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ServerApp:
    """``app`` with the scheduler started after its startup and background work drained before its shutdown."""

    def __init__(self, app: Any, scheduler: Scheduler | None, *, drain_seconds: float, owned: Store | None) -> None:
        self.app = app
        self.scheduler = scheduler
        self.drain_seconds = drain_seconds
        self._owned = owned

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        seen: list[str] = []
        answered: list[str] = []

        async def inner_receive() -> Message:
            message = await receive()
            seen.append(message["type"])
            if message["type"] == "lifespan.shutdown":
                await self._stop()
            return message

        async def inner_send(message: Message) -> None:
            answered.append(message["type"])
            if message["type"] == "lifespan.startup.complete":
                self._start()
            await send(message)

        try:
            await self.app(scope, inner_receive, inner_send)
        except Exception:
            if answered:
                raise
            await self._own_lifespan(receive, send, startup_received="lifespan.startup" in seen)

    async def _own_lifespan(self, receive: Receive, send: Send, *, startup_received: bool) -> None:
        """The lifespan of an app that has none (it raised before answering the startup)."""
        if not startup_received:
            await receive()
        self._start()
        await send({"type": "lifespan.startup.complete"})
        while (await receive())["type"] != "lifespan.shutdown":
            pass
        await self._stop()
        await send({"type": "lifespan.shutdown.complete"})

    def _start(self) -> None:
        if self.scheduler is not None:
            self.scheduler.start()

    async def _stop(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop()
        await drain(self.drain_seconds)
        if self._owned is not None:
            await self._owned.close()
            self._owned = None


def serve(
    app: Any,
    *,
    tasks: Mapping[str, Any] | None = None,
    store: Store | str | None = None,
    drain_seconds: float = 8.0,
) -> ServerApp:
    """Wrap ``app`` for a server: ``tasks`` (``{name: {"schedule", "handler"}}``) claimed in
    ``store`` (a URL, opened here and closed at shutdown, or a store; default the embedded
    SQLite file), and ``wait_until`` work drained at shutdown."""
    owned = None
    scheduler = None
    if tasks:
        opened = store if isinstance(store, Store) else open_store(store)
        owned = None if isinstance(store, Store) else opened
        scheduler = Scheduler(tasks, opened)
    return ServerApp(app, scheduler, drain_seconds=drain_seconds, owned=owned)
