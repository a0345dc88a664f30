"""``docker``: the server preset plus a Dockerfile, for Cloud Run, Fly, Render or Kubernetes.

The image is ``python:<version>-slim`` for ``--arch`` (default: this machine's) and
``--python`` (default: this interpreter's), and the vendored wheels are manylinux wheels for
exactly that architecture and Python, so the image runs what was vendored.
"""

from __future__ import annotations

import platform
from typing import Any

from ..pip import linux_wheels as wheels
from . import BuildOptions, Preset, Start, local_python
from .server import SERVER_REQUIREMENTS, START

RUNTIMES = ("3.11", "3.12", "3.13", "3.14")  # the python:<version>-slim images agent-unit runs on
ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}
DOCKER_PLATFORMS = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}


def _python(options: BuildOptions) -> str:
    return options.python or local_python()


def _machine(options: BuildOptions) -> str:
    """The image's architecture as pip and ``uname -m`` name it: x86_64 or aarch64."""
    return ARCHITECTURES.get((options.arch or platform.machine()).lower(), "x86_64")


def check(config: Any, options: BuildOptions) -> None:
    if _python(options) not in RUNTIMES:
        raise ValueError(f"--python {options.python}: the docker preset builds for Python {', '.join(RUNTIMES)}")
    if options.arch is not None and options.arch.lower() not in ARCHITECTURES:
        raise ValueError(f"--arch {options.arch}: use x86_64 (amd64) or arm64 (aarch64)")


def linux_wheels(options: BuildOptions) -> list[str]:
    """The image is Linux: manylinux wheels for its architecture and Python."""
    return wheels(_machine(options), _python(options))


def context(config: Any, options: BuildOptions) -> dict[str, Any]:
    return {
        "python_version": _python(options),
        "docker_platform": DOCKER_PLATFORMS[_machine(options)],
        "healthz": config.base_path.rstrip("/") + "/healthz",
    }


def start(options: BuildOptions) -> Start:
    return Start(code=START, python=_python(options), platform=f"linux-{_machine(options)}")


preset = Preset(
    name="docker",
    description="The server in a container image: the server output plus Dockerfile and .dockerignore.",
    output=".output/docker",
    runs_on="Cloud Run, Fly, Render, Kubernetes (--arch x86_64 or arm64, --python 3.11 to 3.14)",
    storage="any; a shared store (Redis, Postgres) when you run more than one container",
    templates=("server", "docker"),
    run="docker build -t {name} {output} && docker run -p 3000:3000 {name}",
    pip_platform=linux_wheels,
    check=check,
    context=context,
    start=start,
    requirements=SERVER_REQUIREMENTS,
    workers=True,
    runs_tasks="the container's in-process scheduler (each tick claimed once in the store)",
    notes=("The default SQLite store lives inside the container: mount a volume at /app/.agent-unit to keep runs.",),
)
