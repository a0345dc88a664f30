"""Wake readers of a run's event stream when new events are stored.

Writers in this process call :meth:`EventTail.notify` after each write that stored events;
a reader takes a waiter *before* it reads, so an event stored between its read and its wait
still wakes it. Writers in other processes reach readers through the store when it can
notify (Redis pub/sub, Postgres LISTEN/NOTIFY: its ``watch(notify, hearing)``, started at the
first reader). While the store's subscription hears every write (:attr:`EventTail.hearing`),
a reader waits for a notification, however many readers there are; otherwise (no such store,
or its subscription is lost) readers wait at most ``poll_interval`` before they read again.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

__all__ = ["EventTail"]


class EventTail:
    def __init__(self, store: object = None) -> None:
        # Weak: a waiter lives only while a reader holds it, so finished streams leave nothing behind.
        self._waiters: weakref.WeakValueDictionary[str, asyncio.Event] = weakref.WeakValueDictionary()
        self._watch: Callable[[Callable[[str], None], Callable[[bool], None]], None] | None = getattr(
            store, "watch", None
        )
        self.hearing = False
        """True while the store's notifications reach this process: every write, in any process, wakes its readers."""

    def listen(self, run_id: str) -> asyncio.Event:
        """An event set at the next :meth:`notify` for ``run_id``; take it before reading."""
        if self._watch is not None:  # the first reader: hear the other processes' writes from now on
            self._watch(self.notify, self.heard)
            self._watch = None
        waiter = self._waiters.get(run_id)
        if waiter is None:
            waiter = self._waiters[run_id] = asyncio.Event()
        return waiter

    def notify(self, run_id: str) -> None:
        waiter = self._waiters.pop(run_id, None)
        if waiter is not None:
            waiter.set()

    def heard(self, hearing: bool) -> None:
        """The store's subscription began (True) or was lost (False): every reader reads again,
        since writes in between were not heard, and from now on waits or polls accordingly."""
        self.hearing = hearing
        waiters, self._waiters = list(self._waiters.values()), weakref.WeakValueDictionary()
        for waiter in waiters:
            waiter.set()
