"""Which ``Host`` names reach this deployment: the check that stops DNS rebinding.

A rebinding page is served from the attacker's domain, whose DNS then points at the server
(often loopback, or an address on the user's network). The browser takes the server for the
attacker's own site: it sends ``Host: attacker.example`` with ``Origin: http://attacker.example``
and lets the page read every answer. The name in ``Host`` is the one thing that gives it away.

The deployment's names are its public URL's host, the ``allowed_hosts`` entries
(``agents.example.com``; ``.example.com`` for the domain and its subdomains; ``*.example.com``
for its subdomains only; ``*`` turns the check off), loopback names (``localhost``,
``*.localhost``) and IP addresses. The last two are never a rebinding: a browser resolves
``localhost`` itself, and an address cannot be pointed anywhere else.

A Host that is not listed is refused when the deployment names itself (a public URL under a
domain name, or ``allowed_hosts``) or when the request came over loopback (a server bound to
127.0.0.1, such as ``agent-unit dev``). A server that names nothing and is reached over its
network (a container on 0.0.0.0 with no ``url``) cannot tell its own names from others, so it
answers them; but a page at a name it does not list is never taken for its own.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HostNames", "arrived_at_loopback", "host_name"]

_HOST = re.compile(r"(?:\[(?P<address>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_.-]+))(?::[0-9]{1,5})?")
_DOTTED = re.compile(r"[0-9.]+")
_ENTRY = re.compile(r"(?:\*\.|\.)?[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
_REMEMBERED = 256  # Host headers whose answer a HostNames keeps (then it forgets them all)


def host_name(host: str | None) -> str | None:
    """The name in a ``Host`` header, lower case, without its port or a final dot
    (``Agents.Example.com:443`` is ``agents.example.com``, ``[::1]:80`` is ``::1``); None when
    the header is not a host."""
    match = _HOST.fullmatch((host or "").strip().lower())
    if match is None:
        return None
    address = match["address"]
    if address is not None:
        return address if _address(address) is not None else None
    return match["name"].removesuffix(".") or None


def arrived_at_loopback(scope: Mapping[str, Any]) -> bool:
    """Whether the connection was accepted at a loopback address (ASGI's ``server``): a server
    bound to 127.0.0.1, or one on all interfaces reached from the same machine."""
    server: Any = scope.get("server")
    return bool(server) and _loopback(str(server[0]))


@functools.lru_cache(maxsize=64)
def _loopback(text: str) -> bool:
    """Whether the address ``text`` is loopback; remembered for the few a server listens at
    (``is_loopback`` walks an ``ipaddress`` network in Python, every request)."""
    address = _address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address is not None and address.is_loopback


@functools.lru_cache(maxsize=256)
def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address ``text`` writes, or None. A name is told apart by its characters first:
    ``ip_address`` raises twice for one, which would cost more than the rest of the check.
    Remembered for the few addresses a server sees (its own, its Host names): each request asks twice."""
    if ":" not in text and not _DOTTED.fullmatch(text):
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _never_rebound(name: str) -> bool:
    """Loopback names and IP addresses: no attacker's domain can arrive as one."""
    return name == "localhost" or name.endswith(".localhost") or _address(name) is not None


class HostNames:
    """The deployment's names: ``public_url``'s host and ``allowed`` (``allowed_hosts``).

    ``known``: the deployment names itself, so a Host it does not list is refused wherever the
    request comes from (a public URL on loopback or at an address names nothing new). ``any``:
    ``allowed_hosts`` holds ``"*"``, so every Host is listed.
    """

    def __init__(self, public_url: str | None, allowed: Iterable[str] = ()) -> None:
        self.any = False
        self._exact: set[str] = set()
        self._domains: set[str] = set()  # ".example.com": the domain and its subdomains
        self._subdomains: set[str] = set()  # "*.example.com": its subdomains only
        for entry in allowed:
            self._add(entry)
        own = (urlsplit(public_url).hostname or "") if public_url else ""
        if own and not _never_rebound(own):
            self._exact.add(own.removesuffix("."))
        self.known = self.any or bool(self._exact or self._domains or self._subdomains)
        self._answers: dict[tuple[str, bool], bool] = {}  # (Host, local) -> allowed: see allows

    def _add(self, entry: str) -> None:
        text = entry.strip().lower()
        if text == "*":
            self.any = True
        elif _ENTRY.fullmatch(text) is None:
            raise ValueError(
                f"allowed_hosts: {entry!r} is not a host name: write 'agents.example.com' (no scheme, no port), "
                "'.example.com' for the domain and its subdomains, '*.example.com' for its subdomains, or '*'"
            )
        elif text.startswith("*."):
            self._subdomains.add(text[2:].removesuffix("."))
        elif text.startswith("."):
            self._domains.add(text[1:].removesuffix("."))
        else:
            self._exact.add(text.removesuffix("."))

    def listed(self, host: str | None) -> bool:
        """Whether the ``Host`` header names this deployment (its port is not compared)."""
        if self.any:
            return True
        name = host_name(host)
        if name is None:
            return False
        if name in self._exact or name in self._domains or _never_rebound(name):
            return True
        parents = [name.split(".", depth)[-1] for depth in range(1, name.count(".") + 1)]
        return any(parent in self._domains or parent in self._subdomains for parent in parents)

    def allows(self, host: str | None, *, local: bool) -> bool:
        """Whether a request sent with this ``Host`` may go on; ``local``: it came over loopback.

        A request without a ``Host`` goes on: a browser always sends one, so it is no rebinding
        (an HTTP/1.0 client, or a platform's adapter that leaves the header out).

        Remembered for the last 256 Hosts (the answer depends on nothing else): clients send
        the same few, and parsing one (a regular expression, an address check) was ~1% of a
        resume over HTTP."""
        if not host:
            return True
        answer = self._answers.get((host, local))
        if answer is None:
            answer = self.listed(host) or not (self.known or local)
            if len(self._answers) >= _REMEMBERED:
                self._answers.clear()
            self._answers[host, local] = answer
        return answer
