"""Before a build reports success, its output starts.

A fresh Python, isolated from this machine (``-I -S``: no site-packages, no environment
variables of Python's, no current folder on the path), imports the output's entry and
creates the app from the output alone, as the host loads it: the server's ``main``, the
unpacked ``function.zip``'s ``handler``, the Vercel function's entry. What is missing from a
build (a dependency it did not vendor, a driver, a broken module) fails here, at build time,
and not at the host's first request.

The output's wheels are for the host: the check runs only on the host's platform, with this
interpreter or another of the host's version (on the PATH or kept by pyenv), and says why it
was skipped otherwise.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from .presets import Start, local_python

__all__ = ["TIMEOUT", "check_starts", "interpreter", "this_platform"]

TIMEOUT = 120  # seconds for the app to be created
PLACEHOLDER = "agent-unit-build-check"
"""The value of a storage URL's ``${NAME}`` unset at build time: the app is created, the store not reached."""

# Runs in the fresh interpreter: argv = [folder, code, modules]. On failure it prints the frames of the
# user's own files (those under the function's app/, shown as in the project) and the error.
PROBE = """
import os, sys, traceback
folder = sys.argv[1]
sys.path.insert(0, folder)
try:
    exec(compile(sys.argv[2], "<start>", "exec"), {"__name__": "__agent_unit_start__", "FOLDER": folder})
    for module in filter(None, sys.argv[3].split(",")):
        __import__(module)
except BaseException as exc:
    app = os.path.join(folder, "app") + os.sep
    lines, seen, error = [], set(), exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        for frame in traceback.extract_tb(error.__traceback__):
            if frame.filename.startswith(app):
                where = f"{frame.filename[len(app):]}:{frame.lineno} in {frame.name}"
                lines.append(f"  {where}: {frame.line}" if frame.line else f"  {where}")
        error = error.__cause__ or error.__context__
    if not lines:  # nothing of the user's: the innermost frame outside agent-unit, if any
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "agent_unit" not in f.filename]
        frames = [f for f in frames if not f.filename.startswith(("<", folder + os.sep + "main.py"))]
        if frames:
            frame = frames[-1]
            lines.append(f"  {os.path.relpath(frame.filename, folder)}:{frame.lineno}: {frame.line}")
    ours = type(exc).__module__.startswith("agent_unit")
    lines.append(str(exc) if ours else f"{type(exc).__name__}: {exc}")
    print("\\n".join(dict.fromkeys(lines)), file=sys.stderr)
    sys.exit(1)
"""


def this_platform() -> str:
    """This machine as a host platform: ``linux-x86_64``, ``linux-aarch64``, ``darwin-aarch64``..."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{sys.platform}-{machine}"


def interpreter(version: str) -> str | None:
    """A Python of ``version`` (``"3.12"``): this one, else ``python3.12`` on the PATH, else one pyenv keeps."""
    if version == local_python():
        return sys.executable
    candidates = [shutil.which(f"python{version}")]
    if pyenv := shutil.which("pyenv"):  # installed, though not the selected version (its shim then fails)
        prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True).stdout.strip()
        candidates.append(str(Path(prefix) / "bin" / f"python{version}") if prefix else None)
    for candidate in filter(None, candidates):
        probe = [candidate, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        done = subprocess.run(probe, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == version:
            return candidate
    return None


def _environment(storage: str, scheme: str) -> dict[str, str]:
    """This environment (the check needs what the app reads at start), with unset storage variables filled.

    A variable that holds the whole URL (``storage = { provider = "postgres", url = "${DATABASE_URL}" }``)
    is filled with a URL of the scheme the build vendored for, so the app opens the kind of store it will.
    """
    environment = dict(os.environ)
    whole = {"memory": "memory://", "sqlite": f"sqlite:///{PLACEHOLDER}.db"}.get(scheme, f"{scheme}://{PLACEHOLDER}")
    for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", storage):
        environment.setdefault(name, whole if scheme and storage.startswith(f"${{{name}}}") else PLACEHOLDER)
    return environment


def check_starts(output: Path, start: Start, storage: str, modules: Sequence[str] = (), scheme: str = "") -> str | None:
    """Start the output in a fresh isolated Python; None when it started, else why it was not checked.

    ``modules`` must import there too: those the app imports only later (a store's driver at
    its first connection).

    Raises ``ValueError`` with the error and the user's own traceback lines when it does not start.
    """
    if start.platform is not None and start.platform != this_platform():
        return f"the host is {start.platform} and this machine is {this_platform()}"
    python = interpreter(start.python)
    if python is None:
        return f"the host runs Python {start.python} and this machine has no python{start.python}"
    with tempfile.TemporaryDirectory(prefix="agent-unit-start-") as scratch:
        folder = output / start.folder
        if start.archive:
            folder = Path(scratch) / "function"
            with zipfile.ZipFile(output / start.archive) as archive:
                archive.extractall(folder)
        try:
            done = subprocess.run(
                [python, "-I", "-S", "-B", "-c", PROBE, str(folder), start.code, ",".join(modules)],
                cwd=scratch,  # a store file (SQLite's default) lands here, not in the output
                env=_environment(storage, scheme),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            message = f"the built app did not start within {TIMEOUT} s: does a module block at import?"
            raise ValueError(message) from None
    if done.returncode != 0:
        error = done.stderr.rstrip()[-3000:].lstrip("\n") or f"it exited with status {done.returncode}"
        raise ValueError(f"the built app does not start (checked in a clean Python {start.python}):\n{error}")
    return None
