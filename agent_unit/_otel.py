"""OpenTelemetry for runs: spans, metrics and log context. Imported only once telemetry is on
(:func:`agent_unit.telemetry.active`), so an app without OpenTelemetry never loads it.

One trace per run, however long it waits and wherever it continues: the run's first execution
span is the trace's root under agent-unit (a child of the request that started the run, when
that request carried a ``traceparent``), and its context is stored with the run record
(``RunRecord.trace``, in the JSON every store keeps already). Each later execution (an answer, a
wake-up, a continuation, a recovery) is a child of that first span, in the same trace, and links
to the span of the request or sweep that caused it. A child rather than a link: Phoenix, Jaeger,
Tempo and Honeycomb all draw a trace from its spans whatever their times, so the run reads as one
tree; a trace made of links only would show each execution alone. A wait is never a span held
open: the interrupt, sleep or yield is an event on the execution that parked.

An execution's span is named for what started it: ``run refund`` (the run's first), ``resume
refund``, ``wake refund``, ``continue refund``, ``recover refund``; each has the GenAI
``invoke_agent`` operation and ``agent_unit.execution`` saying which it is.

Inside an execution, each step, model call and tool call that runs is a span (a replayed one is
not: it did not run), made current while it runs, so a framework's own spans (PydanticAI's
through Logfire, the OpenAI Agents SDK's) nest under it. Model and tool spans follow the GenAI
semantic conventions (``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``); ``openinference.span.kind`` is set beside them
so Arize Phoenix draws each kind as it does its own.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._parks import Cancelled, Interrupted, Sleeping, Yielded
from .run import idempotency_key

if TYPE_CHECKING:
    from ._records import RunRecord

__all__ = ["ExecutionTelemetry", "Telemetry", "WorkTelemetry", "providers_from_env"]

SCOPE = "agent_unit"
_W3C = TraceContextTextMapPropagator()  # the stored form is W3C whatever propagator the app uses
_KINDS = ("step", "model", "tool")
_SPAN_KIND = {"step": "CHAIN", "model": "LLM", "tool": "TOOL"}
_MAX_PAYLOAD = 8192  # characters of a payload kept on a span (backends cap attributes anyway)


def _payload(text: str) -> str:
    return text if len(text) <= _MAX_PAYLOAD else text[:_MAX_PAYLOAD] + "…"


def _json(value: Any) -> str:
    import json

    return _payload(json.dumps(value, default=str, ensure_ascii=False))


def work_kind(key: str, name: str) -> tuple[str, str] | None:
    """``(kind, rest)`` of a journal key (``step:load#0`` is ``("step", "0")``; a tool's rest is its
    call id); None for journaled bookkeeping (values, message reads) that is not work to show."""
    for kind in _KINDS:
        marker = f"{kind}:{name}#"
        at = key.rfind(marker)
        if at == 0 or (at > 0 and key[at - 1] == "/"):
            return kind, key[at + len(marker) :]
    return None


class Telemetry:
    """The tracer and instruments agent-unit emits through (one per process, see :mod:`agent_unit.telemetry`)."""

    def __init__(self, tracer_provider: Any, meter_provider: Any | None, *, payloads: bool) -> None:
        from . import __version__

        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider or metrics.get_meter_provider()
        self.tracer = tracer_provider.get_tracer(SCOPE, __version__)
        self.payloads = payloads
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.runs_started = meter.create_counter(
            "agent_unit.runs.started", unit="{run}", description="Runs started, by agent"
        )
        self.runs_finished = meter.create_counter(
            "agent_unit.runs.finished", unit="{run}", description="Runs that ended, by agent and status"
        )
        self.runs_parked = meter.create_counter(
            "agent_unit.runs.parked", unit="{run}", description="Executions that parked, by agent and reason"
        )
        self.executions = meter.create_counter(
            "agent_unit.executions", unit="{execution}", description="Executions, by agent and kind"
        )
        self.step_duration = meter.create_histogram(
            "agent_unit.step.duration", unit="s", description="Steps, model and tool calls that ran"
        )
        self.resume_latency = meter.create_histogram(
            "agent_unit.resume.latency", unit="s", description="From a run's park to its next execution"
        )
        self.sweep_duration = meter.create_histogram("agent_unit.sweep.duration", unit="s", description="Sweeps")
        self.sweep_runs = meter.create_counter(
            "agent_unit.sweep.runs", unit="{run}", description="Runs a sweep woke, recovered or deleted, by action"
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used by model calls"
        )
        install_log_context()

    # -- runs -------------------------------------------------------------------------------

    def open_run(self, record: RunRecord) -> Any:
        """The run's first span, started as the run is created (a child of the current context: the
        request that starts it); its context goes into ``record.trace`` so the run is stored with it."""
        span = self.tracer.start_span(
            f"run {record.agent}", kind=SpanKind.INTERNAL, attributes=self._run_attributes(record, "start")
        )
        if self.payloads:
            span.set_attribute("agent_unit.run.input", _json(record.input))
        carrier: dict[str, str] = {}
        _W3C.inject(carrier, context=trace.set_span_in_context(span))
        record.trace = carrier or None
        return span

    def started(self, agent: str) -> None:
        """A run was accepted: stored and handed to what executes it (this process, or Temporal)."""
        self.runs_started.add(1, {"agent_unit.agent": agent})

    def finished(self, agent: str, status: str) -> None:
        """A run ended: ``completed`` or ``failed`` where it executed, ``cancelled`` where it was
        cancelled (once, whether it was running, parked or queued: a parked run has no execution)."""
        self.runs_finished.add(1, {"agent_unit.agent": agent, "agent_unit.run.status": status})

    def claimed(self, agent: str, kind: str, waited: float) -> None:
        """A parked run was taken to execute again, ``waited`` seconds after its last save."""
        self.resume_latency.record(max(0.0, waited), {"agent_unit.agent": agent, "agent_unit.execution": kind})

    def execution(self, record: RunRecord, kind: str, opened: Any | None = None) -> ExecutionTelemetry:
        """The span of one execution, current until :meth:`ExecutionTelemetry.end`.

        ``opened``: the run's first span (:meth:`open_run`); otherwise a child of the stored context,
        linked to the current span (the request or sweep that caused this execution). A run stored
        before telemetry was on has no stored context: this execution starts its trace and stores it.
        """
        span = opened
        if span is None:
            current = trace.get_current_span().get_span_context()
            stored = _W3C.extract(record.trace) if record.trace else None
            parent = (
                stored if stored is not None and trace.get_current_span(stored).get_span_context().is_valid else None
            )
            links = [Link(current)] if parent is not None and current.is_valid else []
            span = self.tracer.start_span(
                f"{'run' if kind == 'start' else kind} {record.agent}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=self._run_attributes(record, kind),
                links=links,
            )
            if parent is None:
                carrier: dict[str, str] = {}
                _W3C.inject(carrier, context=trace.set_span_in_context(span))
                record.trace = carrier or None  # saved with the run at its next save
            if kind == "recover":
                span.add_event("agent_unit.recovered", {"agent_unit.run.attempt": record.attempt})
        self.executions.add(1, {"agent_unit.agent": record.agent, "agent_unit.execution": kind})
        return ExecutionTelemetry(self, record, span, kind)

    @staticmethod
    def _run_attributes(record: RunRecord, kind: str) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": record.agent,
            "gen_ai.conversation.id": record.thread_id,
            "openinference.span.kind": "AGENT",
            "session.id": record.thread_id,
            "agent_unit.run.id": record.id,
            "agent_unit.run.attempt": record.attempt,
            "agent_unit.execution": kind,
        }

    @staticmethod
    def incoming(headers: list[tuple[bytes, bytes]]) -> Any:
        """A context manager: the request's ``traceparent`` as the current context while it is served,
        unless a span is current already (an app instrumented with OpenTelemetry's ASGI middleware)."""
        import contextlib

        if trace.get_current_span().get_span_context().is_valid:
            return contextlib.nullcontext()
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in headers
            if name in (b"traceparent", b"tracestate")
        }
        if "traceparent" not in carrier:
            return contextlib.nullcontext()
        return _Attached(_W3C.extract(carrier))

    # -- sweeps -----------------------------------------------------------------------------

    def swept(self, started: float, woken: int, recovered: int, deleted: int) -> None:
        """One sweep's duration (``started``: ``time.monotonic()`` when it began) and what it did."""
        self.sweep_duration.record(time.monotonic() - started)
        for action, count in (("woken", woken), ("recovered", recovered), ("deleted", deleted)):
            if count:
                self.sweep_runs.add(count, {"agent_unit.sweep.action": action})

    def flush(self, timeout: float = 5.0) -> None:
        """Export what the providers buffer (a frozen Lambda would keep it until its next invocation)."""
        millis = int(timeout * 1000)
        for provider in (self.tracer_provider, self.meter_provider, _logger_provider()):
            force_flush = getattr(provider, "force_flush", None)
            if force_flush is not None:
                try:
                    force_flush(millis)
                except Exception:  # an exporter's failure never fails the invocation
                    logging.getLogger("agent_unit.otel").warning("exporting telemetry failed", exc_info=True)


class ExecutionTelemetry:
    """One execution's span: current while the agent runs; its steps' spans are its children."""

    def __init__(self, telemetry: Telemetry, record: RunRecord, span: Any, kind: str) -> None:
        self.telemetry = telemetry
        self.record = record
        self.span = span
        self.kind = kind
        self._labels: dict[tuple[str, str], dict[str, str]] = {}
        self._token: object | None = otel_context.attach(trace.set_span_in_context(span))

    def work(self, key: str, name: str) -> WorkTelemetry | None:
        """The span of a step, model or tool call that runs now (None for bookkeeping: values, reads).

        Per step, so kept lean (``bench/otel_cost.py``): few attributes (each costs the SDK a few
        microseconds, and a step may take only tens; the run's id and attempt are on the parent,
        the execution's span), the metric's labels made once per kind and outcome.
        """
        found = work_kind(key, name)
        if found is None:
            return None
        kind, rest = found
        attributes: dict[str, Any] = {
            "openinference.span.kind": _SPAN_KIND[kind],
            "agent_unit.idempotency_key": idempotency_key(self.record.id, key),
        }
        if kind == "step":
            title = "step " + name
            attributes["agent_unit.step.name"] = name
        elif kind == "model":
            title = "chat " + name
            attributes["gen_ai.operation.name"] = "chat"
            attributes["gen_ai.request.model"] = name
        else:
            title = "execute_tool " + name
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = name
            attributes["gen_ai.tool.call.id"] = rest
        return WorkTelemetry(self, self.telemetry.tracer.start_span(title, attributes=attributes), kind)

    def labels(self, kind: str, outcome: str) -> dict[str, str]:
        """The step duration's labels for work of ``kind`` that ended with ``outcome`` (made once)."""
        found = self._labels.get((kind, outcome))
        if found is None:
            found = self._labels[kind, outcome] = {
                "agent_unit.agent": self.record.agent,
                "agent_unit.work.kind": kind,
                "agent_unit.work.outcome": outcome,
            }
        return found

    def end(self, outcome: BaseException | None, status: str | None = None) -> None:
        """Close the span with how the execution stopped: ``outcome`` is the park, the error, or None
        (the run completed). Called once; a second call does nothing."""
        if self._token is None:
            return
        span, record, tel = self.span, self.record, self.telemetry
        agent = {"agent_unit.agent": record.agent}
        if isinstance(outcome, Interrupted):
            status = "interrupted"
            attributes = {
                "agent_unit.interrupt.name": outcome.interrupt.name,
                "agent_unit.interrupt.key": outcome.interrupt.key,
            }
            if tel.payloads:
                attributes["agent_unit.interrupt.payload"] = _json(outcome.interrupt.payload)
            span.add_event("agent_unit.interrupt", attributes)
        elif isinstance(outcome, Sleeping):
            status = "sleeping"
            from ._clock import to_datetime

            wake_at = to_datetime(outcome.wake_at)
            span.add_event("agent_unit.sleep", {"agent_unit.wake_at": "" if wake_at is None else wake_at.isoformat()})
        elif isinstance(outcome, Yielded):
            status = "yielded"
            span.add_event("agent_unit.yield")
        elif isinstance(outcome, Cancelled):
            status = status or "stopped"
        elif outcome is not None:
            status = "failed"
            span.record_exception(outcome)
            span.set_status(Status(StatusCode.ERROR, f"{type(outcome).__name__}: {outcome}"))
        else:
            status = status or "completed"
            if tel.payloads:
                span.set_attribute("agent_unit.run.output", _json(record.output))
        span.set_attribute("agent_unit.run.status", status)
        if status in ("interrupted", "sleeping", "yielded"):
            tel.runs_parked.add(1, {**agent, "agent_unit.park": status})
        elif status in ("completed", "failed"):  # a cancel is counted where it is decided (RunEngine.cancel)
            tel.finished(record.agent, status)
        for entry in record.usage:
            _usage_attributes(span, entry, total=True)
        token, self._token = self._token, None
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()


class WorkTelemetry:
    """One step's, model call's or tool call's span, current while its function runs."""

    def __init__(self, execution: ExecutionTelemetry, span: Any, kind: str) -> None:
        self.execution = execution
        self.span = span
        self.kind = kind
        self._started = time.monotonic()
        self._token: object | None = otel_context.attach(trace.set_span_in_context(span))

    def retry(self, attempt: int, error: BaseException, delay: float) -> None:
        self.span.add_event(
            "agent_unit.retry",
            {
                "agent_unit.attempt": attempt,
                "exception.type": type(error).__name__,
                "exception.message": str(error),
                "agent_unit.retry.delay": delay,
            },
        )

    def returned(self, text: str, usage: Mapping[str, Any] | None) -> None:
        """The work's result (its journal text; kept only with payloads on) and the tokens it spent."""
        if usage:
            _usage_attributes(self.span, usage)
            model = usage.get("model")
            if self.kind == "model" and model:
                self.span.update_name(f"chat {model}")
            tel = self.execution.telemetry
            labels = {"gen_ai.operation.name": "chat", "gen_ai.request.model": str(model or "")}
            for field, kind in (("inputTokens", "input"), ("outputTokens", "output")):
                if isinstance(usage.get(field), int):
                    tel.token_usage.record(usage[field], {**labels, "gen_ai.token.type": kind})
        if self.execution.telemetry.payloads:  # off by default: nothing more to do per step
            key = "gen_ai.tool.call.result" if self.kind == "tool" else "output.value"
            self.span.set_attribute(key, _payload(text))

    def end(self, error: BaseException | None, attempt: int = 1) -> None:
        if self._token is None:
            return
        token, self._token = self._token, None
        span = self.span
        outcome = "ok" if error is None else "cancelled" if isinstance(error, Cancelled) else "error"
        if attempt > 1:
            span.set_attribute("agent_unit.work.attempts", attempt)
        if outcome != "ok":
            span.set_attribute("agent_unit.work.outcome", outcome)
        if outcome == "error" and error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        execution = self.execution
        execution.telemetry.step_duration.record(time.monotonic() - self._started, execution.labels(self.kind, outcome))
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()


def _usage_attributes(span: Any, usage: Mapping[str, Any], *, total: bool = False) -> None:
    """Token usage (an AG-UI ``TokenUsage`` entry, or the record's snake_case one) as GenAI attributes
    on a model call's span; ``total``: the run's usage so far, one ``agent_unit.usage.{model}.*`` set
    per model on an execution's span (a run may use several)."""
    model = usage.get("model")
    counts = {
        "input_tokens": usage.get("inputTokens", usage.get("input_tokens")),
        "output_tokens": usage.get("outputTokens", usage.get("output_tokens")),
    }
    if total:
        for name, value in counts.items():
            if isinstance(value, int):
                span.set_attribute(f"agent_unit.usage.{model or 'model'}.{name}", value)
        return
    if model:
        span.set_attribute("gen_ai.request.model", str(model))
        span.set_attribute("gen_ai.response.model", str(model))
    if usage.get("provider"):
        span.set_attribute("gen_ai.provider.name", str(usage["provider"]))
    for name, value in counts.items():
        if isinstance(value, int):
            span.set_attribute(f"gen_ai.usage.{name}", value)
            # Phoenix reads OpenInference's names for token counts
            span.set_attribute("llm.token_count." + ("prompt" if name == "input_tokens" else "completion"), value)


class _Attached:
    """Attach a context for a block (``opentelemetry.context.attach``/``detach``)."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self._token: object | None = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._context)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]


# -- logs -------------------------------------------------------------------------------------

_installed = False


def install_log_context() -> None:
    """Every log record made from here on carries ``run_id`` (the run executing, else None) and the
    trace and span ids (``otelTraceID``/``otelSpanID``, the names OpenTelemetry's logging
    instrumentation uses), so ``%(run_id)s`` works in a format and an exporter ships them."""
    global _installed
    if _installed:
        return
    _installed = True
    from .run import current_run

    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        run = current_run()
        record.run_id = None if run is None else run.id
        context = trace.get_current_span().get_span_context()
        record.otelTraceID = format(context.trace_id, "032x") if context.is_valid else "0"
        record.otelSpanID = format(context.span_id, "016x") if context.is_valid else "0"
        return record

    logging.setLogRecordFactory(factory)


def _logger_provider() -> Any | None:
    try:
        from opentelemetry._logs import get_logger_provider
    except ImportError:
        return None
    return get_logger_provider()


# -- set up from the environment ----------------------------------------------------------------


def _exporters(variable: str, default: str) -> list[str]:
    names = [name.strip().lower() for name in os.environ.get(variable, default).split(",")]
    return [name for name in names if name and name != "none"]


def _otlp_default() -> str:
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return "otlp" if endpoint else "none"


def providers_from_env() -> tuple[Any, Any]:
    """The SDK's providers as the ``OTEL_*`` environment describes them, made global: traces batched
    to OTLP over HTTP (or the console), metrics every ``OTEL_METRIC_EXPORT_INTERVAL``, logs of
    level WARNING and up (the root logger's default) through OTLP when ``OTEL_LOGS_EXPORTER`` or an
    endpoint asks for them. ``service.name`` defaults to ``agent-unit``."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    resource = Resource.create({} if named else {"service.name": "agent-unit"})
    tracer_provider = TracerProvider(resource=resource)
    traces_default = "otlp" if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else _otlp_default()
    for name in _exporters("OTEL_TRACES_EXPORTER", traces_default):
        if name == "console":
            tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader

    readers: list[MetricReader] = []
    for name in _exporters("OTEL_METRICS_EXPORTER", _otlp_default()):
        if name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(meter_provider)

    if "otlp" in _exporters("OTEL_LOGS_EXPORTER", _otlp_default()):
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
        set_logger_provider(logger_provider)
        logging.getLogger().addHandler(LoggingHandler(logger_provider=logger_provider))
    return tracer_provider, meter_provider
