"""``header`` and ``query``: one request header, or one query parameter, read straight from the ASGI scope.

Starlette's ``Headers.get`` is ``Mapping.get``: a header the request does not carry is a
``KeyError`` raised and caught, and most requests carry no ``Origin`` (any client that is not a
browser), many no ``Accept``. The routes read five headers per request; this reads each with
no exception (measured with the resume path: see BENCHMARKS.md).

Starlette's ``request.query_params`` parses the whole query string (``parse_qsl``, a multi-dict)
for the one flag a route reads (``?wait=1``); ``query`` reads that one, the same way.
"""

from __future__ import annotations

from starlette.types import Scope

__all__ = ["header", "query"]


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header ``name`` (lower case, as ASGI servers give names), or None.

    The same answer as ``Headers(scope=scope).get(name)``."""
    for key, value in scope["headers"]:
        if key == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return None


def query(scope: Scope, name: str) -> str | None:
    """The last value of query parameter ``name`` (``""`` if it has none), or None.

    The same answer as ``Request(scope).query_params.get(name)``: a query string with an escape
    (``%``, ``+``) or a byte past ASCII is parsed by Starlette, as there."""
    raw: bytes = scope.get("query_string", b"")
    if not raw.isascii() or b"%" in raw or b"+" in raw:
        from starlette.datastructures import QueryParams

        found: str | None = QueryParams(raw.decode("latin-1")).get(name)
        return found
    key, value = name.encode(), None
    for field in raw.split(b"&"):
        found_key, _, found_value = field.partition(b"=")
        if found_key == key:
            value = found_value
    return None if value is None else value.decode()
