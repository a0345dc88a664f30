"""What the protocols read of runs beyond ``get``/``list``/``events``, as methods of the engine.

The engine is the only door to runs: the REST routes, SSE, A2A and AG-UI read a run's record,
its last seq, its journaled values and the store's health through these, and never name the
store, so what a read means (an id no store can hold is no run; a store that does not answer
is a 503) is decided once, here. :class:`~agent_unit.engine.RunEngine` inherits them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from . import jsontext
from .errors import StoreUnavailable
from .records import RunRecord
from .stores import Store

__all__ = ["RunReads"]

log = logging.getLogger("agent_unit")

_NO_RUN = "run_healthz"  # the id a ping reads: no run ever has it


class RunReads:
    """The reads a protocol needs, over ``store`` (set by the class that inherits them)."""

    store: Store

    async def find(self, run_id: str) -> RunRecord | None:
        """The run's record, or None where there is none (a stream that outlived a delete ends)."""
        return await self.store.load_run(run_id) if jsontext.storable_name(run_id) else None

    async def last_seq(self, run_id: str) -> int:
        """The seq of the run's last stored event (0: none): a stream started after it shows only what comes next."""
        return await self.store.last_seq(run_id)

    async def journal_values(self, run_id: str) -> dict[str, Any]:
        """Each value the run journaled (a step's result, an interrupt's answer), parsed, by key;
        entries that recorded an error are left out. A2A rebuilds a task's history from them."""
        journal = await self.store.load_journal(run_id)
        return {key: json.loads(entry.value) for key, entry in journal.items() if entry.value is not None}

    async def ping(self, seconds: float) -> None:
        """Raise :class:`~agent_unit.errors.StoreUnavailable` unless the store answers one read
        within ``seconds``: a health check's question. One read of a run that never
        exists: a round trip on every store, and no write."""
        try:
            await asyncio.wait_for(self.store.load_run(_NO_RUN), seconds)
        except StoreUnavailable:
            raise  # the store logged where and why
        except Exception as exc:  # noqa: BLE001 - whatever the driver raised, the store did not answer
            log.warning("healthz: the store did not answer (%s)", type(exc).__name__)
            raise StoreUnavailable(f"the store did not answer ({type(exc).__name__})") from None
