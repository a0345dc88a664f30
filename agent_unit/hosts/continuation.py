"""Handing a run that yielded at its budget to a fresh invocation at the deployment's own URL.

A serverless host cuts an invocation after some minutes, so the engine's ``budget`` makes a
run yield at a step boundary and calls ``on_continue(run_id)``. Every host whose functions
answer HTTP continues the same way: a POST to its own ``/__agent-unit/continue``. A host of
your own says so in its :class:`~agent_unit.Host`:
``Host(continues=lambda path: continue_at(own_url + path, secret))``, as Lambda's and Vercel's do.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # ssl costs ~10 ms to import: not at a Lambda's cold start
    import ssl

__all__ = ["continue_at"]

log = logging.getLogger("agent_unit.hosts")


def continue_at(
    url: str, secret: str | None, headers: Mapping[str, str] | None = None
) -> Callable[[str], Awaitable[None]]:
    """The engine's ``on_continue``: POST ``{url}/__agent-unit/continue`` with the secret.

    The request is sent and its answer not awaited: the continuation answers only when its own
    slice ends, and this invocation must not last until then. If it is lost, the run stays
    queued with ``due_at`` set and the next sweep continues it. ``url`` is the deployment's
    own, from configuration: never one taken from a request.
    """
    sent = {**(headers or {}), **({"authorization": f"Bearer {secret}"} if secret else {})}
    target = f"{url.rstrip('/')}/__agent-unit/continue"

    async def on_continue(run_id: str) -> None:
        import httpx

        timeout = httpx.Timeout(10.0, read=1.0)  # connected and sent; the answer is not needed
        try:
            async with httpx.AsyncClient(timeout=timeout, verify=_tls()) as client:
                response = await client.post(target, json={"run_id": run_id}, headers=sent)
        except httpx.ReadTimeout:
            return  # the continuation is running in its own invocation
        except httpx.HTTPError as exc:
            log.warning("continuing run %s at %s failed (%s): the next sweep continues it", run_id, url, exc)
            return
        if response.status_code >= 400:
            log.warning(
                "continuing run %s at %s: HTTP %s: the next sweep continues it", run_id, url, response.status_code
            )

    return on_continue


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS context of every continuation: loading the CA bundle costs ~50 ms of CPU, once
    per process rather than once per continuation."""
    import httpx

    return httpx.create_ssl_context()
