"""The engine layer, for building on ``RunEngine`` directly (a queue consumer, a cron job, a host)."""

from __future__ import annotations

from ._engine import RunEngine, SweepResult
from ._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from .stores import Store, open_store

__all__ = [
    "JournalEntry",
    "RunEngine",
    "RunPage",
    "RunRecord",
    "RunStatus",
    "Store",
    "StoredEvent",
    "SweepResult",
    "open_store",
]
