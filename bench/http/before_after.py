"""The built server of this tree beside the same build with ``agent_unit`` as an earlier commit had it.

    .venv/bin/python bench/http/before_after.py COMMIT --rounds 4

``bench/http/project`` is built once with ``agent-unit build --preset server``; a copy of the build
gets the files of ``agent_unit/`` that differ between COMMIT and the working tree as COMMIT had them
(files added since are removed from it, files removed since are put back). Each round serves both
(uvicorn from their ``main.py``, a fresh SQLite store each) and drives each with ``run.py``'s load
generator, as ``servers.py`` measures a server: runs to a pause and resumes per second (8 clients, 5 s
windows after a 1 s ramp), the server's CPU per operation (its process tree, from /proc) and the first
SSE event on the idle server (median of 20). Rounds alternate which build goes first,
so a drift of the host hits both. Printed only: figures go to BENCHMARKS.md by hand, with the command.

A change to the runtime is measured this way on the host as it is, where two runs of ``run.py``
minutes apart can differ by more than the change.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from run import REPO, build_server
from servers import Figures, measure, print_table

BUILT = "uvicorn (built main.py: uvloop + httptools)"  # each build served by its own main.py


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=True)


def as_of(commit: str, build: Path) -> list[str]:
    """Make ``build``'s vendored ``agent_unit`` what ``commit`` had where it differs from the working tree."""
    changed = git("diff", "--name-status", "--no-renames", commit, "--", "agent_unit").stdout.decode().splitlines()
    paths = []
    for line in changed:
        status, path = line.split("\t", 1)
        target = build / "vendor" / path
        if status == "A":  # added since: the commit had no such file
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(git("show", f"{commit}:{path}").stdout)
        for cached in target.parent.glob(f"__pycache__/{target.stem}.*.pyc"):  # a build may hold bytecode
            cached.unlink()
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the commit to compare the working tree with (e.g. HEAD~1)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-unit-before-after-"))
    rows: dict[str, list[Figures]] = {"before": [], "after": []}
    try:
        after = build_server(work).parent
        before = work / "before"
        shutil.copytree(after, before)
        changed = as_of(args.commit, before)
        if not changed:
            sys.exit(f"agent_unit/ is the same at {args.commit} as in the working tree: nothing to compare")
        print(f"before: agent_unit as of {args.commit} ({', '.join(changed)})", file=sys.stderr)
        for i in range(args.rounds):
            for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                figures = asyncio.run(measure(BUILT, before if name == "before" else after, work / f"{name}{i}.db"))
                rows[name].append(figures)
                print(f"round {i + 1} {name}: " + ", ".join(f"{x:.2f}" for x in figures), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table("build", rows)
    medians = {name: [statistics.median(row[k] for row in each) for k in range(4)] for name, each in rows.items()}
    ratio = [medians["after"][k] / medians["before"][k] for k in range(4)]
    print(
        f"\nmedians, after / before: runs/s {ratio[0]:.3f}, CPU per run {ratio[1]:.3f}, "
        f"resumes/s {ratio[2]:.3f}, CPU per resume {ratio[3]:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
