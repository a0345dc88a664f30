"""Spans written to a file as each one ends, so spans of a process that is killed survive it; or
kept in memory (:class:`Spans`) with the metrics, for a test in one process.

Importing this module with ``SPANS_FILE`` set configures agent-unit's telemetry to write there
(a JSON line per span: name, ids, parent, links, attributes, events); :func:`read_spans` reads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_unit import telemetry


class FileExporter(SpanExporter):
    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as f:
            for span in spans:
                f.write(json.dumps(as_dict(span)) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    assert span.context is not None
    return {
        "name": span.name,
        "trace_id": format(span.context.trace_id, "032x"),
        "span_id": format(span.context.span_id, "016x"),
        "parent_id": None if span.parent is None else format(span.parent.span_id, "016x"),
        "links": [format(link.context.span_id, "016x") for link in span.links],
        "attributes": dict(span.attributes or {}),
        "events": [event.name for event in span.events],
        "pid": os.getpid(),
    }


def write_spans_to(path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(path)))
    telemetry.configure(provider)


class Spans:
    """agent-unit's telemetry configured to keep spans and metrics in memory (``telemetry.reset()`` after)."""

    def __init__(self, *, payloads: bool | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metrics = InMemoryMetricReader()
        telemetry.configure(provider, MeterProvider(metric_readers=[self.metrics]), payloads=payloads)

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def executions(self) -> list[ReadableSpan]:
        found = [span for span in self.all() if span.attributes and "agent_unit.execution" in span.attributes]
        return sorted(found, key=lambda span: span.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name.startswith(prefix)]

    def points(self, metric: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == metric
            for point in found.data.data_points
        ]


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


if os.environ.get("SPANS_FILE"):
    write_spans_to(Path(os.environ["SPANS_FILE"]))
