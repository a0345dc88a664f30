"""Whether agent-unit emits OpenTelemetry, decided without importing it when it is off.

OpenTelemetry is on when it is installed (``pip install "agent-unit[otel]"``) and one of these holds:

- the app configured it: a global ``TracerProvider`` is set (the SDK's own, ``logfire.configure()``,
  ``opentelemetry-instrument``);
- the standard environment asks for it: ``OTEL_EXPORTER_OTLP_ENDPOINT``,
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``). agent-unit
  then sets the SDK up as ``opentelemetry-instrument`` would (OTLP over HTTP, batched; metrics and
  logs too unless ``OTEL_METRICS_EXPORTER`` / ``OTEL_LOGS_EXPORTER`` say ``none``) and makes it global,
  so a framework's own instrumentation exports to the same place;
- code called :func:`configure` with providers of its own (a test's in-memory exporter).

``OTEL_SDK_DISABLED=true`` or ``AGENT_UNIT_OTEL=false`` turns it off whatever else is set. The
variables are read once, at the first check (:func:`reset` reads them again). Off, the check is a
few lookups per execution (never per step) and ``opentelemetry`` is never imported. Payloads
(inputs, outputs, answers, tool arguments) are recorded only with ``AGENT_UNIT_OTEL_PAYLOADS=true``
(or ``configure(payloads=True)``): they may hold personal data.
"""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._otel import Telemetry

__all__ = ["active", "configure", "flush", "payloads_wanted", "reset"]

_ON_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")
_FALSE = frozenset({"0", "false", "no", "off", "none"})

_active: Telemetry | None = None
_explicit = False  # configure() was called: its answer stands, nothing is detected
_environment: tuple[bool, bool] | None = None  # (turned off, asked for) as the environment says: read once


def _off() -> bool:
    return (
        os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true"
        or os.environ.get("AGENT_UNIT_OTEL", "").lower() in _FALSE
    )


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")


def payloads_wanted() -> bool:
    """Whether payloads are recorded by default (``AGENT_UNIT_OTEL_PAYLOADS``, or OpenTelemetry's
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``)."""
    return _truthy("AGENT_UNIT_OTEL_PAYLOADS") or _truthy("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")


def active() -> Telemetry | None:
    """The telemetry to emit through, or None (the common case: nothing configured, nothing imported).

    Asked at each execution and sweep, so an app that configures OpenTelemetry after creating its
    agent unit (in ``main``, in a lifespan) is seen from its next run on. The environment
    variables are read at the first call (:func:`reset` reads them again): a process's
    environment is set before it serves, and reading five unset variables (each a KeyError
    raised and caught), three times per resume, was about 6% of a resume's instructions over HTTP.
    """
    global _environment
    if _active is not None or _explicit:
        return _active
    if _environment is None:  # once: each read of a variable that is not set raises and catches a KeyError
        wanted = any(os.environ.get(name, "").lower() not in ("", "none") for name in _ON_ENV)
        _environment = (_off() or sys.platform == "emscripten", wanted)
    off, wanted = _environment
    if off:  # Pyodide (Workers): no threads or sockets to export from
        return None
    if "opentelemetry.trace" in sys.modules:
        found = _configured_provider()
        if found is not None:
            return _enable(found, None)
    if wanted and find_spec("opentelemetry") is not None and find_spec("opentelemetry.sdk") is not None:
        from ._otel import providers_from_env

        return _enable(*providers_from_env())
    return None


def _configured_provider() -> Any | None:
    """The global TracerProvider if the app set one (the API's default is a proxy that does nothing)."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider


def _enable(tracer_provider: Any, meter_provider: Any | None) -> Telemetry:
    global _active
    from ._otel import Telemetry

    _active = Telemetry(tracer_provider, meter_provider, payloads=payloads_wanted())
    return _active


def configure(
    tracer_provider: Any | None = None,
    meter_provider: Any | None = None,
    *,
    payloads: bool | None = None,
    enabled: bool = True,
) -> Telemetry | None:
    """Emit through these providers (default: the global ones), whatever is detected; ``enabled=False``
    emits nothing. ``payloads``: record inputs, outputs, answers and tool arguments (default from
    ``AGENT_UNIT_OTEL_PAYLOADS``). :func:`reset` goes back to detecting."""
    global _active, _explicit
    _explicit = True
    if not enabled:
        _active = None
        return None
    from opentelemetry import metrics, trace

    from ._otel import Telemetry

    _active = Telemetry(
        tracer_provider or trace.get_tracer_provider(),
        meter_provider or metrics.get_meter_provider(),
        payloads=payloads_wanted() if payloads is None else payloads,
    )
    return _active


def reset() -> None:
    """Forget :func:`configure` and what was detected: the next :func:`active` looks again,
    the environment included."""
    global _active, _explicit, _environment
    _active = None
    _explicit = False
    _environment = None


def flush(timeout: float = 5.0) -> None:
    """Export what is buffered now (spans, metrics, logs): a host that freezes the process after
    each invocation (AWS Lambda) calls this before it returns. Nothing to do when telemetry is off."""
    if _active is not None:
        _active.flush(timeout)
