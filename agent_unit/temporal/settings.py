"""``TemporalSettings``: where the Temporal engine finds its server (the ``[temporal]`` table).

[temporal]
address = "${TEMPORAL_ADDRESS}"   # host:port
namespace = "default"
task_queue = "agent-unit"
api_key = "${TEMPORAL_API_KEY}"    # Temporal Cloud (turns TLS on)
tls_cert = "${TEMPORAL_TLS_CERT}"  # or mTLS: the client certificate and its key (a PEM file's path, or the PEM itself)
tls_key = "${TEMPORAL_TLS_KEY}"
heartbeat = "30s"                  # a worker silent this long is replaced by another's retry
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._durations import Duration, parse_duration
from ..env import expand
from ..errors import ConfigError, EngineUnavailable

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.service import TLSConfig

__all__ = ["TemporalSettings", "temporal_settings"]


@dataclass(frozen=True)
class TemporalSettings:
    """The Temporal server, namespace and task queue the runs go through.

    ``tls``: None turns TLS on with an ``api_key`` (Temporal Cloud) and off without one (a
    server on a private network, the dev server). ``heartbeat``: how long a worker may stay
    silent before Temporal gives its execution to another worker; the worker's lease on a run
    lasts as long, so the new worker takes the run over as soon as Temporal hands it over.
    ``tls_cert`` and ``tls_key``: a client certificate and its private key for mTLS (Temporal
    Cloud's other way in, or a server that verifies its clients), each a PEM file's path or the
    PEM text itself (a secret in the environment); ``tls_ca``: the server's root CA when it is not
    one the system trusts; ``tls_server_name``: the name to verify the server's certificate
    against when it differs from the address's host. Any of them turns TLS on.
    ``search_attributes``: give each run's workflow the Keyword search attributes
    ``AgentUnitAgent``, ``AgentUnitThread`` and ``AgentUnitStatus``, which must be registered on
    the namespace first (``temporal operator search-attribute create``).
    """

    address: str = "localhost:7233"
    namespace: str = "default"
    task_queue: str = "agent-unit"
    api_key: str | None = None
    tls: bool | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_server_name: str | None = None
    heartbeat: Duration = "30s"
    search_attributes: bool = False

    def tls_config(self) -> bool | TLSConfig:
        """What ``Client.connect`` takes as ``tls``: a ``TLSConfig`` with the certificates, else
        whether TLS is on (``tls``, or an ``api_key``). Call it on :meth:`expanded` settings."""
        from temporalio.service import TLSConfig

        if self.tls is False or not (self.tls_cert or self.tls_key or self.tls_ca or self.tls_server_name):
            return self.tls if self.tls is not None else self.api_key is not None
        return TLSConfig(
            client_cert=_pem("tls_cert", self.tls_cert) if self.tls_cert else None,
            client_private_key=_pem("tls_key", self.tls_key) if self.tls_key else None,
            server_root_ca_cert=_pem("tls_ca", self.tls_ca) if self.tls_ca else None,
            domain=self.tls_server_name,
        )

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
        tls = settings.tls_config()
        try:
            return await Client.connect(
                settings.address, namespace=settings.namespace, api_key=settings.api_key, tls=tls
            )
        except RuntimeError as exc:  # the core SDK's connection errors
            raise EngineUnavailable(
                f"Temporal at {settings.address} cannot be reached ({exc}): start it, or fix [temporal] address"
            ) from None


def _pem(key: str, value: str) -> bytes:
    """``value`` as PEM bytes: the text itself, or the file it names."""
    if value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    try:
        with open(value, "rb") as file:
            return file.read()
    except OSError as exc:
        raise EngineUnavailable(f"[temporal] {key}: cannot read {value!r} ({exc.strerror}): fix the path") from None


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
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ConfigError("[temporal] tls_cert and tls_key go together: set both for mTLS, or neither")
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
