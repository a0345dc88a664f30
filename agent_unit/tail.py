"""Wake readers of a run's event stream when new events are stored.

Writers in this process call :meth:`EventTail.notify` after each write that stored events;
a reader takes a waiter *before* it reads, so an event stored between its read and its wait
still wakes it. Writers in other processes cannot notify: readers wait at most
``poll_interval`` before they read again (the floor for stores that cannot notify).
"""

from __future__ import annotations

import asyncio
import weakref

__all__ = ["EventTail"]


class EventTail:
    def __init__(self) -> None:
        # Weak: a waiter lives only while a reader holds it, so finished streams leave nothing behind.
        self._waiters: weakref.WeakValueDictionary[str, asyncio.Event] = weakref.WeakValueDictionary()

    def listen(self, run_id: str) -> asyncio.Event:
        """An event set at the next :meth:`notify` for ``run_id``; take it before reading."""
        waiter = self._waiters.get(run_id)
        if waiter is None:
            waiter = self._waiters[run_id] = asyncio.Event()
        return waiter

    def notify(self, run_id: str) -> None:
        waiter = self._waiters.pop(run_id, None)
        if waiter is not None:
            waiter.set()
