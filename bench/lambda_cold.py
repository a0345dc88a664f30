"""The aws-lambda bundle of the refund example: zip size, the handler's cold import, the first invocation.

    .venv/bin/python bench/lambda_cold.py [--write]

Builds ``examples/refund`` (plain adapter, Redis storage) with ``--preset aws-lambda``,
unpacks ``function.zip`` into a fresh folder for every sample and, in a new isolated process
that may not write bytecode (``python -I -S -B``, as Lambda's read-only code folder), imports
the handler under ``-X importtime`` and then serves a first ``GET /agents`` Function URL event
(which builds the app). Medians of 7. With ``--write`` the section goes to BENCHMARKS.md
after ``<!-- lambda benchmark -->``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- lambda benchmark -->"
SAMPLES = 7

FIRST = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import handler
t1 = time.perf_counter()
domain = "abc.lambda-url.eu-west-1.on.aws"
event = {"version": "2.0", "routeKey": "$default", "rawPath": "/agents", "rawQueryString": "",
         "headers": {"host": domain}, "body": None, "isBase64Encoded": False,
         "requestContext": {"http": {"method": "GET", "path": "/agents", "protocol": "HTTP/1.1", "sourceIp": "1.2.3.4"},
                            "domainName": domain, "stage": "$default", "requestId": "r", "routeKey": "$default",
                            "accountId": "1", "apiId": "abc", "time": "", "timeEpoch": 0}}
response = handler.handler(event, None)
t2 = time.perf_counter()
assert response["statusCode"] == 200, response
print(json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t2 - t1) * 1000}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "refund"
        shutil.copytree(REPO / "examples" / "refund", project, ignore=shutil.ignore_patterns(".output", ".agent-unit"))
        (project / "agent-unit.toml").write_text('name = "refund"\nstorage = "redis://127.0.0.1:6379/0"\n')
        subprocess.run(
            [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "aws-lambda", "--json"],
            cwd=project,
            check=True,
            capture_output=True,
        )
        zipped = project / ".output" / "aws-lambda" / "function.zip"
        size = zipped.stat().st_size
        importtimes, imports, firsts = [], [], []
        unpacked_size = 0
        for _ in range(SAMPLES):
            target = Path(folder) / "function"
            shutil.rmtree(target, ignore_errors=True)
            with zipfile.ZipFile(zipped) as archive:
                archive.extractall(target)
            unpacked_size = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
            trace = subprocess.run(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-B",
                    "-X",
                    "importtime",
                    "-c",
                    f"import sys; sys.path.insert(0, {str(target)!r}); import handler",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stderr
            total = re.search(r"\|\s+(\d+) \| handler$", trace, re.MULTILINE)
            assert total is not None, trace[-500:]
            importtimes.append(int(total.group(1)) / 1000)
            env = {"AGENT_UNIT_SECRET": "a-secret-of-sixteen-chars", "PATH": "/usr/bin:/bin"}
            shutil.rmtree(target)
            with zipfile.ZipFile(zipped) as archive:
                archive.extractall(target)
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-B", "-c", FIRST, str(target)], capture_output=True, text=True, env=env
            )
            assert done.returncode == 0, done.stderr[-2000:]
            timing = json.loads(done.stdout.strip().splitlines()[-1])
            imports.append(timing["import_ms"])
            firsts.append(timing["first_ms"])
    lines = [
        MARKER,
        "",
        "## AWS Lambda bundle (the refund example, plain adapter)",
        "",
        f"Command: `.venv/bin/python bench/lambda_cold.py --write`. Python {sys.version.split()[0]}, "
        "the machine above; "
        f"medians of {SAMPLES} fresh unpacks, each in a new `python -I -S -B` process (no site-packages, no bytecode "
        "written, as in Lambda's read-only code folder). Lambda itself is not reachable from here.",
        "",
        "| what | measured | target |",
        "|---|---:|---:|",
        f"| function.zip | {size / 1e6:.1f} MB ({unpacked_size / 1e6:.1f} MB unpacked) | under 20 MB |",
        f"| cold import of the handler (`-X importtime`, cumulative) | {statistics.median(importtimes):.0f} ms | "
        "under 100 ms |",
        f"| cold import, wall clock | {statistics.median(imports):.0f} ms | |",
        f"| first invocation (builds the app, serves `GET /agents`) | {statistics.median(firsts):.0f} ms | |",
        "",
    ]
    section = "\n".join(lines)
    print(section)
    if args.write:
        path = REPO / "BENCHMARKS.md"
        current = path.read_text()
        at = current.find(MARKER)
        if at < 0:
            path.write_text(current.rstrip("\n") + "\n\n" + section)
        else:
            # this section only: up to the next marker or the next section's heading (the Temporal
            # and OpenTelemetry sections follow it without a marker of their own)
            own = current.find("\n## ", at)  # this section's own heading
            ends = [i for i in (current.find("<!-- ", at + len(MARKER)), current.find("\n## ", own + 1)) if i >= 0]
            rest = current[min(ends) :].lstrip("\n") if ends else ""
            path.write_text(current[:at] + section + ("\n" + rest if rest else ""))


if __name__ == "__main__":
    main()
