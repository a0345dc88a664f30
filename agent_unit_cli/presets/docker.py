"""``docker``: the server preset plus a Dockerfile, for Cloud Run, Fly, Render or Kubernetes."""

import platform
import sys

from . import BuildOptions, Preset


def linux_wheels(options: BuildOptions) -> list[str]:
    """The image is Linux: manylinux wheels for this machine's architecture and Python."""
    machine = "aarch64" if platform.machine().lower() in ("arm64", "aarch64") else "x86_64"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return ["--platform", f"manylinux2014_{machine}", "--only-binary=:all:", "--python-version", version]


preset = Preset(
    name="docker",
    description="The server in a container image: the server output plus Dockerfile and .dockerignore.",
    output=".output/docker",
    runs_on="Cloud Run, Fly, Render, Kubernetes",
    storage="any; a shared store (Redis, Postgres) when you run more than one container",
    templates=("server", "docker"),
    run="docker build -t {name} {output} && docker run -p 3000:3000 {name}",
    pip_platform=linux_wheels,
    notes=("The default SQLite store lives inside the container: mount a volume at /app/.agent-unit to keep runs.",),
)
