"""A task's cancellation that a library turned into an error: loops that try again on errors stop on it.

A database driver's read that is cancelled may answer with a connection error (and a store turns
that into :class:`~agent_unit.errors.StoreUnavailable`) instead of letting the CancelledError through.
A background loop that tries again on such errors (the sweep, a store's live tail) would then run on
after it was cancelled, and whoever cancelled it (a server shutting down, a test's event loop
closing) would wait for it forever: seen as a server that ignored SIGTERM while its Redis was slow.
"""

from __future__ import annotations

import asyncio

__all__ = ["cancel_requested"]


def cancel_requested() -> bool:
    """Whether the running task was asked to stop, even if its CancelledError never reached it."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
