"""A failed step is reported as failed: in the run's error, and in the event stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ag_ui.core import StepFinishedEvent

from agent_unit import Run, RunRecord, RunStatus, define_agent
from agent_unit.stores.sqlite import SQLiteStore
from agent_unit.testing import create_test_unit


class PaymentDeclined(Exception):
    pass


def decline() -> None:
    raise PaymentDeclined("card declined")


async def test_the_run_error_names_the_step_that_failed() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("load", lambda: 1)
        await run.step("charge", decline)
        return "charged"

    record = await create_test_unit({"a": agent}).run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "PaymentDeclined" and record.error.step == "charge"


async def test_the_run_error_names_the_step_an_error_was_raised_from() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            await run.step("charge", decline)
        except PaymentDeclined as exc:
            raise RuntimeError("could not refund") from exc
        return "charged"

    record = await create_test_unit({"a": agent}).run("a")
    assert record.error is not None and record.error.type == "RuntimeError" and record.error.step == "charge"


async def test_an_error_of_the_agent_itself_names_no_step() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("load", lambda: 1)
        raise RuntimeError("bad input")

    record = await create_test_unit({"a": agent}).run("a")
    assert record.error is not None and record.error.step is None


async def test_the_run_error_names_a_replayed_step_after_a_restart(sqlite_path: Path) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            await run.step("charge", decline)
        except PaymentDeclined:
            if await run.interrupt("give-up?"):
                raise
        return "kept going"

    record = await resume_after_a_restart(agent, sqlite_path, True)
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "PaymentDeclined" and record.error.step == "charge"


async def resume_after_a_restart(agent: Any, sqlite_path: Path, answer: Any) -> RunRecord:
    """Run ``agent`` until it parks, close its unit, and answer it in a new unit over the same
    file: a step's error is then rebuilt from the journal."""
    first = create_test_unit({"a": agent}, SQLiteStore(sqlite_path))
    parked = await first.run("a")
    assert parked.status == RunStatus.interrupted
    await first.close()
    await first.store.close()
    second = create_test_unit({"a": agent}, SQLiteStore(sqlite_path))
    try:
        return await second.resume(parked.id, answer)
    finally:
        await second.close()


async def test_a_failed_step_is_reported_failed_in_the_event_stream() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("load", lambda: 1)
        try:
            await run.step("charge", decline)
        except PaymentDeclined:
            return "declined"
        return "charged"

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    steps = [e for e in await unit.events(record.id) if e["type"].startswith("STEP_")]
    assert [(e["type"], e["stepName"]) for e in steps] == [
        ("STEP_STARTED", "load"),
        ("STEP_FINISHED", "load"),
        ("STEP_STARTED", "charge"),
        ("STEP_FINISHED", "charge"),
    ]
    succeeded, failed = steps[1], steps[3]
    assert "metadata" not in succeeded
    error = {"type": "PaymentDeclined", "message": "card declined"}
    assert failed["metadata"] == {"agent-unit": {"status": "failed", "error": error}}
    event = StepFinishedEvent.model_validate({k: v for k, v in failed.items() if k != "seq"})  # still AG-UI
    assert event.metadata == failed["metadata"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this error")


def unprintable() -> None:
    raise Unprintable()


async def test_a_step_whose_error_cannot_be_printed_still_finishes_failed_and_fails_the_run() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("charge", unprintable)
        return "charged"

    unit = create_test_unit({"a": agent})
    record = await unit.run("a")
    assert record.status == RunStatus.failed and record.error is not None
    assert record.error.type == "Unprintable" and record.error.step == "charge"
    events = await unit.events(record.id)
    assert [e["type"] for e in events] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_ERROR"]
    failed = events[2]["metadata"]["agent-unit"]
    assert failed["status"] == "failed" and failed["error"]["type"] == "Unprintable"
    assert "could not be printed" in failed["error"]["message"] == events[3]["message"]


async def test_an_unprintable_step_error_the_agent_catches_replays_as_the_same_type(sqlite_path: Path) -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        try:
            await run.step("charge", unprintable)
        except Unprintable:
            answer = await run.interrupt("retry?", None)
            return f"declined, {answer}"
        return "charged"

    done = await resume_after_a_restart(agent, sqlite_path, "no")
    assert done.status == RunStatus.completed and done.output == "declined, no"


async def test_a_failed_run_keeps_the_frames_of_the_users_own_code_and_none_of_agent_units() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        await run.step("charge", decline)
        return "charged"

    record = await create_test_unit({"a": agent}).run("a")
    assert record.error is not None
    frames = [(Path(frame.file).name, frame.function, frame.code) for frame in record.error.frames]
    assert frames == [
        ("test_step_failures.py", "agent", 'await run.step("charge", decline)'),
        ("test_step_failures.py", "decline", 'raise PaymentDeclined("card declined")'),
    ]
    assert all(frame.line for frame in record.error.frames)
    assert record.public()["error"]["frames"][0]["function"] == "agent"  # the API shows them


async def test_a_run_record_saved_before_frames_were_kept_still_loads() -> None:
    old = {"type": "ValueError", "message": "bad", "step": None}
    assert (
        RunRecord.model_validate(
            {
                "id": "r",
                "agent": "a",
                "thread_id": "t",
                "status": "failed",
                "error": old,
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
            }
        ).error.frames
        == []
    )  # type: ignore[union-attr]
