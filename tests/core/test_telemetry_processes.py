"""One trace per run across processes: a run parks in one process and resumes in another, or its
process is killed with SIGKILL inside a step and another recovers it; every span lands in one
trace with the expected parents, and a replayed step makes no span.

Each process writes each span to a file as it ends (tests/support/otel_spans.py), so the spans
of a killed process are there to read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_unit import RunStatus, telemetry

from ..support.crash import ROOT, recover, start_and_kill
from ..support.otel_spans import read_spans, write_spans_to
from ..support.process_agents import AGENTS

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
INCOMING = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def child(*args: str, spans: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPANS_FILE": str(spans)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.otel_process", *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


def test_a_run_parked_in_one_process_and_resumed_in_another_is_one_trace_under_the_starting_request(
    tmp_path: Path,
) -> None:
    db, spans_file = tmp_path / "runs.db", tmp_path / "spans.jsonl"
    run_id = child("start", str(db), INCOMING, spans=spans_file)
    child("resume", str(db), run_id, spans=spans_file)

    spans = read_spans(spans_file)
    assert {span["trace_id"] for span in spans} == {TRACE_ID}
    named = by_name(spans)
    (first,), (second,) = named["run refund"], named["resume refund"]
    assert first["pid"] != second["pid"]  # two processes
    assert first["parent_id"] == INCOMING.split("-")[2]  # the request's traceparent
    assert second["parent_id"] == first["span_id"]
    assert (first["attributes"]["agent_unit.execution"], second["attributes"]["agent_unit.execution"]) == (
        "start",
        "resume",
    )
    assert first["events"] == ["agent_unit.interrupt"]
    (load,) = named["step load"]  # replayed by the resume: one span only, from the first process
    (charge,) = named["step charge"]
    assert load["parent_id"] == first["span_id"] and load["pid"] == first["pid"]
    assert charge["parent_id"] == second["span_id"]
    assert {first["attributes"]["agent_unit.run.id"], second["attributes"]["agent_unit.run.id"]} == {run_id}


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
async def test_a_run_recovered_after_sigkill_in_another_process_continues_its_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, effects, marker, spans_file = (
        tmp_path / "runs.db",
        tmp_path / "effects",
        tmp_path / "marker",
        tmp_path / "spans",
    )
    env = {
        "EFFECTS_FILE": str(effects),
        "HANG_IN_STEP_TWO": "1",
        "SPANS_FILE": str(spans_file),
        "CHILD_SETUP": "tests.support.otel_spans",
    }
    run_id = await start_and_kill(db, "tests.support.process_agents:AGENTS", "crashable", None, marker=marker, env=env)
    monkeypatch.setenv("EFFECTS_FILE", str(effects))
    write_spans_to(spans_file)  # this process recovers it
    try:
        done = await recover(AGENTS, db, run_id)
    finally:
        telemetry.reset()
    assert done.status == RunStatus.completed

    spans = read_spans(spans_file)
    named = by_name(spans)
    # The killed process ended only step one's span: its execution's span and step two's never ended.
    assert "run crashable" not in named
    (recovery,) = named["recover crashable"]
    (one,) = named["step one"]
    (two,) = named["step two"]  # the run of step two that finished, in the recovering process
    assert {span["trace_id"] for span in spans} == {one["trace_id"]}
    assert recovery["attributes"]["agent_unit.execution"] == "recover"
    assert recovery["attributes"]["agent_unit.run.attempt"] == 2
    assert recovery["events"] == ["agent_unit.recovered"]
    assert recovery["parent_id"] == one["parent_id"]  # both children of the run's first execution span
    assert two["parent_id"] == recovery["span_id"]
