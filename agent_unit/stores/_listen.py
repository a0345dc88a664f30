"""Live tails across processes: hear a store's notifications in the background, reconnecting."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from .._cancelling import cancel_requested

__all__ = ["HEARING", "Listener"]

log = logging.getLogger("agent_unit.stores")

HEARING = ""
"""What a session yields once its subscription is in effect (it hears every write from then
on); run ids follow. Never a run id."""


class Listener:
    """Runs ``session()`` (:data:`HEARING`, then run ids, one per stored write, until the
    connection ends) in a task.

    ``hearing(True)`` once a session hears every write: readers then wait for a notification
    instead of polling the store. ``hearing(False)`` when it is lost: readers poll again until
    the listener is back; it reconnects with a growing pause (0.1 s to 5 s).
    """

    def __init__(self, url: str, session: Callable[[], AsyncIterator[str]]) -> None:
        self._url = url
        self._session = session
        self._task: asyncio.Task[None] | None = None

    def start(self, notify: Callable[[str], None], hearing: Callable[[bool], None]) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen(notify, hearing))

    async def _listen(self, notify: Callable[[str], None], hearing: Callable[[bool], None]) -> None:
        delay = 0.1
        while True:
            heard = False
            try:
                async for run_id in self._session():
                    if run_id == HEARING:
                        delay, heard = 0.1, True
                        hearing(True)
                    else:
                        notify(run_id)
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect
                log.warning("live tail from %s lost (%s); reconnecting", self._url, type(exc).__name__)
            if heard:
                hearing(False)
            if cancel_requested():  # a driver turned the cancellation into an error or an end: stop all the same
                raise asyncio.CancelledError
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
