"""Stores: one protocol, opened from a URL.

``memory://`` and ``sqlite:///path.db`` ship with the runtime; shared stores join through
``open_store`` with their own optional extra.
"""

from __future__ import annotations

import importlib
import logging

from .. import env
from ..errors import StoreConfigError
from .protocol import Store

__all__ = ["DEFAULT_STORE_PATH", "DEFAULT_STORE_URL", "Store", "check_built_store", "open_store", "store_kind"]

DEFAULT_STORE_PATH = ".agent-unit/agent-unit.db"
"""The embedded default store: a SQLite file under the project (or a server's working directory)."""

DEFAULT_STORE_URL = f"sqlite:///{DEFAULT_STORE_PATH}"


def expand(url: str) -> str:
    """``${NAME}`` from the environment, so a store's credentials never sit in a file or a build."""

    def missing(name: str) -> Exception:
        return StoreConfigError(f"the store URL needs ${{{name}}}, which is not set: set it in the environment")

    return env.expand(url, missing)


_ALIASES = {"postgresql": "postgres", "rediss": "redis", "valkey": "redis", "valkeys": "redis"}
_DRIVERS = {"redis": ("redis.asyncio", "redis"), "postgres": ("psycopg", "postgres"), "dynamodb": ("boto3", "aws")}
"""The module each shared store imports, and the extra that installs it, by the store's kind."""


def store_kind(scheme: str) -> str:
    """The store a URL scheme opens, one name per driver: ``postgresql`` is ``postgres``,
    ``rediss`` and ``valkey`` are ``redis``."""
    scheme = scheme.lower()
    return _ALIASES.get(scheme, scheme)


def _driver(kind: str) -> None:
    """Import the store's driver now (the store would at its first use): a missing one is one
    message that names the extra to install, not an ImportError at the first request."""
    module, extra = _DRIVERS[kind]
    try:
        importlib.import_module(module)
    except ImportError:
        raise StoreConfigError(f'{kind}:// needs the {extra} extra: pip install "agent-unit[{extra}]"') from None


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
    kind = store_kind(scheme)
    if kind == store_kind(built_for):
        return
    message = (
        f"storage is a {scheme}:// URL, but this app was built for {built_for} (the driver its build vendored): "
        f'rebuild with storage = {{ provider = "{kind}", url = "..." }}, or give it a {built_for} URL'
    )
    if kind in _DRIVERS:
        try:
            importlib.import_module(_DRIVERS[kind][0])
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
    kind = store_kind(scheme)
    if kind in _DRIVERS:
        _driver(kind)
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if kind == "redis":
        from .redis import RedisStore

        return RedisStore.from_url(url.replace("valkey", "redis", 1) if scheme.startswith("valkey") else url)
    if kind == "postgres":
        from .postgres import PostgresStore

        return PostgresStore.from_url(url)
    if kind == "dynamodb":
        from .dynamodb import DynamoDBStore

        return DynamoDBStore.from_url(url)
    if scheme == "d1":
        raise StoreConfigError(
            f"{url} is a Cloudflare D1 binding, which only a Worker has: build with --preset cloudflare, "
            "whose Worker opens it from its env (in a Worker of your own: "
            "agent_unit.hosts.cloudflare.d1_store.D1Store(env.BINDING))"
        )
    raise StoreConfigError(
        f"unknown store URL scheme {scheme!r}: use memory://, sqlite:///path.db, redis://host:6379, "
        "postgres://user@host/db or dynamodb://table?region=..."
    )
