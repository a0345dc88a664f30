"""The approvals inbox: the static files in ``ui/``, served at ``{base_path}/ui/``.

A fixed list of files, read from the package once and kept in memory: nothing is built or
fetched at run time, and no request path ever reaches the file system. The page talks to
the same API (relative URLs, so it works under any ``base_path`` or mount), and it is behind
the same ``authorize`` hook (action ``"ui"``).
"""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

__all__ = ["FILES", "page"]

HERE = Path(__file__).resolve().parent / "ui"

# file name -> media type; index.html is the page, the others are what it loads.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}

# The page loads only its own files and talks only to its own origin.
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",  # revalidate: a new version of the package shows at once
}

_cache: dict[str, bytes] = {}


def read(name: str) -> bytes:
    """The file's bytes (read once per process)."""
    if name not in _cache:
        _cache[name] = (HERE / name).read_bytes()
    return _cache[name]


async def page(request: Request) -> Response:
    """``GET /ui/`` and ``GET /ui/{file}``; ``GET /ui`` redirects to ``/ui/`` so relative URLs resolve."""
    name = request.path_params.get("file", "index.html")
    if "file" not in request.path_params and not request.url.path.endswith("/"):
        return RedirectResponse(request.url.path + "/", status_code=308)
    if name not in FILES:
        raise HTTPException(404)  # the app's JSON 404, as for any other unknown path
    return Response(read(name), media_type=FILES[name], headers=_HEADERS)
