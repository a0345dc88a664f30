"""The adapter API: how agent-unit learns a framework.

An adapter says which values it recognises (``match``), how to describe one (``describe``)
and how to run one durably (``run(agent, ctx)``). ``ctx`` gives the run's input, the
:class:`~agent_unit.run.Run` (its journaled steps, interrupts and sleeps), state, events and
the cancellation signal. Every adapter sits on the one journal, so a fix to journaling
fixes every framework.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from .._agent import Agent
from .._durable import Durable
from ..errors import AdapterError
from ..run import Run, RunState

__all__ = ["API_VERSION", "Adapter", "AdapterContext", "AdaptedAgent", "define_adapter"]

API_VERSION = 1


@dataclass(frozen=True)
class AdapterContext:
    """What an adapter's ``run`` gets for one execution of a run."""

    input: Any
    run: Run

    @property
    def signal(self) -> asyncio.Event:
        """Set when the run is cancelled or parked: long work checks it or awaits it."""
        return self.run.signal

    @property
    def kv(self) -> RunState:
        """State scoped to the run's thread (default), its agent or the app."""
        return self.run.state

    async def emit(self, name: str, value: Any = None) -> None:
        """A CUSTOM event."""
        await self.run.emit(name, value)

    @property
    def durable(self) -> Durable:
        """Journaled model calls (``durable.model``) and tool calls (``durable.tools``)."""
        return Durable(self.run)

    def set_work_key(self, current: Callable[[], str | None]) -> None:
        """For a framework that checkpoints its own work (LangGraph's nodes): name the unit running now.

        ``current()`` returns a key that is stable across re-runs of that unit (``None`` outside
        one); ``use_run().idempotency_key()`` inside it derives from that key.
        """
        self.run.set_work_key(current)

    def stream(self, event: dict[str, Any]) -> None:
        """An AG-UI event (text, reasoning, tool, state) from live work; deltas are batched.

        Call it from inside a journaled model or tool call: a replay runs nothing, so it
        emits nothing, as the event stream's contract requires.
        """
        self.run.stream(event)


@dataclass(frozen=True)
class Adapter:
    name: str
    api_version: int
    match: Callable[[Any], bool]
    run: Callable[[Any, AdapterContext], Awaitable[Any]]
    describe: Callable[[Any], Mapping[str, Any]] | None = None
    """``describe(agent)``: ``description``, and ``input_type`` (a type that validates the input and
    gives its schema) or ``input_schema`` (a JSON Schema, for show only)."""

    def adapt(self, value: Any, name: str | None = None) -> AdaptedAgent:
        """``value`` (a framework's agent) as an agent-unit :class:`Agent`."""
        return AdaptedAgent(self, value, name=name)


def define_adapter(
    *,
    name: str,
    match: Callable[[Any], bool],
    run: Callable[[Any, AdapterContext], Awaitable[Any]],
    describe: Callable[[Any], Mapping[str, Any]] | None = None,
    api_version: int = API_VERSION,
) -> Adapter:
    """Define an adapter for a framework. ``api_version`` is the adapter API it was written for."""
    if api_version != API_VERSION:
        raise AdapterError(
            f"adapter {name!r} was written for adapter API version {api_version}, and this agent-unit "
            f"speaks version {API_VERSION}: install a release of the adapter made for it"
        )
    if not inspect.iscoroutinefunction(run):
        raise AdapterError(f"adapter {name!r}: run must be `async def run(agent, ctx)`")
    return Adapter(name=name, api_version=api_version, match=match, run=run, describe=describe)


class AdaptedAgent(Agent):
    """A framework's agent, run through its adapter; the engine treats it like any agent."""

    def __init__(self, adapter: Adapter, value: Any, *, name: str | None = None) -> None:
        async def run_through_adapter(input: Any, run: Run) -> Any:
            return await adapter.run(value, AdapterContext(input=input, run=run))

        described = dict(adapter.describe(value)) if adapter.describe is not None else {}
        super().__init__(run_through_adapter, name=name, description=str(described.pop("description", "") or ""))
        self.framework = adapter.name
        self.adapter = adapter
        self.value = value
        input_type = described.pop("input_type", None)
        if input_type is not None:  # validates input before a run exists (422), and gives the schema
            self.input_adapter = TypeAdapter(input_type)
        self._input_schema = described.pop("input_schema", None)
        self.details = described

    @property
    def input_schema(self) -> dict[str, Any]:
        return self._input_schema if self._input_schema is not None else super().input_schema
