"""The conformance run can fail: its fixture gives the A2A TCK a task that stays working and
takes follow-up messages, and its verdict fails on any failure not listed as a TCK defect."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parents[2] / "bench" / "conformance"


def _fixture_app() -> Any:
    spec = importlib.util.spec_from_file_location(f"conformance_app_{uuid.uuid4().hex}", BENCH / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


async def _send(http: httpx.AsyncClient, message: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = (await http.post("/a2a", json=body)).json()
    assert "result" in reply, reply
    return dict(reply["result"]["task"])


def _message(text: str, **fields: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **fields}


async def test_the_fixtures_default_agent_stays_working_and_takes_follow_up_messages() -> None:
    app = _fixture_app()
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://localhost:8790") as http,
    ):
        task = await _send(http, _message("hello"))  # no skill: the default agent, as the TCK sends it
        assert task["status"]["state"] == "TASK_STATE_WORKING"  # a blocking send answers, and it still works
        for number in range(3):
            follow_up = await _send(http, _message(f"more {number}", taskId=task["id"]))
            assert follow_up["id"] == task["id"] and follow_up["status"]["state"] == "TASK_STATE_WORKING"
        body = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}
        listed = (await http.post("/a2a", json=body)).json()["result"]["tasks"]
        assert [item["status"]["state"] for item in listed] == ["TASK_STATE_WORKING"]


def _verdict(tmp_path: Path, outputs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    files = []
    for category, text in outputs.items():
        path = tmp_path / f"tck-{category}.txt"
        path.write_text(text)
        files.append(str(path))
    command = [sys.executable, str(BENCH / "verdict.py"), str(BENCH / "tck-known-defects.txt"), *files]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


KNOWN = (
    "FAILED tests/mandatory/jsonrpc/test_a2a_error_codes_enhanced.py"
    "::test_push_notification_not_supported_error_32003_enhanced - TypeError\n"
)


def test_the_verdict_passes_with_only_known_tck_defects_and_fails_on_any_other(tmp_path: Path) -> None:
    clean = _verdict(
        tmp_path,
        {
            "mandatory": KNOWN + "==== 1 failed, 40 passed, 2 skipped in 9.1s ====\n",
            "quality": "==== 5 passed in 1.0s ====\n",
            "features": "..s\n14 passed, 1 skipped, 1 xfailed in 2.36s\n",  # the TCK's own summary line
        },
    )
    assert clean.returncode == 0, clean.stdout
    assert "mandatory     1 failed, 40 passed, 2 skipped" in clean.stdout and "known TCK defect" in clean.stdout
    assert "A2A TCK: passed" in clean.stdout

    other = "FAILED tests/mandatory/protocol/test_tasks_list_method.py::TestBasicListing::test_list_all_tasks - x\n"
    failed = _verdict(tmp_path, {"mandatory": KNOWN + other + "==== 2 failed, 39 passed in 9.1s ====\n"})
    assert failed.returncode == 1
    assert (
        "FAILED tests/mandatory/protocol/test_tasks_list_method.py::TestBasicListing::test_list_all_tasks"
        in failed.stdout
    )

    broken = _verdict(tmp_path, {"capabilities": "Traceback (most recent call last):\nImportError: no\n"})
    assert broken.returncode == 1 and "no result" in broken.stdout  # a category that never ran fails too
