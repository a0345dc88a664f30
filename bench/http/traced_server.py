"""Runs a built server's ``main.py`` with a timestamp trace: when each request's bytes arrive,
when its run is stored, and each write to a client socket (wall time in ns, as the client's).

    python bench/http/traced_server.py .output/server/main.py TRACE.json

The trace is kept in memory (one tuple per point, about a microsecond each) and written as JSON
lines to ``TRACE.json`` when the server exits (SIGINT). ``bench/http/first_event.py`` starts the
server this way and splits each first-event time into the server's part and the client's.
"""

from __future__ import annotations

import atexit
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any

main, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
sys.argv = [str(main)]
sys.path[:0] = [str(main.parent / "app"), str(main.parent / "vendor")]
trace: list[tuple[int, str, int, str, bool]] = []


def _dump() -> None:
    with out.open("w") as file:
        for point in trace:
            file.write(json.dumps(point) + "\n")


atexit.register(_dump)


class TracedTransport:
    """The connection's transport (asyncio's or uvloop's: a C type that cannot be patched), its writes traced."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def write(self, data: Any) -> None:
        trace.append((time.time_ns(), "write", len(data), bytes(data[:24]).decode("latin-1"), b"data:" in data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


from uvicorn.protocols.http import httptools_impl  # noqa: E402 - after the path is set

_received = httptools_impl.HttpToolsProtocol.data_received


def data_received(self: Any, data: bytes) -> None:
    trace.append((time.time_ns(), "recv", len(data), data[:24].decode("latin-1"), False))
    _received(self, data)


httptools_impl.HttpToolsProtocol.data_received = data_received  # type: ignore[method-assign]
_made = httptools_impl.HttpToolsProtocol.connection_made


try:  # a build whose main.py holds each response's head for its first body bytes: trace what leaves
    from agent_unit.hosts import uvicorn_http
except ImportError:
    uvicorn_http = None  # type: ignore[assignment]
else:
    _held = uvicorn_http.HeadWithBody.__init__

    def held(self: Any, transport: Any) -> None:
        _held(self, TracedTransport(transport))

    uvicorn_http.HeadWithBody.__init__ = held  # type: ignore[method-assign]


def connection_made(self: Any, transport: Any) -> None:
    trace.append((time.time_ns(), "connect", 0, "", False))
    if uvicorn_http is None or not isinstance(transport, uvicorn_http.HeadWithBody):  # that one traces under it
        transport = TracedTransport(transport)
    _made(self, transport)


httptools_impl.HttpToolsProtocol.connection_made = connection_made  # type: ignore[method-assign]

from agent_unit import _engine  # noqa: E402

_create = _engine.RunEngine._create


async def _traced_create(self: Any, *args: Any, **kwargs: Any) -> Any:
    result = await _create(self, *args, **kwargs)
    trace.append((time.time_ns(), "created", 0, result[0].id, False))
    return result


_engine.RunEngine._create = _traced_create  # type: ignore[method-assign]

from agent_unit.stores import sqlite  # noqa: E402

_append = sqlite.SQLiteStore.append


async def _traced_append(self: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
    trace.append((time.time_ns(), "append", 0, run_id, False))
    return await _append(self, run_id, *args, **kwargs)


sqlite.SQLiteStore.append = _traced_append  # type: ignore[method-assign]

runpy.run_path(str(main), run_name="__main__")
