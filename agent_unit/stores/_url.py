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
    query = _hide_secrets(parts.query)
    if parts.username is None and parts.password is None:
        return url if query == parts.query else urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
    if ":" in host:
        host = f"[{host}]"
    netloc = f"***@{host}" + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_SECRET_OPTIONS = frozenset({"password", "pass", "passwd", "sslpassword", "sslkey", "secret", "token"})


def _hide_secrets(query: str) -> str:
    """``password=...`` and its kind in a query string (redis-py and libpq accept them there) as ``***``."""
    if not query:
        return query
    pairs = [pair.partition("=") for pair in query.split("&")]
    return "&".join(
        f"{key}{sep}***" if key.lower() in _SECRET_OPTIONS and value else f"{key}{sep}{value}"
        for key, sep, value in pairs
    )
