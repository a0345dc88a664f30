"""The Vercel function of the refund example: its cold start with the bytecode the build ships, and without.

    .venv/bin/python bench/vercel_cold.py [--python 3.12] [--samples 7]

Builds ``examples/refund`` (plain adapter, Redis storage) with ``--preset vercel`` and, for every
sample, copies the function folder afresh twice: as built, and with every ``__pycache__`` removed
(what a build ships when the machine has no Python of the function's version). Each copy is
imported in a new isolated process of the function's Python that may not write bytecode
(``python -I -S -B``, as Vercel's read-only function files): ``import vc__handler__python``,
which hands over to Vercel's runtime package, which imports the app and starts it (the store is
checked then, against a ``redis-server`` the tests' helper starts). The two kinds alternate; medians are
printed, with the ratio. Vercel itself is not reachable from here.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.servers import RedisServer  # noqa: E402

IMPORT = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, ".")
import vc__handler__python
print((time.perf_counter() - t0) * 1000)
"""


def cold_import(python: str, function: Path, copy: Path, *, bytecode: bool) -> float:
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(function, copy, ignore=None if bytecode else shutil.ignore_patterns("__pycache__"))
    command = [python, "-I", "-S", "-B", "-c", IMPORT]
    done = subprocess.run(command, cwd=copy, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from agent_unit_cli.starts import interpreter

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="the function's Python (default 3.12, Vercel's)")
    parser.add_argument("--samples", type=int, default=7)
    args = parser.parse_args()
    python = interpreter(args.python)
    if python is None:
        sys.exit(f"needs a Python {args.python}, on the PATH or kept by pyenv")
    redis = RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            project = Path(folder) / "refund"
            ignored = shutil.ignore_patterns(".output", ".agent-unit", "__pycache__")
            shutil.copytree(REPO / "examples" / "refund", project, ignore=ignored)
            (project / "agent-unit.toml").write_text(f'name = "refund"\nstorage = "{redis.url}"\n')
            built = subprocess.run(
                [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "vercel", "--python", args.python],
                cwd=project,
                capture_output=True,
                text=True,
            )
            assert built.returncode == 0, built.stderr + built.stdout
            function = project / ".vercel" / "output" / "functions" / "agent-unit.func"
            compiled = sum(1 for _ in function.rglob("*.pyc"))
            times: dict[bool, list[float]] = {True: [], False: []}
            for sample in range(args.samples):
                for bytecode in (True, False) if sample % 2 == 0 else (False, True):
                    times[bytecode].append(cold_import(python, function, Path(folder) / "copy", bytecode=bytecode))
    finally:
        redis.stop()
    with_it, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"Python {args.python} ({python}); the function as built holds {compiled} .pyc files")
    print(f"cold import of the handler, app started, median of {args.samples}:")
    print(f"  as built (bytecode):   {with_it:6.0f} ms   each: {', '.join(f'{t:.0f}' for t in times[True])}")
    print(f"  without __pycache__:   {without:6.0f} ms   each: {', '.join(f'{t:.0f}' for t in times[False])}")
    print(f"  without / with: {without / with_it:.2f}x")


if __name__ == "__main__":
    main()
