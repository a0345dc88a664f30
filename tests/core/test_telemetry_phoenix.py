"""A real OTLP receiver: Arize Phoenix, offline on loopback, receives a PydanticAI run's spans over
OTLP/HTTP (configured only by the standard ``OTEL_*`` environment) and its API returns them: one
trace across the two processes the run executed in, GenAI attributes on the model and tool calls,
and PydanticAI's own spans nested under the run's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..support.phoenix import ROOT, Phoenix, phoenix_bin

pytestmark = pytest.mark.slow  # starts Phoenix (its own environment): left out of `make check`


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    executable = phoenix_bin()
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("Phoenix is not installed: make .venv-phoenix/.installed")
        pytest.skip("Phoenix is not installed: make .venv-phoenix/.installed")
    with Phoenix(tmp_path_factory.mktemp("phoenix"), executable) as server:
        yield server


def run(phoenix: Phoenix, *args: str) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(
        PYTHONPATH=str(ROOT),
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.url,
        OTEL_SERVICE_NAME="refunds",
        OTEL_METRICS_EXPORTER="none",  # Phoenix takes traces only
        OTEL_LOGS_EXPORTER="none",
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.phoenix_run", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def spans_of(phoenix: Phoenix, run_id: str, roots: set[str]) -> list[dict[str, Any]]:
    """The spans of the run's trace, once Phoenix has stored the spans named ``roots`` and its count held for 1 s.

    Each process exports its spans as it exits and Phoenix stores them in the background, so a
    count alone is reached by the first process's spans before the second's are in: wait for
    both processes' root spans, then for the trace to stop growing.
    """
    deadline = time.monotonic() + 60
    seen = -1
    while True:
        spans = phoenix.spans()
        traces = {
            span["context"]["trace_id"] for span in spans if span["attributes"].get("agent_unit.run.id") == run_id
        }
        found = [span for span in spans if span["context"]["trace_id"] in traces]
        complete = roots <= {span["name"] for span in found}
        if (complete and len(found) == seen) or time.monotonic() > deadline:
            return found
        seen = len(found) if complete else -1
        time.sleep(1.0)


def test_phoenix_receives_a_pydantic_ai_run_as_one_trace_with_genai_attributes(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    run_id = run(phoenix, "start", str(db))
    run(phoenix, "resume", str(db), run_id)

    spans = spans_of(phoenix, run_id, {"run support", "resume support"})
    assert len({span["context"]["trace_id"] for span in spans}) == 1  # both processes, one trace
    by_id = {span["context"]["span_id"]: span for span in spans}
    (first,) = [span for span in spans if span["name"] == "run support"]
    (second,) = [span for span in spans if span["name"] == "resume support"]
    assert first["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert first["parent_id"] is None and second["parent_id"] == first["context"]["span_id"]

    ours = [span for span in spans if "agent_unit.idempotency_key" in span["attributes"]]  # journaled calls
    models = [span for span in ours if span["name"] == "chat gpt-5-mini"]
    assert len(models) == 3  # one per model call that ran: none replayed on resume
    for model in models:
        assert model["attributes"]["gen_ai.operation.name"] == "chat"
        assert model["attributes"]["gen_ai.request.model"] == "gpt-5-mini"
        assert model["attributes"]["gen_ai.usage.input_tokens"] > 0
    calls = [span for span in ours if span["name"].startswith("execute_tool ")]
    tools = {span["attributes"]["gen_ai.tool.name"]: span for span in calls}
    assert len(calls) == 2 and tools["refund"]["attributes"]["gen_ai.tool.call.id"] == "call_refund"

    def under(span: dict[str, Any], ancestor: dict[str, Any]) -> bool:
        while span["parent_id"] is not None and span["parent_id"] in by_id:
            span = by_id[span["parent_id"]]
            if span is ancestor:
                return True
        return False

    assert under(tools["lookup_order"], first) and under(tools["refund"], second)  # the refund ran after approval
    # PydanticAI's own spans (its agent run, its model requests) nest under the run's executions.
    theirs = [span for span in spans if span not in ours and span is not first and span is not second]
    assert theirs and all(under(span, first) or under(span, second) for span in theirs)
    assert any(span["name"] == "invoke_agent support" for span in theirs)  # PydanticAI's agent run
