"""Stores: one protocol, opened from a URL.

``memory://`` and ``sqlite:///path.db`` ship with the runtime; shared stores join through
``open_store`` with their own optional extra.
"""

from __future__ import annotations

import importlib
import logging
import re

from .. import env
from ..errors import StoreConfigError
from .protocol import Store

__all__ = ["DEFAULT_STORE_PATH", "DEFAULT_STORE_URL", "Store", "check_built_store", "open_store"]

DEFAULT_STORE_PATH = ".agent-unit/agent-unit.db"
"""The embedded default store: a SQLite file under the project (or a server's working directory)."""

DEFAULT_STORE_URL = f"sqlite:///{DEFAULT_STORE_PATH}"


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(url: str) -> str:
    """``${NAME}`` from the environment, so a store's credentials never sit in a file or a build."""

    def value(match: re.Match[str]) -> str:
        found = env.get(match.group(1))
        if found is None:
            raise StoreConfigError(
                f"the store URL needs ${{{match.group(1)}}}, which is not set: set it in the environment"
            )
        return str(found)

    return _VARIABLE.sub(value, url)


def _driver(module: str, scheme: str, extra: str) -> None:
    """Import the store's driver now (the store would at its first use): a missing one is one
    message that names the extra to install, not an ImportError at the first request."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise StoreConfigError(f'{scheme}:// needs the {extra} extra: pip install "agent-unit[{extra}]"') from None


_DRIVERS = {"redis": "redis.asyncio", "postgres": "psycopg", "dynamodb": "boto3"}
"""The module each shared store imports, by the store's kind."""
_KINDS = {"postgresql": "postgres", "rediss": "redis", "valkey": "redis", "valkeys": "redis"}


def check_built_store(url: str | None, built_for: str) -> None:
    """Say in one line when a built app starts with a store of another kind than its build vendored.

    A build vendors one store's driver (``built_for``: redis, postgres, dynamodb...). Started with
    a URL of another scheme, the app either lacks that driver (a :class:`StoreConfigError` naming
    both, not a suggestion to pip install into a build) or has it and runs, after a warning.
    """
    try:
        expanded = expand(url or DEFAULT_STORE_URL)
    except StoreConfigError:
        return  # open_store names the variable that is not set
    if ":" not in expanded:
        return  # no scheme at all: open_store says which ones it opens
    scheme = expanded.split(":", 1)[0].lower()
    kind = _KINDS.get(scheme, scheme)
    if kind == _KINDS.get(built_for, built_for):
        return
    message = (
        f"storage is a {scheme}:// URL, but this app was built for {built_for} (the driver its build vendored): "
        f'rebuild with storage = {{ provider = "{kind}", url = "..." }}, or give it a {built_for} URL'
    )
    module = _DRIVERS.get(kind)
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError:
            raise StoreConfigError(message) from None
    logging.getLogger("agent_unit").warning(message)


def open_store(url: str | None = None) -> Store:
    """Open the store at ``url`` (the embedded SQLite file when ``None``); ``${NAME}`` expands.

    A URL that cannot be used as written raises :class:`~agent_unit.errors.StoreConfigError`
    (a ``StoreUnavailable`` and a ``ValueError``) naming the problem, never the password.
    """
    url = expand(url or DEFAULT_STORE_URL)
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if scheme in ("redis", "rediss", "valkey", "valkeys"):
        _driver("redis.asyncio", "redis", "redis")
        from .redis import RedisStore

        return RedisStore.from_url(url.replace("valkey", "redis", 1) if scheme.startswith("valkey") else url)
    if scheme in ("postgres", "postgresql"):
        _driver("psycopg", "postgres", "postgres")
        from .postgres import PostgresStore

        return PostgresStore.from_url(url)
    if scheme == "dynamodb":
        _driver("boto3", "dynamodb", "aws")
        from .dynamodb import DynamoDBStore

        return DynamoDBStore.from_url(url)
    if scheme == "d1":
        raise StoreConfigError(
            f"{url} is a Cloudflare D1 binding, which only a Worker has: build with --preset cloudflare, "
            "whose Worker opens it from its env (D1Store(env.BINDING) in a Worker of your own)"
        )
    raise StoreConfigError(
        f"unknown store URL scheme {scheme!r}: use memory://, sqlite:///path.db, redis://host:6379, "
        "postgres://user@host/db or dynamodb://table?region=..."
    )
