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
        # A plain dict of references, not a WeakValueDictionary: every journaled step notifies, and
        # its pop is Python code (2 µs a step) where a dict's is C.
        self._waiters: dict[str, weakref.ref[asyncio.Event]] = {}
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
        ref = self._waiters.get(run_id)
        waiter = None if ref is None else ref()
        if waiter is None:
            waiter = asyncio.Event()
            self._waiters[run_id] = weakref.ref(waiter, self._forget(run_id))
        return waiter

    def _forget(self, run_id: str) -> Callable[[weakref.ref[asyncio.Event]], None]:
        """Drop the entry once no reader holds its waiter (unless a newer waiter took its place)."""
        waiters = self._waiters

        def forget(ref: weakref.ref[asyncio.Event]) -> None:
            if waiters.get(run_id) is ref:
                del waiters[run_id]

        return forget

    def notify(self, run_id: str) -> None:
        ref = self._waiters.pop(run_id, None)
        if ref is not None:
            waiter = ref()
            if waiter is not None:
                waiter.set()

    def heard(self, hearing: bool) -> None:
        """The store's subscription began (True) or was lost (False): every reader reads again,
        since writes in between were not heard, and from now on waits or polls accordingly."""
        self.hearing = hearing
        refs = list(self._waiters.values())
        self._waiters.clear()
        for ref in refs:
            waiter = ref()
            if waiter is not None:
                waiter.set()
