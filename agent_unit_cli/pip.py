"""Vendoring with pip: the dependencies a build carries, for the host's Python and platform.

A host that is not this machine (Lambda, Vercel, a container) gets wheels chosen for its
Python, architecture and ABI whatever Python and pip run the build. pip resolves those with
``pip download``; ``pip install --target`` then only unpacks them. Resolving with ``install``
itself is not enough: the pip of a fresh Python 3.11 virtual environment (23.x) checks each
package's ``Requires-Python`` against the interpreter running pip, so a package that needs
3.12 (``vercel-runtime``) is refused even with ``--python-version 3.12``.

A project that uses uv (a ``uv.lock`` at its root), or a build run with
``AGENT_UNIT_INSTALLER=uv``, vendors with uv instead: the same requirements and the same
platform, resolved by ``uv pip install --target``, which caches what it downloads and resolves
in a fraction of pip's time. ``AGENT_UNIT_INSTALLER=pip`` keeps pip whatever the project uses.
uv reads its own index settings (``UV_INDEX_URL``...), not ``pip.conf``.

An environment marker decides for the host the wheels are for: ``uvloop; sys_platform !=
"win32"`` is vendored into a Linux build made on Windows, ``six; platform_machine == "aarch64"``
into an arm64 build made on x86_64. pip decides every marker for the machine that runs it,
``--platform`` or not, so the requirements a build names reach pip decided already
(:func:`for_host`). The markers of their dependencies stay pip's to decide, for this machine;
uv decides those for the host too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement

from agent_unit.errors import PipError

__all__ = ["Installer", "for_host", "install", "installer", "linux_wheels"]

Installer = Literal["pip", "uv"]

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


def for_host(requirements: list[str], platform: list[str]) -> list[str]:
    """``requirements`` with each environment marker decided for the Linux host of ``platform``
    (:func:`linux_wheels`): a requirement whose marker holds there loses the marker, one whose
    marker does not is left out. A line that is not a requirement (a path, an option) stays as it is.
    """
    flags = dict(zip(platform[::2], platform[1::2], strict=False))
    machine = flags.get("--platform", "").partition("_")[2]  # manylinux2014_x86_64: x86_64
    version = flags.get("--python-version", "")
    # evaluate() lays these over this machine's environment (what the flags do not say: platform_release...)
    host = {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux"}
    host |= {"platform_python_implementation": "CPython", "implementation_name": "cpython"}
    if machine:
        host["platform_machine"] = machine
    if version and version != f"{sys.version_info.major}.{sys.version_info.minor}":
        release = f"{version}.0"  # which release of that Python the host runs is not known: its first
        host |= {"python_version": version, "python_full_version": release, "implementation_version": release}
    decided = []
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            decided.append(line)
            continue
        if requirement.marker is None:
            decided.append(line)
        elif requirement.marker.evaluate(host):
            requirement.marker = None
            decided.append(str(requirement))
    return decided


def uv_binary() -> str | None:
    """uv's executable: beside this Python (a virtual environment's ``bin/``), else on ``PATH``."""
    beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
    return str(beside) if beside.is_file() else shutil.which("uv")


def installer(root: Path | None = None) -> Installer:
    """What vendors: ``AGENT_UNIT_INSTALLER`` (``pip`` or ``uv``) if set, else uv for a project
    with a ``uv.lock`` when uv is installed, else pip."""
    chosen = os.environ.get("AGENT_UNIT_INSTALLER", "").strip().lower()
    if chosen == "uv":
        if uv_binary() is None:
            raise PipError("AGENT_UNIT_INSTALLER=uv, but uv is not installed: pip install uv, or unset it to use pip")
        return "uv"
    if chosen not in ("", "pip"):
        raise PipError(f"AGENT_UNIT_INSTALLER={chosen}: use pip or uv")
    if not chosen and root is not None and (root / "uv.lock").is_file() and uv_binary() is not None:
        return "uv"
    return "pip"


def _uv_platform(platform: list[str]) -> list[str] | None:
    """pip's platform flags (:func:`linux_wheels`) as uv's, or None when uv cannot say the same."""
    flags = dict(zip(platform[::2], platform[1::2], strict=False))
    tag = re.fullmatch(r"manylinux2014_(x86_64|aarch64)", flags.get("--platform", ""))
    version = flags.get("--python-version")
    if tag is None or version is None or "--only-binary=:all:" not in platform:
        return None
    return ["--python-platform", f"{tag[1]}-manylinux2014", "--python-version", version]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tool = "uv" if command[0] != sys.executable and Path(command[0]).name.startswith("uv") else "pip"
        raise PipError(f"{tool} could not install {what}:\n{done.stderr.strip()[-2000:]}")


def install(
    requirements: list[str],
    target: Path,
    *,
    platform: list[str] | None = None,
    deps: bool = True,
    alone: list[str] | None = None,
    python: str = sys.executable,
    what: str = "the dependencies",
    using: Installer = "pip",
) -> None:
    """Install ``requirements`` into ``target``: for this interpreter, or for ``platform`` (:func:`linux_wheels`).

    ``alone`` are installed without their dependencies (``name @ file:///folder`` too: built
    into a wheel, pure Python as an adapter package is). ``using``: see :func:`installer`.
    """
    if platform is not None:  # markers decided for the host, not for this machine (see the module's docstring)
        requirements, alone = for_host(requirements, platform), for_host(alone or [], platform)
    if using == "uv":
        uv = uv_binary()
        flags = ["--python", python] if platform is None else _uv_platform(platform)
        if uv is not None and flags is not None:
            _install_uv(uv, requirements, target, flags, deps=deps, alone=alone or [], what=what)
            return
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


def _install_uv(
    uv: str, requirements: list[str], target: Path, flags: list[str], *, deps: bool, alone: list[str], what: str
) -> None:
    """:func:`install` with ``uv pip install --target``: one resolution for the host, from uv's cache."""
    install = [uv, "pip", "install", "--quiet", "--target", str(target), *flags]
    binary = [] if "--python" in flags else ["--only-binary", ":all:"]  # a host not this one: wheels only
    if requirements:
        _run([*install, *binary, *([] if deps else ["--no-deps"]), *requirements], what)
    folders = [requirement for requirement in alone if requirement.partition(" @ ")[2].startswith("file:")]
    if others := [requirement for requirement in alone if requirement not in folders]:
        _run([*install, *binary, "--no-deps", *others], what)
    if folders:  # a folder is built into a wheel here (pure Python, as an adapter package is)
        _run([*install, "--no-deps", *folders], what)
