"""With OpenTelemetry on, the OpenAI Agents SDK's own spans nest under the run's, in its trace.

The SDK traces through processors of its own; the adapter bridges them into OpenTelemetry
(OpenInference's instrumentation). Spans go to the SDK's in-memory exporter; the model is scripted
and opens a generation span as the SDK's own models do (tests/support/openai_agents_fixtures.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from agent_unit import RunStatus, telemetry
from agent_unit.testing import create_test_unit

from ..support.otel_spans import Spans

# The SDK and its fixtures are imported by the tests that use them: importing the SDK costs ~1.7 s
# of CPU, which every pytest worker would otherwise pay to collect this module.
if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

SDK_SCOPE = "openinference.instrumentation.openai_agents"
BRIDGE_MODULES = ("openinference", "agent_unit._otel", "agent_unit.adapters.openai_agents_tracing")


@pytest.fixture
def spans() -> Iterator[Spans]:
    from agents import set_trace_processors, set_tracing_disabled

    from ..support import openai_agents_fixtures  # noqa: F401 - importing it turns the SDK's tracing off: first, so the switch below stands

    set_tracing_disabled(False)  # the fixtures turn the SDK's tracing off: nothing is sent to OpenAI
    set_trace_processors([])  # without the SDK's exporter to OpenAI's dashboard
    yield Spans()
    telemetry.reset()
    set_trace_processors([])
    set_tracing_disabled(True)


def sdk_spans(spans: Spans) -> list[ReadableSpan]:
    return [span for span in spans.all() if span.instrumentation_scope and span.instrumentation_scope.name == SDK_SCOPE]


def ancestors(span: ReadableSpan, spans: Spans) -> list[str]:
    """The names of a span's parents, nearest first."""
    by_id = {each.context.span_id: each for each in spans.all() if each.context is not None}
    names, parent = [], span.parent
    while parent is not None and parent.span_id in by_id:
        found = by_id[parent.span_id]
        names.append(found.name)
        parent = found.parent
    return names


async def test_the_sdk_s_agent_generation_and_function_spans_nest_under_each_execution_in_the_run_s_trace(
    spans: Spans,
) -> None:
    from ..support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script

    model = ScriptedModel(refund_script)
    unit = create_test_unit({"support": refund_agent(model)}, adapters=[])
    parked = await unit.run("support", "refund my order")
    assert parked.status == RunStatus.interrupted
    done = await unit.resume(parked.id, True)
    assert done.status == RunStatus.completed, done.error
    await unit.close()

    first, second = spans.executions()
    assert (first.name, second.name) == ("run support", "resume support")
    assert {span.context.trace_id for span in spans.all()} == {first.context.trace_id}

    def execution(span: ReadableSpan) -> str:
        """The name of the run's execution the span sits under."""
        return next(name for name in ancestors(span, spans) if name in ("run support", "resume support"))

    sdk = sorted(sdk_spans(spans), key=lambda span: span.start_time or 0)
    by_kind = {
        kind: [execution(span) for span in sdk if span.name == name]
        for kind, name in (("agent", "support"), ("generation", "generation"), ("function", "refund"))
    }
    # one model call ran in each execution: on resume the first response came from the journal;
    # the tool asked for its approval in the first execution and ran in the second
    assert by_kind == {
        "agent": ["run support", "resume support"],
        "generation": ["run support", "resume support"],
        "function": ["run support", "resume support"],
    }
    assert len(model.calls) == 2
    (tool,) = spans.named("execute_tool refund")  # agent-unit's span of the call that ran, in the SDK's
    assert ancestors(tool, spans)[:3] == ["refund", "turn", "support"]


async def test_the_sdk_s_spans_hold_no_prompt_or_answer_unless_payloads_are_asked_for(spans: Spans) -> None:
    from ..support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script

    unit = create_test_unit({"support": refund_agent(ScriptedModel(refund_script), approve=False)}, adapters=[])
    done = await unit.run("support", "refund my order, card 4242")
    assert done.status == RunStatus.completed, done.error
    await unit.close()
    text = " ".join(str(value) for span in sdk_spans(spans) for value in (span.attributes or {}).values())
    assert sdk_spans(spans) and "4242" not in text and "refunded o_1" not in text

    shown = Spans(payloads=True)
    unit = create_test_unit({"support": refund_agent(ScriptedModel(refund_script), approve=False)}, adapters=[])
    await unit.run("support", "refund my order, card 4242")
    await unit.close()
    text = " ".join(str(value) for span in sdk_spans(shown) for value in (span.attributes or {}).values())
    assert "4242" in text and "refunded o_1" in text


def test_with_telemetry_off_an_sdk_run_loads_no_bridge() -> None:
    # the SDK imports OpenTelemetry's API itself (through MCP): what must stay out is ours and OpenInference's
    code = (
        "import asyncio, sys\n"
        "from agent_unit.testing import create_test_unit\n"
        "from tests.support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script\n"
        "async def main():\n"
        "    unit = create_test_unit({'s': refund_agent(ScriptedModel(refund_script), approve=False)}, adapters=[])\n"
        "    done = await unit.run('s', 'refund')\n"
        "    assert done.status == 'completed', done.error\n"
        "    await unit.close()\n"
        "asyncio.run(main())\n"
        f"print(sorted(m for m in sys.modules if m.startswith({BRIDGE_MODULES!r})))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"


def test_an_app_that_instrumented_the_sdk_itself_keeps_its_own_instrumentation() -> None:
    code = (
        "import asyncio\n"
        "from agents import set_trace_processors, set_tracing_disabled\n"
        "from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from agent_unit import telemetry\n"
        "from agent_unit.testing import create_test_unit\n"
        "from tests.support.openai_agents_fixtures import ScriptedModel, refund_agent, refund_script\n"
        "def provider(exporter):\n"
        "    made = TracerProvider()\n"
        "    made.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "    return made\n"
        "set_tracing_disabled(False)\n"
        "set_trace_processors([])\n"
        "apps, ours = InMemorySpanExporter(), InMemorySpanExporter()\n"
        "OpenAIAgentsInstrumentor().instrument(tracer_provider=provider(apps))\n"
        "telemetry.configure(provider(ours))\n"
        "async def main():\n"
        "    unit = create_test_unit({'s': refund_agent(ScriptedModel(refund_script), approve=False)}, adapters=[])\n"
        "    done = await unit.run('s', 'refund')\n"
        "    assert done.status == 'completed', done.error\n"
        "    await unit.close()\n"
        "asyncio.run(main())\n"
        "scopes = lambda found: sorted({span.instrumentation_scope.name for span in found.get_finished_spans()})\n"
        "print(scopes(apps), scopes(ours))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == f"['{SDK_SCOPE}'] ['agent_unit']"
