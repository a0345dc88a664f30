"""OpenTelemetry: one trace per run across its executions, a span per step that ran, GenAI
attributes on model and tool calls, metrics and log context; nothing imported when it is off.

Spans go to the SDK's in-memory exporter through ``agent_unit.telemetry.configure``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent_unit import RetryPolicy, Run, RunEngine, RunStatus, define_agent, telemetry
from agent_unit._durable import Durable
from agent_unit.stores.memory import MemoryStore

from ..support.otel_spans import Spans
from .test_telemetry_agents import steps

INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def spans() -> Iterator[Spans]:
    yield Spans()
    telemetry.reset()


log = logging.getLogger("tests.telemetry")
seen_logs: list[logging.LogRecord] = []


class Keep(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        seen_logs.append(record)


@define_agent
async def refund(input: dict[str, Any], run: Run) -> str:
    order = await run.step("load", lambda: {"id": input["id"]})
    log.warning("loaded %s", order["id"])
    answer = await run.interrupt("approve", order)
    await run.step("charge", lambda step: step.idempotency_key)
    return f"refunded: {answer}"


async def test_a_parked_and_resumed_run_is_one_trace_under_the_request_that_started_it(spans: Spans) -> None:
    engine = RunEngine({"refund": refund}, MemoryStore())
    token = otel_context.attach(TraceContextTextMapPropagator().extract({"traceparent": INCOMING}))
    try:
        record = await engine.start("refund", {"id": "o1"}, wait=True)
    finally:
        otel_context.detach(token)
    assert record.status == RunStatus.interrupted
    answering = "00-11111111111111111111111111111111-2222222222222222-01"  # the request that answers it
    token = otel_context.attach(TraceContextTextMapPropagator().extract({"traceparent": answering}))
    try:
        done = await engine.resume(record.id, "yes", wait=True)
    finally:
        otel_context.detach(token)
    assert done.status == RunStatus.completed
    await engine.aclose()

    first, second = spans.executions()
    assert (first.name, second.name) == ("run refund", "resume refund")
    steps = {span.name: span for span in spans.named("step ")}
    assert set(steps) == {"step load", "step charge"}  # the resume replayed load: no second span
    assert {span.context.trace_id for span in spans.all()} == {int(INCOMING.split("-")[1], 16)}
    assert first.parent is not None and first.parent.span_id == int(INCOMING.split("-")[2], 16)
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert [link.context.span_id for link in second.links] == [0x2222222222222222]  # in the run's trace, linked
    assert steps["step load"].parent.span_id == first.context.span_id  # type: ignore[union-attr]
    assert steps["step charge"].parent.span_id == second.context.span_id  # type: ignore[union-attr]
    assert first.attributes["agent_unit.execution"] == "start"
    assert first.attributes["agent_unit.run.status"] == "interrupted"
    assert [event.name for event in first.events] == ["agent_unit.interrupt"]
    assert first.events[0].attributes == {
        "agent_unit.interrupt.name": "approve",
        "agent_unit.interrupt.key": "interrupt:approve#0",
    }
    assert second.attributes["agent_unit.execution"] == "resume"
    assert second.attributes["agent_unit.run.status"] == "completed"
    charge = steps["step charge"]
    assert charge.attributes["agent_unit.step.name"] == "charge"
    assert "agent_unit.work.outcome" not in charge.attributes  # only set when not ok
    assert len(str(charge.attributes["agent_unit.idempotency_key"])) == 40
    assert "agent_unit.run.input" not in first.attributes  # payloads only on opt-in
    assert "output.value" not in charge.attributes


async def test_payloads_are_recorded_only_when_asked_for() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(provider, payloads=True)
    try:
        engine = RunEngine({"refund": refund}, MemoryStore())
        record = await engine.start("refund", {"id": "o1"}, wait=True)
        await engine.resume(record.id, "yes", wait=True)
        await engine.aclose()
    finally:
        telemetry.reset()
    first, second = sorted(
        (span for span in exporter.get_finished_spans() if span.name.endswith(" refund")),
        key=lambda span: span.start_time or 0,
    )
    assert first.attributes["agent_unit.run.input"] == '{"id": "o1"}'
    assert first.events[0].attributes["agent_unit.interrupt.payload"] == '{"id": "o1"}'  # type: ignore[index]
    assert second.attributes["agent_unit.run.output"] == '"refunded: yes"'


flaky_calls: list[int] = []


@define_agent
async def flaky(input: None, run: Run) -> str:
    def call() -> str:
        flaky_calls.append(1)
        if len(flaky_calls) < 2:
            raise ConnectionError("reset by peer")
        return "ok"

    await run.step("call", call, retry=RetryPolicy(attempts=3, initial=0.01))
    await run.step("boom", lambda: 1 / 0)
    return "never"


async def test_a_step_span_shows_its_retries_and_a_failed_step_its_error(spans: Spans) -> None:
    engine = RunEngine({"flaky": flaky}, MemoryStore())
    record = await engine.start("flaky", None, wait=True)
    await engine.aclose()
    assert record.status == RunStatus.failed
    call, boom = spans.named("step ")
    assert call.attributes["agent_unit.work.attempts"] == 2
    assert [event.name for event in call.events] == ["agent_unit.retry"]
    assert call.events[0].attributes["exception.type"] == "ConnectionError"  # type: ignore[index]
    assert boom.attributes["agent_unit.work.outcome"] == "error"
    assert boom.status.status_code.name == "ERROR"
    (run,) = spans.executions()
    assert run.attributes["agent_unit.run.status"] == "failed" and run.status.status_code.name == "ERROR"
    (finished,) = spans.points("agent_unit.runs.finished")
    assert dict(finished.attributes) == {"agent_unit.agent": "flaky", "agent_unit.run.status": "failed"}


@define_agent
async def chat(input: None, run: Run) -> str:
    durable = Durable(run)

    async def answer(request: Any) -> dict[str, Any]:
        return {"text": "hi"}

    def usage(response: Any) -> dict[str, Any]:
        return {"provider": "openai", "model": "gpt-x", "inputTokens": 12, "outputTokens": 5}

    model = durable.model(answer, name="gpt-x", usage=usage)
    tools = durable.tools({"lookup": lambda order: f"order {order}"})
    await model({"prompt": "hello"})
    await tools["lookup"]({"order": "o1"}, call_id="call_7")
    return "ok"


async def test_model_and_tool_calls_carry_the_genai_attributes(spans: Spans) -> None:
    engine = RunEngine({"chat": chat}, MemoryStore())
    await engine.start("chat", None, wait=True)
    await engine.aclose()
    (model,) = spans.named("chat ")
    assert model.name == "chat gpt-x"
    assert {key: model.attributes[key] for key in ("gen_ai.operation.name", "gen_ai.request.model")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-x",
    }
    assert model.attributes["gen_ai.provider.name"] == "openai"
    assert model.attributes["gen_ai.usage.input_tokens"] == 12
    assert model.attributes["gen_ai.usage.output_tokens"] == 5
    (tool,) = spans.named("execute_tool")
    assert tool.name == "execute_tool lookup"
    assert tool.attributes["gen_ai.tool.name"] == "lookup"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_7"
    assert "gen_ai.tool.call.result" not in tool.attributes
    tokens = {point.attributes["gen_ai.token.type"]: point.sum for point in spans.points("gen_ai.client.token.usage")}
    assert tokens == {"input": 12, "output": 5}


@define_agent
async def napper(input: None, run: Run) -> str:
    await run.step("before", lambda: 1)
    await run.sleep(0.05)
    return "rested"


async def test_a_sleep_is_an_event_and_the_wake_up_a_span_of_the_same_trace_with_its_resume_latency(
    spans: Spans,
) -> None:
    engine = RunEngine({"napper": napper}, MemoryStore(), background_sweep=False)  # no timer: the sweep wakes it
    record = await engine.start("napper", None, wait=True)
    assert record.status == RunStatus.sleeping
    await asyncio.sleep(0.1)
    await engine.sweep(wait=True)
    assert (await engine.get(record.id)).status == RunStatus.completed
    await engine.aclose()
    first, woken = spans.executions()
    assert (first.name, woken.name) == ("run napper", "wake napper")
    assert [event.name for event in first.events] == ["agent_unit.sleep"]
    assert woken.attributes["agent_unit.execution"] == "wake"
    assert woken.parent is not None and woken.parent.span_id == first.context.span_id
    assert woken.context.trace_id == first.context.trace_id
    (latency,) = spans.points("agent_unit.resume.latency")
    assert latency.count == 1 and latency.sum >= 0.05
    assert sum(point.value for point in spans.points("agent_unit.sweep.runs")) == 1


async def test_log_records_made_in_a_run_carry_its_id_and_trace_id(spans: Spans) -> None:
    handler = Keep()
    log.addHandler(handler)
    try:
        engine = RunEngine({"refund": refund}, MemoryStore())
        record = await engine.start("refund", {"id": "o1"}, wait=True)
        await engine.aclose()
    finally:
        log.removeHandler(handler)
    (line,) = [seen for seen in seen_logs if seen.getMessage() == "loaded o1"]
    (run,) = spans.executions()
    assert line.run_id == record.id  # type: ignore[attr-defined]
    assert line.otelTraceID == format(run.context.trace_id, "032x")  # type: ignore[attr-defined]


def test_with_nothing_configured_a_run_imports_no_opentelemetry() -> None:
    code = (
        "import asyncio, sys\n"
        "from agent_unit import RunEngine\n"
        "from tests.core.test_telemetry_agents import AGENTS\n"
        "async def main():\n"
        "    engine = RunEngine(AGENTS, 'memory://')\n"
        "    record = await engine.start('steps', None, wait=True)\n"
        "    assert record.status == 'completed', record\n"
        "    await engine.sweep()\n"
        "    await engine.aclose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"


def test_the_standard_otel_environment_turns_spans_on_with_no_code() -> None:
    code = (
        "import asyncio\n"
        "from agent_unit import RunEngine\n"
        "from agent_unit import telemetry\n"
        "from tests.core.test_telemetry_agents import AGENTS\n"
        "async def main():\n"
        "    engine = RunEngine(AGENTS, 'memory://')\n"
        "    await engine.start('steps', None, wait=True)\n"
        "    await engine.aclose()\n"
        "asyncio.run(main())\n"
        "telemetry.flush()\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="shop")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    exported = json.loads("[" + done.stdout.replace("}\n{", "},\n{") + "]")
    assert sorted(span["name"] for span in exported) == ["run steps", "step one", "step two"]
    assert {span["resource"]["attributes"]["service.name"] for span in exported} == {"shop"}


async def test_a_budget_yield_is_an_event_and_each_continuation_a_child_of_the_runs_first_span(spans: Spans) -> None:
    engine = RunEngine({"steps": steps}, MemoryStore(), budget="0s")  # yield after every step
    record = await engine.start("steps", None, wait=True)
    await engine.aclose()
    assert record.status == RunStatus.completed
    first, *continued = spans.executions()
    assert first.name == "run steps" and [span.name for span in continued] == ["continue steps"]
    assert [event.name for event in first.events] == ["agent_unit.yield"]
    assert first.attributes["agent_unit.run.status"] == "yielded"
    assert continued[0].parent is not None and continued[0].parent.span_id == first.context.span_id
    assert sorted(span.name for span in spans.named("step ")) == ["step one", "step two"]
    (parked,) = spans.points("agent_unit.runs.parked")
    assert dict(parked.attributes) == {"agent_unit.agent": "steps", "agent_unit.park": "yielded"}


@define_agent
async def dozer(input: None, run: Run) -> str:
    await run.sleep("1h")
    return "rested"


@define_agent
async def stuck(input: None, run: Run) -> str:
    await run.step("wait", lambda: asyncio.sleep(30))
    return "never"


async def test_a_cancelled_run_counts_as_finished_once_whether_it_was_parked_or_running(spans: Spans) -> None:
    engine = RunEngine({"refund": refund, "dozer": dozer, "stuck": stuck}, MemoryStore())
    parked = await engine.start("refund", {"id": "o1"}, wait=True)
    sleeping = await engine.start("dozer", None, wait=True)
    running = await engine.start("stuck", None)
    assert (parked.status, sleeping.status) == (RunStatus.interrupted, RunStatus.sleeping)
    await asyncio.sleep(0.05)
    for record in (parked, sleeping, running):
        assert (await engine.cancel(record.id)).status == RunStatus.cancelled
    await engine.aclose()
    finished = {
        (point.attributes["agent_unit.agent"], point.attributes["agent_unit.run.status"]): point.value
        for point in spans.points("agent_unit.runs.finished")
    }
    assert finished == {("refund", "cancelled"): 1, ("dozer", "cancelled"): 1, ("stuck", "cancelled"): 1}
    started = {point.attributes["agent_unit.agent"]: point.value for point in spans.points("agent_unit.runs.started")}
    assert started == {"refund": 1, "dozer": 1, "stuck": 1}
