"""A LangGraph checkpointer over agent-unit's store: a graph's checkpoints live with its runs.

The built-in LangGraph adapter runs every graph with this saver, so a graph needs no
database of its own and its state survives whatever a run survives (a restart, a crash,
another process taking over). It stores through the run's thread-scoped state
(:class:`~agent_unit.run.RunState`), so one LangGraph thread is one agent-unit thread.

Layout, per checkpoint namespace ``ns`` (``""`` for the root graph, one per subgraph):

- ``langgraph:head:{ns}``: the id of the latest checkpoint;
- ``langgraph:checkpoint:{ns}:{id}``: the checkpoint, its metadata and its parent's id;
- ``langgraph:writes:{ns}:{id}``: the pending writes of the tasks run from that checkpoint;
- ``langgraph:namespaces``: the namespaces written, so a thread can be deleted.

A checkpoint is written once, under its own key, and the head moves after it: a put costs
two writes however long the history, and a crash between them leaves the previous head in
place. Listing walks the parent chain from the head, so checkpoints that are not ancestors
of the head (a fork's abandoned branch) are not listed. Values are serialized with the
saver's ``serde`` (``dumps_typed``) and stored as base64 text, since the store keeps JSON.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, NoReturn

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..run import RunState

__all__ = ["AgentUnitSaver"]

_NAMESPACES = "langgraph:namespaces"


def _head(ns: str) -> str:
    return f"langgraph:head:{ns}"


def _checkpoint(ns: str, checkpoint_id: str) -> str:
    return f"langgraph:checkpoint:{ns}:{checkpoint_id}"


def _writes(ns: str, checkpoint_id: str) -> str:
    return f"langgraph:writes:{ns}:{checkpoint_id}"


class AgentUnitSaver(BaseCheckpointSaver[int]):
    """Checkpoints of one thread, in agent-unit's store. Async only: the adapter drives graphs with ``astream``."""

    def __init__(self, state: RunState, thread_id: str, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.state = state
        self.thread_id = thread_id
        # Writes of one checkpoint are read, merged and written back; LangGraph saves the
        # writes of parallel tasks concurrently, so each merge must see the previous one.
        self._lock = asyncio.Lock()

    # -- encoding -----------------------------------------------------------------------

    def _dump(self, value: Any) -> list[str]:
        kind, data = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode("ascii")]

    def _load(self, stored: list[str]) -> Any:
        return self.serde.loads_typed((stored[0], base64.b64decode(stored[1])))

    def _where(self, config: RunnableConfig) -> str:
        """The config's checkpoint namespace, once its thread is checked to be this run's."""
        configurable = config.get("configurable", {})
        thread_id = configurable.get("thread_id")
        if thread_id is not None and str(thread_id) != self.thread_id:
            raise ValueError(
                f"this checkpointer stores the run's thread {self.thread_id!r}, not {thread_id!r}: "
                "agent-unit runs a graph on the thread of its run"
            )
        return str(configurable.get("checkpoint_ns", ""))

    def _config(self, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    async def _tuple(
        self, ns: str, checkpoint_id: str, saved: dict[str, Any], config: RunnableConfig | None = None
    ) -> CheckpointTuple:
        writes = await self.state.get(_writes(ns, checkpoint_id), [])
        writes.sort(key=lambda w: writes_sort_key(w[5], w[0], w[1]))
        parent = saved["parent"]
        return CheckpointTuple(
            config=config or self._config(ns, checkpoint_id),
            checkpoint=self._load(saved["checkpoint"]),
            metadata=self._load(saved["metadata"]),
            parent_config=self._config(ns, parent) if parent else None,
            pending_writes=[(task_id, channel, self._load(value)) for task_id, _, channel, *value, _ in writes],
        )

    async def latest_id(self, ns: str = "") -> str | None:
        """The id of the latest checkpoint of ``ns`` (``None`` before the first)."""
        return await self.state.get(_head(ns))  # type: ignore[no-any-return]

    # -- the async API ------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        ns = self._where(config)
        checkpoint_id = get_checkpoint_id(config)
        found = checkpoint_id or await self.latest_id(ns)
        if found is None:
            return None
        saved = await self.state.get(_checkpoint(ns, found))
        if saved is None:
            return None
        return await self._tuple(ns, found, saved, config if checkpoint_id else None)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Newest first, along the parent chain of each namespace's head; ``config=None`` lists this thread."""
        only_ns = config["configurable"].get("checkpoint_ns") if config else None
        only_id = get_checkpoint_id(config) if config else None
        if config:
            self._where(config)
        before_id = get_checkpoint_id(before) if before else None
        spaces = [only_ns] if only_ns is not None else await self.state.get(_NAMESPACES, [])
        for ns in spaces:
            current = only_id or await self.latest_id(ns)
            while current is not None:
                saved = await self.state.get(_checkpoint(ns, current))
                if saved is None:
                    break
                if not (before_id and current >= before_id):
                    metadata = self._load(saved["metadata"])
                    if not filter or all(metadata.get(key) == value for key, value in filter.items()):
                        if limit is not None and limit <= 0:
                            return
                        if limit is not None:
                            limit -= 1
                        yield await self._tuple(ns, current, saved)
                current = None if only_id else saved["parent"]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        ns = self._where(config)
        checkpoint_id = checkpoint["id"]
        saved = {
            "checkpoint": self._dump(checkpoint),
            "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
            "parent": config["configurable"].get("checkpoint_id"),
        }
        await self.state.set(_checkpoint(ns, checkpoint_id), saved)
        async with self._lock:
            head = await self.latest_id(ns)
            if head is None:
                spaces = await self.state.get(_NAMESPACES, [])
                if ns not in spaces:
                    await self.state.set(_NAMESPACES, [*spaces, ns])
            if head is None or checkpoint_id > head:  # ids sort by time, as InMemorySaver's latest is the max
                await self.state.set(_head(ns), checkpoint_id)
        return self._config(ns, checkpoint_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """A task's writes: a regular write is kept if already there; a special one (error, interrupt) replaces."""
        ns = self._where(config)
        key = _writes(ns, config["configurable"]["checkpoint_id"])
        async with self._lock:
            stored: list[list[Any]] = await self.state.get(key, [])
            where = {(entry[0], entry[1]): i for i, entry in enumerate(stored)}
            changed = False
            for idx, (channel, value) in enumerate(writes):
                slot = (task_id, WRITES_IDX_MAP.get(channel, idx))
                if slot[1] >= 0 and slot in where:
                    continue
                entry = [task_id, slot[1], channel, *self._dump(value), task_path]
                if slot in where:
                    stored[where[slot]] = entry
                else:
                    where[slot] = len(stored)
                    stored.append(entry)
                changed = True
            if changed:
                await self.state.set(key, stored)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint on the heads' chains, with their writes."""
        self._where({"configurable": {"thread_id": thread_id}})
        async with self._lock:
            for ns in await self.state.get(_NAMESPACES, []):
                current = await self.latest_id(ns)
                while current is not None:
                    saved = await self.state.get(_checkpoint(ns, current))
                    await self.state.delete(_checkpoint(ns, current))
                    await self.state.delete(_writes(ns, current))
                    current = saved["parent"] if saved else None
                await self.state.delete(_head(ns))
            await self.state.delete(_NAMESPACES)

    # -- the sync API: not used -----------------------------------------------------------

    def _sync(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            "agent-unit's LangGraph checkpointer is async only: the adapter drives graphs with the async API "
            "(astream, aget_state); call those, not invoke/stream/get_state, inside an agent-unit run"
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._sync()

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._sync()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._sync()

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync()

    def delete_thread(self, thread_id: str) -> None:
        self._sync()
