"""Stores are opened from a URL; a bad URL is one clear error that never shows a secret."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent_unit.errors import StoreConfigError, StoreUnavailable
from agent_unit.stores import DEFAULT_STORE_URL, open_store
from agent_unit.stores.memory import MemoryStore
from agent_unit.stores.sqlite import SQLiteStore


def test_memory() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


async def test_default_is_the_embedded_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store(None)
    assert isinstance(store, SQLiteStore) and DEFAULT_STORE_URL == "sqlite:///.agent-unit/agent-unit.db"
    assert (tmp_path / ".agent-unit" / "agent-unit.db").exists()
    await store.close()


async def test_relative_and_absolute_paths_and_pragmas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///data/runs.db")
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db?synchronous=full&busy_timeout=250")
    assert isinstance(relative, SQLiteStore) and isinstance(absolute, SQLiteStore)
    assert (tmp_path / "data" / "runs.db").exists() and (tmp_path / "abs.db").exists()
    pragmas = [absolute._db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("journal_mode", "synchronous")]
    assert pragmas == ["wal", 2]
    assert absolute.busy_timeout == 0.25  # waited for by the store, off SQLite's blocking busy handler:
    assert absolute._db.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    assert relative._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    await relative.close()
    await absolute.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///x.db?fsync=yes", r"unknown option\(s\) fsync \(accepted: synchronous=off\|normal"),
        ("sqlite:///x.db?synchronous=sometimes", "synchronous='sometimes'"),
        ("sqlite:///x.db?busy_timeout=abc", "busy_timeout='abc' is not a whole number"),
        ("sqlite:///x.db?busy_timeout=-1", "busy_timeout=-1 is negative"),
        ("sqlite://host/x.db", "invalid sqlite store URL: it names a host"),
        ("sqlite:/x.db", r"write sqlite:///x.db \(relative\) or sqlite:////x.db \(absolute\)"),
        ("sqlite:x.db", r"write sqlite:///x.db \(relative\) or sqlite:////x.db \(absolute\)"),
        ("mongodb://admin:hunter2@db.internal/runs", "unknown store URL scheme 'mongodb'"),
        ("not a url", "unknown store URL scheme"),
        ("redis://:hunter2@cache.internal:notaport/0", "invalid redis store URL: the port 'notaport' is not a number"),
        ("redis://:hunter2@cache.internal:99999/0", "the port 99999 is out of range"),
        ("redis://:hunter2@cache.internal:6379/0?colour=blue", r"unknown option\(s\) colour"),
        ("redis://:hunter2@cache.internal:6379/0?socket_timeout=soon", "invalid redis store URL: Invalid value"),
        ("postgres://app:hunter2@db.internal:notaport/runs", "invalid postgres store URL: the port 'notaport'"),
        ("postgres://app:hunter2@db.internal:5432/runs?colour=blue", 'invalid URI query parameter: "colour"'),
        ("postgres://app:hunter2@db.internal:5432/runs?pool_max=lots", "pool_max='lots' is not a whole number"),
        ("dynamodb://runs?region=eu-west-1&colour=blue", r"unknown option\(s\) colour"),
        ("dynamodb://?region=eu-west-1", "it names no table"),
    ],
)
def test_a_malformed_url_is_a_store_config_error_that_names_the_problem(
    url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreConfigError, match=message) as caught:
        open_store(url)
    assert isinstance(caught.value, StoreUnavailable) and isinstance(caught.value, ValueError)
    assert "hunter2" not in str(caught.value) and "internal" not in str(caught.value)


async def test_two_connections_see_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first, second = SQLiteStore(path), SQLiteStore(path)
    await first.set_state("app", "k", "1")
    assert await second.get_state("app", "k") == "1"
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    await first.close()
    await second.close()


def test_environment_variables_expand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNS_DB", str(tmp_path / "from-env.db"))
    store = open_store("sqlite:///${RUNS_DB}")
    assert isinstance(store, SQLiteStore) and (tmp_path / "from-env.db").exists()
    monkeypatch.delenv("MISSING_URL", raising=False)
    with pytest.raises(ValueError, match=r"needs \$\{MISSING_URL\}, which is not set"):
        open_store("${MISSING_URL}")
