"""The OpenAI Agents SDK's own traces as OpenTelemetry spans under the run's, once telemetry is on.

The SDK traces through processors of its own (to OpenAI's dashboard by default), so its workflow,
agent, model and tool spans never reach OpenTelemetry. OpenInference's instrumentation
(``openinference-instrumentation-openai-agents``, in ``agent-unit[otel]``) maps each of them to an
OpenTelemetry span: the SDK's trace becomes a span under the span current when ``Runner.run``
starts (the execution's), and the SDK's spans nest in it, made current in turn, so agent-unit's
``execute_tool`` spans sit under the SDK's function spans. It is added beside the SDK's processors,
not instead of them: what the app sends to OpenAI's dashboard still goes there. An app that set the
instrumentation up itself keeps its own; the SDK's spans follow the SDK's switch
(``OPENAI_AGENTS_DISABLE_TRACING``, ``set_tracing_disabled``).

Payloads follow agent-unit's setting: without it, the SDK spans' inputs and outputs (prompts,
answers, tool arguments and results) are hidden, as agent-unit's own are.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._otel import Telemetry

__all__ = ["bridge"]

_log = logging.getLogger("agent_unit.adapters.openai_agents")
_bridged: tuple[object, bool] | None = None  # (tracer provider, payloads) the instrumentation uses now
_warned = False


def bridge(telemetry: Telemetry) -> None:
    """Send the SDK's spans to ``telemetry``'s tracer provider (set up once per provider and payload
    setting: an execution after the first costs one comparison)."""
    global _bridged, _warned
    wanted = (telemetry.tracer_provider, telemetry.payloads)
    if _bridged is not None and _bridged[0] is wanted[0] and _bridged[1] == wanted[1]:
        return
    try:
        from openinference.instrumentation import TraceConfig
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    except ImportError:
        if not _warned:
            _warned = True
            _log.warning(
                "the OpenAI Agents SDK's spans are not sent to OpenTelemetry: "
                'pip install "agent-unit[otel]" (openinference-instrumentation-openai-agents) to see them under the run'
            )
        return
    instrumentor = OpenAIAgentsInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        if _bridged is None:
            return  # the app instrumented the SDK itself: its choice of provider and payloads stands
        instrumentor.uninstrument()  # a run in flight still ends its spans through the old one
    hidden = not telemetry.payloads
    instrumentor.instrument(
        tracer_provider=telemetry.tracer_provider,
        exclusive_processor=False,
        config=TraceConfig(hide_inputs=hidden, hide_outputs=hidden),
    )
    _bridged = wanted
