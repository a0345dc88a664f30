"""The floor of a first SSE event on this host: an ASGI app that does nothing, served as a built server is.

    python bench/http/floor_main.py        # serves on $HOST:$PORT, as a built main.py does

``bench/http/first_event.py --floor`` runs it beside the built server. It is uvicorn with the
built server's settings (uvloop and httptools where installed, the head-with-body protocol), and
an app with no routing, no store and no run: a ``POST`` answers one constant SSE event at once,
any ``GET`` a small page (a browser client needs one of the server's own origin). What a client
measures against it is what the host, the client and uvicorn cost before agent-unit does anything:
the part of a first-event time no change to agent-unit can remove.
"""

from __future__ import annotations

import os
from typing import Any

import uvicorn

PAGE = b"<!doctype html><title>floor</title>"
EVENT = b'id: 1\nevent: RUN_STARTED\ndata: {"type":"RUN_STARTED"}\n\n'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":  # lifespan: nothing to start
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "GET":
        headers = [(b"content-type", b"text/html; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": PAGE})
        return
    while (await receive()).get("more_body"):  # the request's body, read as an app reads it
        pass
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": EVENT, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


if __name__ == "__main__":
    http: Any = "auto"
    try:  # as a built server's main.py serves
        from agent_unit.hosts.uvicorn_http import HttpToolsHeadWithBody

        http = HttpToolsHeadWithBody
    except ImportError:
        pass
    uvicorn.run(
        app,
        http=http,
        host=os.environ.get("HOST", "127.0.0.1"),
        port=int(os.environ.get("PORT", "3000")),
        log_level=os.environ.get("LOG_LEVEL", "info"),
    )
