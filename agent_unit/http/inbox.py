"""The approvals inbox: the static files in ``ui/``, served at ``{base_path}/ui/``.

A fixed list of files, read from the package once and kept in memory: nothing is built or
fetched at run time, and no request path ever reaches the file system. The page finds the
API at ``../`` (relative, so it works under any ``base_path`` or mount), or where
:func:`create_inbox` says, and it is behind the same ``authorize`` hook (action ``"ui"``).
"""

from __future__ import annotations

import html
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import AgentUnitError, HttpError, MethodNotAllowed, RouteNotFound
from . import auth
from .auth import Authorize

__all__ = ["FILES", "create_inbox", "page"]

HERE = Path(__file__).resolve().parent / "ui"

# file name -> media type; index.html is the page, the others are what it loads.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "timeline.js": "text/javascript; charset=utf-8",
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

_API_META = b'<meta name="agent-unit-api" content="../">'

_cache: dict[str, bytes] = {}


def read(name: str) -> bytes:
    """The file's bytes (read once per process)."""
    if name not in _cache:
        _cache[name] = (HERE / name).read_bytes()
    return _cache[name]


async def page(request: Request, api: str = "../") -> Response:
    """``GET /ui/`` and ``GET /ui/{file}``; ``GET /ui`` redirects to ``/ui/`` so relative URLs resolve.

    ``api``: where the page finds the API, relative to the page or absolute on this origin.
    """
    name = request.path_params.get("file", "index.html")
    if "file" not in request.path_params and not request.url.path.endswith("/"):
        return RedirectResponse(request.url.path + "/", status_code=308)
    if name not in FILES:
        raise HTTPException(404)  # the app's JSON 404, as for any other unknown path
    body = read(name)
    if name == "index.html" and api != "../":
        body = body.replace(_API_META, b'<meta name="agent-unit-api" content="%s">' % html.escape(api).encode())
    return Response(body, media_type=FILES[name], headers=_HEADERS)


def create_inbox(api: str, *, authorize: Authorize | str | None = None) -> Starlette:
    """The inbox on its own, for an app that mounts it apart from the API.

    ``api`` is the path of the API on the same origin (e.g. ``"/api/ai/"`` when the app mounts
    ``create_agent_unit()`` there): ``app.mount("/agents", create_inbox("/api/ai/"))``. The
    page asks ``authorize`` for action ``"ui"``; its API requests go through the API's own hook.
    """
    hook = auth.load_authorize(authorize)
    prefix = "/" + api.strip("/") + "/" if api.strip("/") else "/"  # absolute: the page sits elsewhere

    async def endpoint(request: Request) -> Response:
        await auth.authorize(hook, request, "ui", {})
        return await page(request, prefix)

    return Starlette(
        routes=[Route(path, endpoint, methods=["GET"]) for path in ("/", "/{file}")],
        exception_handlers={AgentUnitError: _error, HTTPException: _error},
    )


async def _error(request: Request, exc: Exception) -> Response:
    """Errors as the API writes them: ``{"error": {"code", "message"}}``."""
    if isinstance(exc, AgentUnitError):
        return JSONResponse(exc.to_dict(), status_code=exc.status, headers=exc.headers())
    assert isinstance(exc, HTTPException)
    code = {404: RouteNotFound.code, 405: MethodNotAllowed.code}.get(exc.status_code, HttpError.code)
    message = f"no route {request.method} {request.url.path}"
    if exc.status_code == 405:
        message = f"{request.method} is not allowed here: the inbox is read with GET"
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=exc.status_code)
