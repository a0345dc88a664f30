"""Store URLs that are safe to show, and the error for a store that cannot be used."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ..errors import StoreUnavailable

__all__ = ["StoreUnavailable", "safe_url"]


def safe_url(url: str) -> str:
    """``url`` with its password (and any user name) replaced by ``***``: fit for logs and errors."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:  # malformed (a port that is not a number...): show nothing that could be a secret
        return url.split("://", 1)[0] + "://***"
    if parts.username is None and parts.password is None:
        return url
    if ":" in host:
        host = f"[{host}]"
    netloc = f"***@{host}" + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
