"""Live tails across processes: hear a store's notifications in the background, reconnecting."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

__all__ = ["Listener"]

log = logging.getLogger("agent_unit.stores")


class Listener:
    """Runs ``session()`` (run ids, one per stored write, until the connection ends) in a task.

    When the store's server goes away, readers fall back to polling until the listener is
    back: it reconnects with a growing pause (0.1 s to 5 s).
    """

    def __init__(self, url: str, session: Callable[[], AsyncIterator[str]]) -> None:
        self._url = url
        self._session = session
        self._task: asyncio.Task[None] | None = None

    def start(self, notify: Callable[[str], None]) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen(notify))

    async def _listen(self, notify: Callable[[str], None]) -> None:
        delay = 0.1
        while True:
            try:
                async for run_id in self._session():
                    delay = 0.1
                    notify(run_id)
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect
                log.warning("live tail from %s lost (%s); reconnecting", self._url, type(exc).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
