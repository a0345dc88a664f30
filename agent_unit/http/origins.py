"""Which web pages may call: the ``Origin`` check that MCP's transport requires of servers.

A browser names the page that sends a request in ``Origin``; other clients (SDKs, curl,
load balancers' health checks) send none and are not concerned. A page may call when it is
served from loopback (a local tool talking to ``agent-unit dev``), from the deployment's own
public URL, or from an origin the configuration lists (``allowed_origins``). Any other page
is refused, so a site a user happens to visit cannot drive their agents through their
browser (DNS rebinding, or cookies the ``authorize`` hook trusts).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["Origins", "origin_of", "same_host"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url``, lower case, without a default port; None when it has none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address, bracketed as an origin writes it
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def same_host(origin: str, host: str | None) -> bool:
    """Whether the page that sent ``origin`` was served by the host the request was sent to
    (``Host``): the deployment's own pages, such as the inbox, wherever it is reached. Only the
    host and port are compared: a proxy in front may end TLS, so the scheme can differ."""
    if not host:
        return False
    normal = origin_of(origin)
    if normal is None or not _bare(origin):
        return False
    return urlsplit(normal).netloc == host.strip().lower()


def _bare(text: str) -> bool:
    """Whether ``text`` is an origin alone: no user, path, query or fragment."""
    parts = urlsplit(text.strip())
    return "@" not in parts.netloc and parts.path in ("", "/") and not parts.query and not parts.fragment


def _loopback(origin: str) -> bool:
    host = urlsplit(origin).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Origins:
    """The allowed origins: loopback, ``public_url``'s origin, and ``allowed``."""

    def __init__(self, public_url: str | None, allowed: Iterable[str] = ()) -> None:
        self._allowed: set[str] = set()
        for entry in allowed:
            origin = origin_of(entry)
            if origin is None or not _bare(entry):
                raise ValueError(
                    f"allowed_origins: {entry!r} is not an origin: write scheme://host[:port], "
                    "e.g. 'https://app.example.com'"
                )
            self._allowed.add(origin)
        own = origin_of(public_url) if public_url else None
        if own is not None:
            self._allowed.add(own)

    def allows(self, origin: str | None) -> bool:
        """Whether a request with this ``Origin`` header may go on (no header: not a browser, it may)."""
        if origin is None:
            return True
        normal = origin_of(origin)
        if normal is None or not _bare(origin):
            return False  # "null" (a sandboxed or file: page), or not an origin at all
        return normal in self._allowed or _loopback(normal)
