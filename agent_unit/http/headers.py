"""``header``: one request header read straight from the ASGI scope.

Starlette's ``Headers.get`` is ``Mapping.get``: a header the request does not carry is a
``KeyError`` raised and caught, and most requests carry no ``Origin`` (any client that is not a
browser), many no ``Accept``. The routes read five headers per request; this reads each with
no exception (measured with the resume path: see BENCHMARKS.md).
"""

from __future__ import annotations

from starlette.types import Scope

__all__ = ["header"]


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header ``name`` (lower case, as ASGI servers give names), or None.

    The same answer as ``Headers(scope=scope).get(name)``."""
    for key, value in scope["headers"]:
        if key == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return None
