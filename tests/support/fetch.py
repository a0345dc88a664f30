"""httpx's calls for the tests, on one TLS context per process.

httpx builds a TLS context for every client it makes (certifi's CA bundle: ~50 ms of CPU), and
``httpx.get()`` makes a client per call. The suite's polling loops (a server's start, a run's
status, every 50 ms) spent most of their CPU there, beside the servers they waited for. These are
httpx's own functions and clients with ``verify`` set to one context made once.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import certifi
import httpx

CONTEXT = ssl.create_default_context(cafile=certifi.where())

get = functools.partial(httpx.get, verify=CONTEXT)
post = functools.partial(httpx.post, verify=CONTEXT)
put = functools.partial(httpx.put, verify=CONTEXT)
patch = functools.partial(httpx.patch, verify=CONTEXT)
delete = functools.partial(httpx.delete, verify=CONTEXT)
head = functools.partial(httpx.head, verify=CONTEXT)
options = functools.partial(httpx.options, verify=CONTEXT)
request = functools.partial(httpx.request, verify=CONTEXT)
stream = functools.partial(httpx.stream, verify=CONTEXT)


def Client(**options: Any) -> httpx.Client:  # noqa: N802 - named as the class it makes
    return httpx.Client(verify=CONTEXT, **options)


def AsyncClient(**options: Any) -> httpx.AsyncClient:  # noqa: N802 - named as the class it makes
    return httpx.AsyncClient(verify=CONTEXT, **options)
