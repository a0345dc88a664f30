"""Every side effect and model call of the universal agents, appended to one file.

``EFFECTS_FILE`` names it (nothing is written without it). The matrix reads it after each run to
prove that no effect and no model call ran twice, across a restart of the host in between.
In a Worker (Pyodide) no file outlives the isolate and the host's environment does not reach
``os.environ``: each line is printed to stderr after :data:`PREFIX` instead (``wrangler dev``
shows a Python Worker's stderr, not its stdout), and the matrix reads the Worker's log into the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PREFIX = "agent-unit-effect: "


def record(line: str) -> None:
    """Append ``line`` and make it durable before going on, so a count survives the process."""
    if path := os.environ.get("EFFECTS_FILE"):
        with Path(path).open("a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
    elif sys.platform == "emscripten":  # a Worker: its log is the file
        print(PREFIX + line, file=sys.stderr, flush=True)
