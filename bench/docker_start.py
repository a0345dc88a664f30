"""The docker preset's server: a container's start to its first answer, with the image's bytecode and without.

    .venv/bin/python bench/docker_start.py [--samples 5]

No Docker engine runs here, so the image is simulated as the tests simulate it: ``examples/refund``
built with ``--preset docker``, its ``vendor/``, ``app/`` and ``main.py`` copied into a fresh folder
for every sample (the image's ``/app``), then either compiled as the Dockerfile's ``RUN python -m
compileall`` lines compile them, or left as source (the Dockerfile before it compiled anything).
The Dockerfile's command runs there with the image's settings (``PYTHONDONTWRITEBYTECODE=1``, so,
as in the container, nothing is compiled for the next start) in an isolated Python of this
version (``python -I -S main.py``), and the time to its first ``200`` from ``/healthz`` is taken.
The two kinds alternate; medians are printed, with the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.docker_image import dockerfile, image_folder  # noqa: E402
from tests.support.server import free_port  # noqa: E402


def start(output: Path, root: Path, *, bytecode: bool) -> float:
    """Milliseconds from the container's command to its first answer."""
    shutil.rmtree(root, ignore_errors=True)
    image = image_folder(output, dockerfile((output / "Dockerfile").read_text()), root, bytecode=bytecode)
    (image / ".agent-unit").mkdir()  # the image's RUN makes it, for the agent user
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AGENT_UNIT_ENV": "production",
        "LOG_LEVEL": "warning",
    }
    began = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-I", "-S", "main.py"], cwd=image, env=env, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return (time.perf_counter() - began) * 1000
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError("the server exited before it answered") from None
                time.sleep(0.005)
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "refund"
        ignored = shutil.ignore_patterns(".output", ".agent-unit", "__pycache__")
        shutil.copytree(REPO / "examples" / "refund", project, ignore=ignored)
        built = subprocess.run(
            [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "docker"],
            cwd=project,
            capture_output=True,
            text=True,
        )
        assert built.returncode == 0, built.stderr + built.stdout
        output = project / ".output" / "docker"
        times: dict[bool, list[float]] = {True: [], False: []}
        for sample in range(args.samples):
            for bytecode in (True, False) if sample % 2 == 0 else (False, True):
                times[bytecode].append(start(output, Path(folder) / "image", bytecode=bytecode))
    with_it, without = statistics.median(times[True]), statistics.median(times[False])

    def each(kind: bool) -> str:
        return ", ".join(f"{t:.0f}" for t in times[kind])

    print(f"Python {sys.version.split()[0]}; start to the first 200 from /healthz, median of {args.samples}:")
    print(f"  compiled as the Dockerfile does:  {with_it:6.0f} ms   each: {each(True)}")
    print(f"  source only:                      {without:6.0f} ms   each: {each(False)}")
    print(f"  source / compiled: {without / with_it:.2f}x")


if __name__ == "__main__":
    main()
