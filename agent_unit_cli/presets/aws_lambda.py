"""``aws-lambda``: a handler (Mangum for HTTP, the sweep for the schedule), ``function.zip`` and a SAM template.

The dependencies are vendored as manylinux wheels for the function's architecture and Python
(``--arch``, ``--python``; by default this interpreter's version, so the bundle can be run
here), next to the runtime package and the project's code. Runs yield every 25 s (``budget``)
and continue in a fresh invocation at the function's own URL; an EventBridge schedule runs
the sweep. Storage must be shared by every invocation: Redis, PostgreSQL or DynamoDB.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..pip import linux_wheels as wheels
from ..schedules import aws_eventbridge
from . import BuildOptions, Finish, Preset, Start

RUNTIMES = ("3.11", "3.12", "3.13")
ARCHITECTURES = {"x86_64": "x86_64", "arm64": "aarch64"}
DEFAULT_BUDGET = "25s"


def _python(options: BuildOptions) -> str:
    local = f"{sys.version_info.major}.{sys.version_info.minor}"
    return options.python or (local if local in RUNTIMES else RUNTIMES[-1])


def _arch(options: BuildOptions) -> str:
    return options.arch or "x86_64"


def check(config: Any, options: BuildOptions) -> None:
    if _python(options) not in RUNTIMES:
        raise ValueError(f"--python {options.python}: AWS Lambda runs Python {', '.join(RUNTIMES)}")
    if _arch(options) not in ARCHITECTURES:
        raise ValueError(f"--arch {options.arch}: use x86_64 or arm64")


def linux_wheels(options: BuildOptions) -> list[str]:
    """Wheels for Lambda's Amazon Linux: manylinux, the function's architecture and Python."""
    return wheels(ARCHITECTURES[_arch(options)], _python(options))


def start(options: BuildOptions) -> Start:
    """Lambda unpacks function.zip and imports ``handler``; the app is created at the first invocation."""
    return Start(
        code="import handler\nhandler.create_app()",
        python=_python(options),
        platform=f"linux-{ARCHITECTURES[_arch(options)]}",
        archive="function.zip",
    )


def schedule(cron: str | bool) -> str | None:
    """The config's five-field cron as an EventBridge Scheduler expression (None: no sweep)."""
    if cron is False:
        return None
    if cron in (True, "* * * * *"):
        return "rate(1 minute)"
    minute, hour, day, month, weekday = str(cron).split()
    if weekday == "*":
        weekday = "?"
    else:  # EventBridge counts weekdays 1-7 from Sunday; cron 0-7 from Sunday
        weekday = re.sub(r"\d", lambda m: str(int(m.group()) % 7 + 1), weekday)
        day = "?"
    return f"cron({minute} {hour} {day} {month} {weekday} *)"


def task_schedules(tasks: dict[str, Any]) -> list[dict[str, str]]:
    """One EventBridge Scheduler schedule per task: its event's name (letters and digits, unique),
    its expression and its input, which names the task and the tick's scheduled time."""
    schedules = []
    for number, (name, task) in enumerate(sorted(tasks.items()), start=1):
        words = "".join(part.title() for part in re.split(r"[^A-Za-z0-9]+", name))[:40]
        event = {"agent_unit": "task", "task": name, "scheduled_at": "<aws.scheduler.scheduled-time>"}
        schedules.append(
            {"id": f"Task{number}{words}", "expression": aws_eventbridge(task.schedule), "input": json.dumps(event)}
        )
    return schedules


def context(config: Any, options: BuildOptions) -> dict[str, Any]:
    storage = config.storage_url or ""
    table = None
    if storage.startswith("dynamodb://"):
        parts = urlsplit(storage)
        table = parts.netloc
        region = parse_qs(parts.query).get("region", [None])[-1]
        storage = f"dynamodb://{table}" + (f"?region={region}" if region else "")
    # ${NAME} in the storage URL (a password) becomes a NoEcho parameter and the variable NAME.
    variables = sorted(set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", storage)))
    return {
        "storage_parameters": {name: "".join(part.title() for part in name.lower().split("_")) for name in variables},
        "lambda_python": _python(options),
        "lambda_arch": _arch(options),
        "budget": config.budget or DEFAULT_BUDGET,
        "sweep_schedule": schedule(config.sweep),
        "task_schedules": task_schedules(config.tasks),
        "dynamodb_table": table,
        "lambda_storage": storage,
    }


def _precompile(step: Finish) -> None:
    """Bytecode in the zip (Lambda's code folder is read-only): see :mod:`agent_unit_cli.bytecode`."""
    from ..bytecode import compile_bytecode, no_bytecode

    version = _python(step.options)
    step.progress("compiling bytecode")
    if not compile_bytecode([step.output / "app", step.output / "vendor", step.output / "handler.py"], version):
        step.warnings.append(no_bytecode(version, "Lambda"))


def finish(step: Finish) -> list[str]:
    """``function.zip``: the handler, the project (``app/``) and the dependencies (``vendor/``)."""
    _precompile(step)
    step.progress("zipping function.zip")
    zipped = step.output / "function.zip"
    entries = sorted(path for path in step.output.glob("__pycache__/handler.*") if path.is_file())
    entries.append(step.output / "handler.py")
    for folder in ("app", "vendor"):
        entries += sorted(path for path in (step.output / folder).rglob("*") if path.is_file())
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in entries:
            info = zipfile.ZipInfo(str(path.relative_to(step.output)), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, Path(path).read_bytes())
    return ["function.zip"]


preset = Preset(
    name="aws-lambda",
    description="AWS Lambda: a Mangum handler, function.zip and a SAM template (Function URL, sweep schedule).",
    output=".output/aws-lambda",
    runs_on="AWS Lambda (Python 3.11-3.13, x86_64 or arm64)",
    storage="shared: redis://, postgres:// or dynamodb:// (the template creates the DynamoDB table)",
    templates=("aws-lambda",),
    run="cd {output} && sam deploy --guided",
    serverless=True,
    pip_platform=linux_wheels,
    check=check,
    context=context,
    finish=finish,
    requirements=("mangum", "httpx"),
    start=start,
    runs_tasks="one EventBridge Scheduler schedule each, in template.yaml",
    agent_notes=(
        "The Function URL is public (AuthType NONE): `authorize` in agent-unit.toml is what guards the agents' "
        "routes, so set it before you deploy.",
    ),
    notes=(
        "Lambda's Python runtime cannot stream: a start or resume answers when the run parks, ends or yields, "
        "with its events so far; read the rest from /runs/{id}/events.",
        "Set AgentUnitUrl to the FunctionUrl output after the first deploy, so long runs continue at once "
        "(without it the next sweep continues them).",
    ),
)
