"""The Durable Objects runtime: one Durable Object per run, one index object for the lists.

``AgentUnitRun`` holds one run: its record, journal and events in the object's own SQLite
storage. It is where the run executes, and its alarm always sits at the run's ``due_at``:

- a run that is executing has ``due_at`` at its lease's expiry, and the alarm is set in the
  same write that claims the run, before any step runs. If the isolate dies mid-step, the
  alarm fires once the lease lapsed and the sweep recovers the run from its journal;
- a sleeping run's alarm is its wake time; a run that yielded at its ``budget`` sets the alarm
  to now, so it continues in a fresh alarm invocation with a fresh CPU limit;
- a finished run's alarm is its retention's end, when the sweep deletes it.

Cloudflare delivers an alarm at least once and retries one that fails. An alarm runs the
engine's sweep over this one run, which acts only on what is due, through the engine's
compare-and-set saves: a second delivery finds nothing due and repeats no completed step.

``AgentUnitIndex`` (one object, named ``agent-unit``) keeps a copy of every run's record for
``GET /runs`` (the approvals inbox is ``?status=interrupted``), which object holds which run,
the thread, agent and app state, and the scheduled tasks' tick claims.

The store protocol over both is :class:`.durable_objects_store.DurableObjectsStore`,
so the engine and the HTTP app are the same as on every other host.

The engine still takes a lease when it executes. In an object only that object executes its
run, so nobody contends for it; a protocol request that resumes another run (an A2A message
to an existing task) executes it where it was received, fenced by the same lease.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from ..._host import Host, use_host
from ..._records import RunStatus
from ...errors import RunConflict, RunNotFound
from .durable_objects_store import DurableObjectsStore, IndexStorage, RunStorage, answer

__all__ = ["durable_object_classes"]


Serve = Callable[[Any, Any, Any, Any], Awaitable[Any]]
"""How an object serves a request with an ASGI app: ``serve(app, request, env, ctx)``."""


def durable_object_classes(
    make_unit: Callable[[DurableObjectsStore, Any], Any],
    serve: Serve,
    host: Callable[[Any, Any], Host] | None = None,
) -> tuple[type, type]:
    """``(AgentUnitRun, AgentUnitIndex)``, the classes a Worker's entry exports.

    ``make_unit(store, on_continue)`` makes the agent-unit app of one run object (its engine over
    ``store``, continuing a yielded run through ``on_continue``); ``serve`` answers a request
    with it through the Workers ASGI adapter. ``host(env, ctx)`` is the host an object's request
    or alarm runs on (its bindings and ``waitUntil``): the unit is made, and the run executes, on it.
    """

    def hosted(worker_env: Any, ctx: Any) -> Any:
        return contextlib.nullcontext() if host is None else use_host(host(worker_env, ctx))

    from workers import DurableObject  # type: ignore[import-not-found]

    class AgentUnitRun(DurableObject):  # type: ignore[misc]
        """One run: its records, its execution, and its alarm (see the module's docstring)."""

        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)
            self.store = DurableObjectsStore(env, home=RunStorage(ctx.storage), object_id=str(ctx.id.toString()))
            self._unit: Any = None

        @property
        def unit(self) -> Any:
            if self._unit is None:
                self._unit = make_unit(self.store, self._continue)
            return self._unit

        async def _continue(self, run_id: str) -> None:
            """A run that yielded at its budget continues in its object's next alarm, with a fresh CPU limit."""
            from js import Date  # type: ignore[import-not-found]

            await self.store.alarm_by(run_id, float(Date.now()) / 1000)

        async def fetch(self, request: Any) -> Any:
            with hosted(self.env, self.ctx):
                return await serve(self.unit, request, self.env, self.ctx)

        async def alarm(self, info: Any = None) -> None:
            """Wake, continue, recover or delete this object's run, whichever is due, and wait for it.

            The host (and so ``env``) is set here too: the alarm may be a fresh isolate's first event
            (after an eviction or a deploy), and the run's steps read its secrets and bindings.
            """
            with hosted(self.env, self.ctx):
                await self._alarm()

        async def _alarm(self) -> None:
            run_id = self.store.home.run_id if self.store.home is not None else None
            if run_id is None:
                return
            engine = self.unit.engine
            record = self.store.home.load(run_id) if self.store.home is not None else None
            if record is not None and record.status == RunStatus.queued:
                with contextlib.suppress(RunConflict):  # continued already: a second delivery of the alarm
                    await engine.continue_run(run_id)
            else:
                await engine.sweep()
            with contextlib.suppress(RunNotFound):  # past its retention: the sweep deleted it
                await engine.wait(run_id)  # the alarm invocation lasts as long as the execution
            if self.store.home is not None and (now := self.store.home.load(run_id)) is not None:
                await self.store.relist(now)  # heals a list an unreachable index left stale
                if now.due_at is not None:  # whatever happened, the alarm sits at the run's due_at again
                    await self.store.home.alarm_by(now.due_at)

        async def agent_unit_rpc(self, op: str, payload: str) -> str:
            """A store operation on this object's run, from another object or the Worker (JS RPC).

            Named so that no stub property shadows it (``call``, ``fetch``, ``then`` are taken).
            """
            return await answer(self.store.serve(op, json.loads(payload)))

    class AgentUnitIndex(DurableObject):  # type: ignore[misc]
        """The run list, which object holds which run, state and tick claims."""

        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)
            self.storage = IndexStorage(ctx.storage)

        async def agent_unit_rpc(self, op: str, payload: str) -> str:
            return await answer(self.storage.call(op, json.loads(payload)))

    return AgentUnitRun, AgentUnitIndex
