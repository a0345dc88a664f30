"""Vendoring with pip: the dependencies a build carries, for the host's Python and platform.

A host that is not this machine (Lambda, Vercel, a container) gets wheels chosen for its
Python, architecture and ABI whatever Python and pip run the build. pip resolves those with
``pip download``; ``pip install --target`` then only unpacks them. Resolving with ``install``
itself is not enough: the pip of a fresh Python 3.11 virtual environment (23.x) checks each
package's ``Requires-Python`` against the interpreter running pip, so a package that needs
3.12 (``vercel-runtime``) is refused even with ``--python-version 3.12``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from agent_unit.errors import PipError

__all__ = ["install", "linux_wheels"]

QUIET = ["--quiet", "--disable-pip-version-check"]


def linux_wheels(machine: str, python: str) -> list[str]:
    """pip's flags for manylinux wheels of CPython ``python`` (``"3.12"``) on ``machine`` (``x86_64``, ``aarch64``)."""
    return [
        "--platform",
        f"manylinux2014_{machine}",
        "--implementation",
        "cp",
        "--python-version",
        python,
        "--abi",
        f"cp{python.replace('.', '')}",
        "--only-binary=:all:",
    ]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise PipError(f"pip could not install {what}:\n{done.stderr.strip()[-2000:]}")


def install(
    requirements: list[str],
    target: Path,
    *,
    platform: list[str] | None = None,
    deps: bool = True,
    alone: list[str] | None = None,
    python: str = sys.executable,
    what: str = "the dependencies",
) -> None:
    """Install ``requirements`` into ``target``: for this interpreter, or for ``platform`` (:func:`linux_wheels`).

    ``alone`` are installed without their dependencies (``name @ file:///folder`` too: built
    into a wheel, pure Python as an adapter package is).
    """
    unpack = [python, "-m", "pip", "install", *QUIET, "--no-compile", "--target", str(target)]
    alone = alone or []
    if platform is None:  # this machine: pip resolves and installs in one go
        _run([*unpack, *([] if deps else ["--no-deps"]), *requirements], what)
        if alone:
            _run([*unpack, "--no-deps", *alone], what)
        return
    with tempfile.TemporaryDirectory(prefix="agent-unit-wheels-") as folder:
        download = [python, "-m", "pip", "download", *QUIET, "--dest", folder, *platform]
        _run([*download, *([] if deps else ["--no-deps"]), *requirements], what)
        folders = [requirement for requirement in alone if requirement.partition(" @ ")[2].startswith("file:")]
        if folders:  # pip download skips a folder: its wheel, built here
            build = [python, "-m", "pip", "wheel", *QUIET, "--no-deps", "--wheel-dir", folder]
            _run([*build, *folders], what)
        if others := [requirement for requirement in alone if requirement not in folders]:
            _run([*download, "--no-deps", *others], what)
        wheels = sorted(str(path) for path in Path(folder).glob("*.whl"))
        # resolved above for the host: unpack exactly those, with no second resolution
        _run([*unpack, "--no-deps", "--no-index", "--ignore-requires-python", *platform, *wheels], what)
