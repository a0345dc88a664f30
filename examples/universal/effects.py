"""Every side effect and model call of the universal agents, appended to one file.

``EFFECTS_FILE`` names it (nothing is written without it). The matrix reads it after each run to
prove that no effect and no model call ran twice, across a restart of the host in between.
"""

from __future__ import annotations

import os
from pathlib import Path


def record(line: str) -> None:
    """Append ``line`` and make it durable before going on, so a count survives the process."""
    if path := os.environ.get("EFFECTS_FILE"):
        with Path(path).open("a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
