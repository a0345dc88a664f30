"""An unpacked AWS Lambda function run here as Lambda runs it: in containers, each a ``python -I -S``.

A container is one process of this Python with nothing else on its path that imports the
function's ``handler`` once (its cold start) and then takes invocations one after another,
calling ``handler.handler(event, None)`` for each: events go to it as JSON lines on its stdin,
its answers come back as JSON lines. That is how Lambda runs a function: a warm container takes
invocation after invocation, and a new one (a new process: a cold start) comes only when every
container is busy (scale-out) or the old ones are gone (:meth:`Function.restart`).

Why warm: the cold start imports the function and every framework of its agents (measured: 0.9 s
of CPU for the universal example's plain and PydanticAI agents, ~3.5 s for a Google ADK server);
a new process for every request made the Lambda tests CPU-bound.
A test whose point is a cold container (a run parked by one container and resumed by another)
says so with ``Function(cold=True)``, :meth:`Function.restart` or a :class:`Container` of its own.

What the function prints (stdout or stderr) is its log, as on Lambda: answers have their own
channel, and a container that fails (its import, an invocation, a timeout) is ended and raises
:class:`ContainerFailed` with the tail of that log. Every process is killed at ``close()``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["Container", "ContainerFailed", "Function"]

# argv: the unpacked function's folder, code run before ``import handler`` (in ``space``), and
# code run after each invocation with its answer as ``response`` (in ``space``, to add to it).
# The first line answered is ``"ready"``: the cold start is done. An exception ends the process
# (its traceback in the log): the test fails on it, so no later invocation is owed an answer.
RUNNER = """
import json, os, sys
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what the function prints goes to its log, not among the answers,
sys.stdout.reconfigure(line_buffering=True)  # and in the order it printed it
sys.path.insert(0, sys.argv[1])
space = {}
exec(sys.argv[2], space)
import handler
answers.write('"ready"\\n')
answers.flush()
for line in sys.stdin:
    space["response"] = handler.handler(json.loads(line), None)
    exec(sys.argv[3], space)
    answers.write(json.dumps(space["response"]) + "\\n")
    answers.flush()
"""

LOG_TAIL = 4000  # characters of a failed container's log in its error


class ContainerFailed(RuntimeError):
    """A container's cold start or invocation failed or timed out; the message ends with its log."""


class Container:
    """One Lambda container: a ``python -I -S`` process that imported ``handler`` and takes events in turn.

    ``before`` runs before the import (e.g. an app's OpenTelemetry setup), ``after`` after each
    invocation with its answer as ``response``. ``timeout``: seconds for the cold start, and for
    each invocation. The constructor returns once the cold start is done.
    """

    def __init__(
        self, folder: Path, env: dict[str, str], *, before: str = "", after: str = "", timeout: float = 120
    ) -> None:
        self.timeout = timeout
        # The log is a file, not a pipe: a pipe that nobody reads would block a function that logs
        # much. Unnamed, so nothing is left behind; read with pread, so its offset stays the writer's.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close(), with the process
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", RUNNER, str(folder), before, after],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
        )
        try:
            self._answer("the cold start (import handler)")
        except BaseException:
            self.close()
            raise

    def invoke(self, event: Any) -> Any:
        """``handler.handler(event, None)`` in this container: its answer."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(event).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it ended: _answer reads the end and says why
        return self._answer(f"the invocation with {json.dumps(event)[:300]}")

    def _answer(self, what: str) -> Any:
        stdout = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], self.timeout)
        line = stdout.readline() if ready else b""  # an answer is one write of one line
        if line:
            return json.loads(line)
        if ready:
            code = self.process.wait(timeout=30)
            why = f"{what}: the container ended (exit status {code}) without an answer"
        else:
            why = f"{what}: no answer in {self.timeout:.0f} s"
        self.kill()
        raise ContainerFailed(f"{why}. Its log ends:\n{self.log()[-LOG_TAIL:]}")

    def log(self) -> str:
        """What the function printed so far (stdout and stderr)."""
        size = os.fstat(self._log.fileno()).st_size
        return os.pread(self._log.fileno(), size, 0).decode(errors="replace") if size else ""

    def kill(self) -> None:
        """End the process now, as Lambda ends a container (no shutdown runs)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)

    def close(self) -> None:
        self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        self._log.close()

    def __enter__(self) -> Container:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class Function:
    """The unpacked function at ``folder`` with ``env``: each invocation goes to an idle warm
    container, or to a new one (a cold start) if every container is busy, as Lambda scales out.

    ``cold=True``: every invocation in a new container, ended after it. ``started`` counts the
    containers (cold starts) so far. ``before``, ``after`` and ``timeout``: as :class:`Container`'s.
    """

    def __init__(
        self,
        folder: Path,
        env: dict[str, str],
        *,
        cold: bool = False,
        before: str = "",
        after: str = "",
        timeout: float = 120,
    ) -> None:
        self.folder, self.env, self.cold = folder, env, cold
        self.before, self.after, self.timeout = before, after, timeout
        self.started = 0
        self._idle: list[Container] = []
        self._all: set[Container] = set()
        self._lock = threading.Lock()

    def invoke(self, event: Any) -> Any:
        """``handler.handler(event, None)`` in a container of this function: its answer."""
        with self._lock:
            container = None if self.cold or not self._idle else self._idle.pop()
            self.started += container is None
        if container is None:
            container = Container(self.folder, self.env, before=self.before, after=self.after, timeout=self.timeout)
            with self._lock:
                self._all.add(container)
        try:
            answer = container.invoke(event)
        except BaseException:
            self._end(container)
            raise
        with self._lock:
            if not self.cold and container in self._all:  # not ended by a restart meanwhile
                self._idle.append(container)
                return answer
        self._end(container)
        return answer

    def restart(self) -> None:
        """End every container (one mid-invocation too): the next invocation is a cold start."""
        with self._lock:
            ending, idle, self._all, self._idle = self._all, self._idle, set(), []
        for container in ending:
            if container in idle:
                container.close()
            else:  # its invocation gets the end of its answers, and it is closed there
                container.kill()

    close = restart

    def _end(self, container: Container) -> None:
        with self._lock:
            self._all.discard(container)
        container.close()

    def __enter__(self) -> Function:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
