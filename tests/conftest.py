from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agent_unit.stores import Store
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore

StoreFactory = Callable[[], Store]

# Every store joins the conformance suite here. A factory returns a new handle on the same
# backing store each call (two handles on SQLite are two connections, as two processes have).
STORES = ["memory", "sqlite"]


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param == "memory":
        shared = MemoryStore()
        return lambda: shared
    path = tmp_path / "agent-unit.db"
    return lambda: SQLiteStore(path)


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    opened = store_factory()
    yield opened
    await opened.close()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "agent-unit.db"
