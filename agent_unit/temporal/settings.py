"""``TemporalSettings``: where the Temporal engine finds its server (the ``[temporal]`` table).

[temporal]
address = "${TEMPORAL_ADDRESS}"   # host:port
namespace = "default"
task_queue = "agent-unit"
api_key = "${TEMPORAL_API_KEY}"    # Temporal Cloud (turns TLS on)
heartbeat = "30s"                  # a worker silent this long is replaced by another's retry
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..durations import Duration, parse_duration
from ..env import expand
from ..errors import ConfigError, EngineUnavailable

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["TemporalSettings", "temporal_settings"]


@dataclass(frozen=True)
class TemporalSettings:
    """The Temporal server, namespace and task queue the runs go through.

    ``tls``: None turns TLS on with an ``api_key`` (Temporal Cloud) and off without one (a
    server on a private network, the dev server). ``heartbeat``: how long a worker may stay
    silent before Temporal gives its execution to another worker; the worker's lease on a run
    lasts as long, so the new worker takes the run over as soon as Temporal hands it over.
    ``search_attributes``: give each run's workflow the Keyword search attributes
    ``AgentUnitAgent``, ``AgentUnitThread`` and ``AgentUnitStatus``, which must be registered on
    the namespace first (``temporal operator search-attribute create``).
    """

    address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "agent-unit"
    api_key: str | None = None
    tls: bool | None = None
    heartbeat: Duration = "30s"
    search_attributes: bool = False

    @property
    def heartbeat_seconds(self) -> float:
        return parse_duration(self.heartbeat).total_seconds()

    def expanded(self) -> TemporalSettings:
        """These settings with ``${NAME}`` expanded from the environment: where the app or worker
        runs, never in a build (``EngineUnavailable`` naming the variable if it is not set)."""
        values = {field.name: _expand(field.name, getattr(self, field.name)) for field in dataclasses.fields(self)}
        return TemporalSettings(**values)

    async def connect(self) -> Client:
        """A client of the server; ``EngineUnavailable`` (503) if it cannot be reached."""
        from temporalio.client import Client

        settings = self.expanded()
        tls = settings.tls if settings.tls is not None else settings.api_key is not None
        try:
            return await Client.connect(
                settings.address, namespace=settings.namespace, api_key=settings.api_key, tls=tls
            )
        except RuntimeError as exc:  # the core SDK's connection errors
            raise EngineUnavailable(
                f"Temporal at {settings.address} cannot be reached ({exc}): start it, or fix [temporal] address"
            ) from None


def temporal_settings(value: TemporalSettings | Mapping[str, Any]) -> TemporalSettings:
    """``value`` as settings: the ``[temporal]`` table's keys, ``${NAME}`` kept for
    :meth:`TemporalSettings.expanded` (a build creates the app where the secrets are not).

    ``ConfigError`` (one line, what to do) for an unknown key or ``temporalio`` not installed.
    """
    if importlib.util.find_spec("temporalio") is None:
        raise ConfigError("[temporal] needs the Temporal SDK: pip install 'agent-unit[temporal]'")
    if isinstance(value, TemporalSettings):
        return value
    known = {field.name for field in dataclasses.fields(TemporalSettings)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(f"[temporal] has no key {unknown[0]!r}: use {', '.join(sorted(known))}")
    settings = TemporalSettings(**value)
    try:
        settings.heartbeat_seconds  # noqa: B018 - a duration that cannot be read fails here, at start
    except ValueError as exc:
        raise ConfigError(f"[temporal] heartbeat: {exc}") from None
    return settings


def _expand(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value

    def missing(name: str) -> Exception:
        return EngineUnavailable(f"[temporal] {key} needs ${{{name}}}, which is not set: set it in the environment")

    return expand(value, missing)
