"""Sending a request to the Durable Object that holds its run, retried where Cloudflare says it is safe."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["RETRIES", "forward", "retryable"]

RETRIES = 3
"""Attempts of a read sent to a run's Durable Object when the platform says it may be retried."""


def retryable(error: BaseException) -> bool:
    """Whether Cloudflare marks ``error`` (a Durable Object call's) as safe to retry: ``retryable``
    and not ``overloaded`` (retrying an overloaded object only adds to its load)."""
    js = getattr(error, "js_error", error)  # Pyodide's JsException carries the JavaScript Error
    try:
        return bool(getattr(js, "retryable", False)) and not bool(getattr(js, "overloaded", False))
    except Exception:  # noqa: BLE001 (a JavaScript proxy that cannot be read is not marked)
        return False


async def forward(request: Any, stub: Any, renew: Callable[[], Awaitable[Any]]) -> Any:
    """Send ``request`` to its run object through ``stub``. A read (GET, HEAD) is sent again, with
    a new stub from ``renew`` and backoff, when the call fails with an error Cloudflare marks
    retryable (the object was restarting or moving: seen as ``Network connection lost`` in the
    first read after a restart). A write is sent once: whether the object ran it is unknown, and
    a resume must not run twice."""
    reads = str(request.method).upper() in ("GET", "HEAD")
    for attempt in range(RETRIES):
        try:
            return await stub.fetch(getattr(request, "js_object", request))
        except Exception as exc:
            if not reads or attempt == RETRIES - 1 or not retryable(exc):
                raise
            await asyncio.sleep(0.05 * 2**attempt)
            stub = await renew() or stub  # a stub that failed is not used again (Cloudflare's advice)
    raise AssertionError("unreachable")
