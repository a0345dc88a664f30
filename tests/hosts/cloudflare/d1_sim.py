"""A simulation of a Cloudflare D1 binding over real SQLite, for tests: D1 itself runs only on Cloudflare.

It follows the Worker API Cloudflare documents (``prepare(sql).bind(*values)``, then ``all()``,
``run()``, ``first(column)`` or ``raw()``; ``batch(statements)``; ``exec(sql)``) and the
semantics the D1 store relies on:

- a ``batch`` is one transaction: its statements run in order, and when one fails the whole
  batch is rolled back and the call raises;
- every call is its own transaction (D1 has no interactive transactions);
- errors are raised with D1's message form, ``D1_ERROR: <SQLite's message>: SQLITE_...``;
- a Python ``None`` reaches D1 as JavaScript ``undefined`` under Pyodide, which D1 refuses
  (``D1_TYPE_ERROR``), so binding ``None`` is refused here too;
- results come back as Pyodide hands back JavaScript objects: a proxy with ``to_py()``.

Each ``D1Database`` is its own SQLite connection on one file: two of them are two Workers on
one database. A D1 database serializes its queries; a file lock does the same here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["D1Database", "D1Error", "D1PreparedStatement", "JsProxy"]


class D1Error(Exception):
    """What a failed D1 call raises in a Python Worker (a JavaScript ``Error`` carried into Python)."""


class JsProxy:
    """A JavaScript object as Pyodide hands it to Python: ``to_py()`` converts it (deeply)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def to_py(self) -> Any:
        return self._value


class D1PreparedStatement:
    def __init__(self, database: D1Database, sql: str, values: tuple[Any, ...] = ()) -> None:
        self._database = database
        self.sql = sql
        self.values = values

    def bind(self, *values: Any) -> D1PreparedStatement:
        for value in values:
            if value is None:  # Pyodide passes None as undefined
                raise D1Error("D1_TYPE_ERROR: Type 'undefined' not supported for value 'undefined'")
            if not isinstance(value, (str, int, float, bytes)):
                raise D1Error(f"D1_TYPE_ERROR: Type '{type(value).__name__}' not supported for value '{value}'")
        return D1PreparedStatement(self._database, self.sql, values)

    async def all(self) -> JsProxy:
        return self._database.transaction([self])[0]

    async def run(self) -> JsProxy:
        return self._database.transaction([self])[0]

    async def first(self, column: str | None = None) -> Any:
        rows = self._database.transaction([self])[0].to_py()["results"]
        if not rows:
            return None
        return rows[0][column] if column is not None else JsProxy(rows[0])

    async def raw(self) -> JsProxy:
        rows = self._database.transaction([self])[0].to_py()["results"]
        return JsProxy([list(row.values()) for row in rows])


class D1Database:
    """The binding: ``env.DB`` in a Worker whose wrangler.jsonc lists ``d1_databases``."""

    def __init__(self, path: str | Path) -> None:
        self.connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA busy_timeout = 5000")
        self.calls = 0
        """Round trips made: one per ``all()``/``run()``/``first()``/``raw()``/``batch()``/``exec()``."""

    def prepare(self, sql: str) -> D1PreparedStatement:
        return D1PreparedStatement(self, sql)

    async def batch(self, statements: Sequence[D1PreparedStatement]) -> list[JsProxy]:
        return self.transaction(statements)

    async def exec(self, sql: str) -> JsProxy:
        self.calls += 1
        try:
            self.connection.executescript(sql)
        except sqlite3.Error as exc:
            raise _error(exc) from None
        return JsProxy({"count": sql.count(";"), "duration": 0})

    def transaction(self, statements: Sequence[D1PreparedStatement]) -> list[JsProxy]:
        """Run ``statements`` in order as one transaction; on a failure roll back and raise."""
        self.calls += 1
        db = self.connection
        results = []
        try:
            db.execute("BEGIN IMMEDIATE")
            for statement in statements:
                cursor = db.execute(statement.sql, statement.values)
                columns = [column[0] for column in cursor.description or ()]
                rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
                meta = {"changes": cursor.rowcount if cursor.rowcount > 0 else 0, "last_row_id": cursor.lastrowid}
                results.append(JsProxy({"results": rows, "success": True, "meta": meta}))
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise _error(exc) from None
        return results


def _error(exc: sqlite3.Error) -> D1Error:
    code = getattr(exc, "sqlite_errorname", "SQLITE_ERROR")
    return D1Error(f"D1_ERROR: {exc}: {code}")
