"""``TemporalSettings``: where the Temporal engine finds its server (the ``[temporal]`` table).

    [temporal]
    address = "${TEMPORAL_ADDRESS}"   # host:port
    namespace = "default"
    task_queue = "agent-unit"
    api_key = "${TEMPORAL_API_KEY}"    # Temporal Cloud (turns TLS on)
    heartbeat = "30s"                  # a worker silent this long is replaced by another's retry
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..durations import Duration, parse_duration
from ..errors import EngineUnavailable

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["TemporalSettings"]


@dataclass(frozen=True)
class TemporalSettings:
    """The Temporal server, namespace and task queue the runs go through.

    ``tls``: None turns TLS on with an ``api_key`` (Temporal Cloud) and off without one (a
    server on a private network, the dev server). ``heartbeat``: how long a worker may stay
    silent before Temporal gives its execution to another worker; the worker's lease on a run
    lasts as long, so the new worker takes the run over as soon as Temporal hands it over.
    """

    address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "agent-unit"
    api_key: str | None = None
    tls: bool | None = None
    heartbeat: Duration = "30s"

    @property
    def heartbeat_seconds(self) -> float:
        return parse_duration(self.heartbeat).total_seconds()

    async def connect(self) -> Client:
        """A client of the server; ``EngineUnavailable`` (503) if it cannot be reached."""
        from temporalio.client import Client

        tls = self.tls if self.tls is not None else self.api_key is not None
        try:
            return await Client.connect(self.address, namespace=self.namespace, api_key=self.api_key, tls=tls)
        except RuntimeError as exc:  # the core SDK's connection errors
            raise EngineUnavailable(
                f"Temporal at {self.address} cannot be reached ({exc}): start it, or fix [temporal] address"
            ) from None
