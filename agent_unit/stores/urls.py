"""Store URLs that are safe to show, and the errors for a store that cannot be used.

An outage's message names the store's kind only ("the redis store cannot be reached"): it
reaches clients in a 503, which must not map the deployment (host, port, database). Where and
why go to the log, with the URL's password removed.

Public, so that a store kept outside this package (Cloudflare's, a third party's) reports an
outage the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit, urlunsplit

from ..errors import StoreConfigError, StoreUnavailable

__all__ = [
    "StoreConfigError",
    "StoreUnavailable",
    "number",
    "options",
    "safe_url",
    "seconds",
    "unavailable",
    "unreachable",
]

log = logging.getLogger("agent_unit.stores")


def unavailable(
    kind: str, problem: str, *, url: str, detail: str = "", then: str = "try again later"
) -> StoreUnavailable:
    """The outage error (``"the {kind} store {problem}: {then}"``), with where and why logged, not shown."""
    log.warning("the %s store at %s %s%s", kind, url, problem, f": {detail}" if detail else "")
    return StoreUnavailable(f"the {kind} store {problem}: {then}")


def unreachable(kind: str, *, url: str, detail: str = "") -> StoreUnavailable:
    """The store did not answer at its address: the user checks the address and the server, not the clock."""
    then = f"check the host and port in the store URL, and that the {kind} server is running"
    return unavailable(kind, "cannot be reached", url=url, detail=detail, then=then)


def options(kind: str, url: str, allowed: Mapping[str, str] | None) -> dict[str, str]:
    """The query options of a store URL, each checked against ``allowed`` (name: what it takes;
    None when the driver checks them).

    An unknown option, or a port that is not a number, is a :class:`StoreConfigError` naming it
    (the message never repeats the URL, which may hold a password).
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError as exc:
        raise StoreConfigError(f"invalid {kind} store URL: {_port_problem(url, exc)}") from None
    found = {key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = [] if allowed is None else sorted(set(found) - set(allowed))
    if unknown:
        accepted = ", ".join(f"{name}={what}" for name, what in (allowed or {}).items()) or "none"
        raise StoreConfigError(
            f"invalid {kind} store URL: unknown option(s) {', '.join(unknown)} (accepted: {accepted})"
        )
    return found


def _port_problem(url: str, exc: ValueError) -> str:
    """What is wrong with the URL's host part, without repeating it (it may carry a password)."""
    netloc = url.split("://", 1)[-1].split("/", 1)[0].rpartition("@")[2]
    port = netloc.rpartition("]")[2].rpartition(":")[2] if ":" in netloc.rpartition("]")[2] else ""
    if port and not port.isdigit():
        return f"the port {port!r} is not a number"
    if port:
        return f"the port {port} is out of range (0 to 65535)"
    return f"the host part cannot be parsed ({exc})"


def number(kind: str, name: str, value: str) -> int:
    """An integer option, or a :class:`StoreConfigError` naming it."""
    try:
        return int(value)
    except ValueError:
        raise StoreConfigError(f"invalid {kind} store URL: {name}={value!r} is not a whole number") from None


def seconds(kind: str, name: str, value: str) -> float:
    """A positive number of seconds (``2``, ``0.5``), or a :class:`StoreConfigError` naming the option."""
    try:
        found = float(value)
    except ValueError:
        found = math.nan
    if not (math.isfinite(found) and found > 0):
        raise StoreConfigError(
            f"invalid {kind} store URL: {name}={value!r} is not a number of seconds above 0 (e.g. {name}=5)"
        )
    return found


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
