"""``HostGuard``: the Host and Origin checks of agent-unit's own routes, in front of any ASGI app.

A page at an attacker's domain whose DNS then points at a server (DNS rebinding) reaches every
route of every app on it, not only agent-unit's: a framework's app (Google ADK's) or your own
answers it as it answers its own pages. The guard refuses such a request before the app sees
it, by the same rules as :class:`~agent_unit.http.gateway.Gateway` (which calls
:func:`foreign_host` and :func:`foreign_page` too)::

    from agent_unit.http import HostGuard

    app = HostGuard(app, public_url="https://agents.example.com", allowed_origins=["https://app.example.com"])

- ``Host`` not one of the deployment's names (:mod:`agent_unit.http.hostnames`): 421
  ``forbidden_host``, on every request;
- a browser page from a foreign ``Origin`` (:mod:`agent_unit.http.origins`) on a request that can
  change something (any method but GET, HEAD and OPTIONS, and every WebSocket handshake: a
  browser lets any page open a socket to any site): 403 ``forbidden_origin``.

A refused WebSocket is closed before it is accepted (the server answers the handshake 403).
Lifespan events and requests that pass go to the app untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import AgentUnitError, ForbiddenHost, ForbiddenOrigin
from .headers import header
from .hostnames import HostNames, arrived_at_loopback
from .origins import Origins, same_host
from .responses import JSONResponse

__all__ = ["SAFE_METHODS", "HostGuard", "foreign_host", "foreign_page"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: a foreign page's read is the Host check's concern, not the Origin's."""


def foreign_host(hosts: HostNames, scope: Scope) -> ForbiddenHost | None:
    """The 421 for a request whose ``Host`` is not one of ``hosts`` (DNS rebinding), or None.

    Reads too: after a rebinding, the attacker's page reads every answer. See
    :mod:`agent_unit.http.hostnames` for the names and when a name not listed is refused."""
    host = header(scope, b"host")
    if hosts.allows(host, local=arrived_at_loopback(scope)):
        return None
    return ForbiddenHost(
        f"Host {(host or '')[:100]!r} is not this deployment's name: if it is, add it to allowed_hosts, "
        "or set url (AGENT_UNIT_URL) to the URL clients reach it at"
    )


def foreign_page(hosts: HostNames, origins: Origins, scope: Scope) -> ForbiddenOrigin | None:
    """The 403 for a request that can change state sent by a page of a foreign site, or None.

    A page can send a POST with no body, or with a body a CORS preflight does not check, to
    any site; the browser adds the user's cookies. Such a request names its page in
    ``Origin``: it may go on when that page is this deployment's own (the public URL, or the
    host the request was sent to when that host is one of ``hosts``: a rebinding page's Origin
    is its Host too), on loopback, or listed in ``origins``. Reads, and clients that are not
    browsers (no ``Origin``), are not concerned."""
    if scope["type"] == "http" and scope["method"] in SAFE_METHODS:
        return None
    origin = header(scope, b"origin")
    host = header(scope, b"host")
    if origins.allows(origin) or (hosts.listed(host) and same_host(origin or "", host)):
        return None
    return ForbiddenOrigin(
        f"Origin {(origin or '')[:100]!r} may not change anything here: a page must be served from this "
        "deployment (its url or allowed_hosts), from loopback, or from an origin listed in allowed_origins"
    )


class HostGuard:
    """``app`` behind agent-unit's Host and Origin checks (see the module).

    ``public_url`` (the deployment's own URL), ``allowed_hosts`` and ``allowed_origins`` mean
    what they mean to :func:`~agent_unit.create_agent_unit`; a wrong entry raises ``ValueError``
    here, not at a request.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        public_url: str | None = None,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.hosts = HostNames(public_url, allowed_hosts)
        self.origins = Origins(public_url, allowed_origins)

    def refusal(self, scope: Scope) -> AgentUnitError | None:
        """Why the request in ``scope`` is refused, or None when it may go on."""
        return foreign_host(self.hosts, scope) or foreign_page(self.hosts, self.origins, scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        problem = self.refusal(scope) if scope["type"] in ("http", "websocket") else None
        if problem is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": problem.code})
        else:
            response = JSONResponse(problem.to_dict(), status_code=problem.status, headers=problem.headers())
            await response(scope, receive, send)
