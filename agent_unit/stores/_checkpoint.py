"""WAL checkpoints for the SQLite store, in a thread of their own.

A checkpoint copies the pages the WAL holds back into the database file and syncs both files.
SQLite runs one inline by default, inside the commit that takes the WAL past 1,000 pages: on
the event loop's thread, where its two fsyncs stall every request and run that process is
serving (5 to 10 ms each on a virtual disk, once every few hundred step commits). Here the
store asks for a checkpoint every :data:`CHECKPOINT_EVERY` commits and a worker thread runs
it on a connection of its own (``sqlite3`` releases the GIL while SQLite works), so the loop
never waits on it; SQLite's documentation suggests exactly this for applications that cannot
afford the stall.

The checkpoint is ``PASSIVE``: it never blocks a writer or a reader, in this process or
another. A WAL restarts from its beginning only once a checkpoint has caught up with it; under
writes that never pause a background checkpoint cannot, so the writer's own autocheckpoint
stays on at :data:`BACKSTOP_PAGES` and bounds the file as SQLite does. Where there are no
threads (Pyodide), and at ``synchronous=FULL`` (each commit syncs anyway), the store keeps
SQLite's default.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["BACKSTOP_PAGES", "CHECKPOINT_EVERY", "THREADS", "WalCheckpointer"]

CHECKPOINT_EVERY = 256
"""Commits between two requests for a checkpoint (a step commit appends about three pages)."""
BACKSTOP_PAGES = 8000
"""The writer's own autocheckpoint (pages, 32 MB at SQLite's default page size), for a WAL
that background checkpoints cannot catch up with."""
THREADS = sys.platform != "emscripten"

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    """The one thread that checkpoints every store of this process (a forked child makes its own)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-unit-sqlite-checkpoint")
            _pool_pid = os.getpid()
        return _pool


class WalCheckpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` on one database file from the worker thread."""

    def __init__(self, path: str) -> None:
        self._path = os.path.abspath(path)  # the thread opens it later: a chdir meanwhile changes nothing
        self.checkpoints = 0
        """Checkpoints this object has run (SQLite's own inline ones not counted)."""
        self._db: sqlite3.Connection | None = None
        self._pending: Future[None] | None = None
        self._pid = os.getpid()
        self._closed = False

    def request(self) -> None:
        """Ask for a checkpoint; a request while one is queued or running is already served."""
        if self._pid != os.getpid():  # a forked child: the parent's thread and connection are not ours
            self._pid, self._pending, self._db = os.getpid(), None, None
        if self._closed or (self._pending is not None and not self._pending.done()):
            return
        try:
            self._pending = _worker().submit(self._checkpoint)
        except RuntimeError:  # the interpreter is exiting: the writer's own autocheckpoint remains
            self._pending = None

    def _checkpoint(self) -> None:
        if self._closed:
            return
        try:
            if self._db is None:
                self._db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
        except sqlite3.Error:
            pass  # another process checkpoints, or the file is gone: the writer's backstop remains

    def wait(self) -> None:
        """Block until the checkpoint asked for last has run (tests; :meth:`close`)."""
        pending = self._pending
        if pending is not None and self._pid == os.getpid():
            pending.result()

    def close(self) -> None:
        """Wait for a running checkpoint, then close its connection."""
        self._closed = True
        self.wait()
        if self._db is not None:
            self._db.close()
            self._db = None
