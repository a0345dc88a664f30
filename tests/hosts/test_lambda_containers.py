"""The Lambda containers the host tests run functions in (``tests/support/lambda_containers``).

A warm container imports the handler once and takes invocations in turn; a restart, or every
container busy, starts a new process; a failure (the import, an invocation, a timeout) ends the
container with an error that shows what it logged; closing kills every process. A tiny handler
stands for the function: each container here costs ~20 ms of CPU.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ..support.lambda_containers import Container, ContainerFailed, Function

HANDLER = """import os, sys, time

print("cold start")  # to stdout: the function's log, never among the answers
invoked = 0


def handler(event, context):
    global invoked
    invoked += 1
    print("invoked with", event)
    if event == "fail":
        print("about to fail", file=sys.stderr)
        raise ValueError("the order was lost")
    if isinstance(event, dict) and "sleep" in event:
        time.sleep(event["sleep"])
    return {"pid": os.getpid(), "invoked": invoked, "env": os.environ.get("WHO")}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "function").mkdir()
    (tmp_path / "function" / "handler.py").write_text(HANDLER)
    return tmp_path / "function"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_warm_container_takes_invocations_in_turn_and_a_restart_is_a_cold_start(folder: Path) -> None:
    with Function(folder, {"WHO": "ann"}) as function:
        first, second = function.invoke(1), function.invoke(2)
        assert first["pid"] == second["pid"] and [first["invoked"], second["invoked"]] == [1, 2]
        assert first["env"] == "ann" and function.started == 1
        function.restart()
        assert not alive(first["pid"])  # the old container is gone, not left idle
        third = function.invoke(3)
        assert third["pid"] != first["pid"] and third["invoked"] == 1 and function.started == 2
    assert not alive(third["pid"])


def test_cold_means_a_new_container_for_every_invocation(folder: Path) -> None:
    with Function(folder, {}, cold=True) as function:
        answers = [function.invoke(n) for n in range(2)]
    assert [answer["invoked"] for answer in answers] == [1, 1] and function.started == 2
    assert not any(alive(answer["pid"]) for answer in answers)


def test_an_invocation_while_every_container_is_busy_starts_another(folder: Path) -> None:
    with Function(folder, {}) as function:
        slow: list[dict[str, int]] = []
        busy = threading.Thread(target=lambda: slow.append(function.invoke({"sleep": 1.5})))
        busy.start()
        while function.started == 0:  # the slow one has its container
            threading.Event().wait(0.01)
        meanwhile = function.invoke("meanwhile")
        busy.join()
        assert meanwhile["pid"] != slow[0]["pid"] and function.started == 2
        after = function.invoke("after")  # both are idle now: a warm one takes it
        assert after["pid"] in (meanwhile["pid"], slow[0]["pid"]) and function.started == 2


def test_a_failing_handler_ends_its_container_with_an_error_that_shows_its_log(folder: Path) -> None:
    with Function(folder, {}) as function:
        before = function.invoke("ok")
        with pytest.raises(ContainerFailed) as failed:
            function.invoke("fail")
        message = str(failed.value)
        assert message.startswith('the invocation with "fail": the container ended (exit status 1) without an answer')
        assert "cold start\ninvoked with ok\ninvoked with fail\nabout to fail\n" in message  # in the order printed
        assert "ValueError: the order was lost" in message
        assert not alive(before["pid"])
        assert function.invoke("again")["pid"] != before["pid"]  # the next invocation is a cold start


def test_a_handler_that_cannot_be_imported_fails_its_cold_start_with_the_import_error(folder: Path) -> None:
    (folder / "handler.py").write_text("import missing_vendor_package\n")
    with pytest.raises(ContainerFailed) as failed, Function(folder, {}) as function:
        function.invoke("hi")
    assert str(failed.value).startswith("the cold start (import handler): the container ended (exit status 1)")
    assert "ModuleNotFoundError: No module named 'missing_vendor_package'" in str(failed.value)


def test_an_invocation_that_outlasts_its_timeout_is_killed_with_its_log(folder: Path) -> None:
    container = Container(folder, {}, timeout=1)
    try:
        with pytest.raises(ContainerFailed, match=r"no answer in 1 s\. Its log ends:\ncold start\n"):
            container.invoke({"sleep": 30})
        assert container.process.poll() is not None
    finally:
        container.close()


def test_closing_kills_a_container_mid_invocation(folder: Path) -> None:
    function = Function(folder, {})
    pid = function.invoke("warm")["pid"]
    errors: list[BaseException] = []

    def invoke() -> None:
        try:
            function.invoke({"sleep": 30})
        except ContainerFailed as error:
            errors.append(error)

    busy = threading.Thread(target=invoke)
    busy.start()
    threading.Event().wait(0.3)
    function.close()
    busy.join(timeout=10)
    assert not busy.is_alive() and not alive(pid)
    assert "the container ended (exit status -9)" in str(errors[0])
