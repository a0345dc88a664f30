"""A Docker image's files without a Docker engine: the Dockerfile read, its COPY and compile steps done.

No Docker engine runs here, so the tests (and ``bench/docker_start.py``) build an image's ``/app`` in
a folder from what the ``docker`` preset's Dockerfile says, and run its command there.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["dockerfile", "image_folder"]


def dockerfile(text: str) -> dict[str, Any]:
    """What the image's run needs from a Dockerfile: its ENV, WORKDIR, COPY sources and CMD."""
    found: dict[str, Any] = {"env": {}, "copy": [], "run": [], "cmd": None, "workdir": None}
    for line in text.splitlines():
        instruction, _, rest = line.partition(" ")
        if instruction == "ENV":
            found["env"] |= dict(item.split("=", 1) for item in rest.split())
        elif instruction == "COPY":
            found["copy"].append(tuple(rest.split()))
        elif instruction == "RUN":
            found["run"].append(rest)
        elif instruction == "WORKDIR":
            found["workdir"] = rest
        elif instruction == "CMD":
            found["cmd"] = json.loads(rest)
    return found


def image_folder(output: Path, image: dict[str, Any], root: Path, *, bytecode: bool = True) -> Path:
    """The image's files without a Docker engine: what the Dockerfile copies, put under ``root``, and
    its bytecode steps (``RUN python -m compileall``) run there by this Python, as the image's own
    (of the same version) runs them; ``bytecode=False`` leaves them out. Its workdir."""
    for source, target in image["copy"]:
        copied = root / target.strip("/")
        if (output / source).is_dir():
            shutil.copytree(output / source, copied)
        else:
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(output / source, copied)
    for command in image["run"] if bytecode else ():
        if command.startswith("python -m compileall"):
            tolerant = command.endswith(" || true")
            words = shlex.split(command.removesuffix(" || true"))
            paths = [str(root / word.strip("/")) if word.startswith("/app") else word for word in words[1:]]
            subprocess.run([sys.executable, *paths], check=not tolerant, capture_output=True)
    return root / str(image["workdir"]).strip("/")
