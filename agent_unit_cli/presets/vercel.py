"""``vercel``: ``.vercel/output/`` in the Build Output API (v3), deployed with ``vercel deploy --prebuilt``.

The output is what ``vercel build`` makes of a Python app, so Vercel runs it as its own: one
Python function (``functions/agent-unit.func``) that every route reaches, whose handler
(``vc__handler__python.vc_handler``) hands the app to Vercel's Python runtime package,
``vercel-runtime``, vendored at the version the Vercel CLI pins. That runtime serves the app
with uvicorn behind the platform's IPC socket, so responses (and event streams) stream.

Vercel's cron runs the sweep (``sweep`` in the configuration); runs yield every 240 s
(``budget``) and continue in a fresh invocation at the deployment's own URL, within the
function's 300 s. Storage must be shared by every invocation: Redis, PostgreSQL or DynamoDB.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from agent_unit.errors import PipError

from ..pip import install, installer
from ..pip import linux_wheels as wheels
from ..schedules import vercel as vercel_schedule
from . import BuildOptions, Finish, Preset, Start

FUNCTION = "agent-unit"
"""The function's name: ``functions/agent-unit.func``, reached as ``/agent-unit``."""

VERCEL_RUNTIME = "vercel-runtime==0.20.0"
"""The runtime package the Vercel CLI (vercel@58.10.0, @vercel/python 6.56.2) vendors into a Python function."""

RUNTIMES = ("3.12", "3.13", "3.14")  # the Python versions Vercel runs that vercel-runtime supports
DEFAULT_PYTHON = "3.12"  # Vercel's default
DEFAULT_BUDGET = "240s"
MAX_DURATION = 300  # seconds: the function's limit, on every plan with fluid compute
HANDLER = "vc__handler__python"
ENTRY = "agent_unit_app"  # the module that defines ``app`` (named so no project module shadows it)


def _python(options: BuildOptions) -> str:
    return options.python or DEFAULT_PYTHON


def check(config: Any, options: BuildOptions) -> None:
    if _python(options) not in RUNTIMES:
        raise ValueError(f"--python {options.python}: Vercel's Python runtime needs {', '.join(RUNTIMES)}")
    if options.arch not in (None, "x86_64"):
        raise ValueError(f"--arch {options.arch}: Vercel's Python functions run on x86_64")


def linux_wheels(options: BuildOptions) -> list[str]:
    """Wheels for the function's Amazon Linux: manylinux, x86_64, the function's Python."""
    return wheels("x86_64", _python(options))


def start(options: BuildOptions) -> Start:
    """As Vercel loads the function: ``vendor/`` on the path (with its .pth files), the entry, then the handler.

    The entry first, so that an error of the project's shows as its own; the handler then
    hands that app to Vercel's runtime (which serves it only behind the platform's socket).
    """
    code = "import os, site, sys\nvendor = os.path.join(FOLDER, 'vendor')\nsite.addsitedir(vendor)\n"
    code += f"sys.path.insert(0, vendor)\nimport {ENTRY}\nassert {ENTRY}.app is not None\n"
    code += f"import {HANDLER}\nassert callable({HANDLER}.vc_handler)"
    return Start(code=code, python=_python(options), platform="linux-x86_64", folder=f"functions/{FUNCTION}.func")


def context(config: Any, options: BuildOptions) -> dict[str, Any]:
    return {
        "python_version": _python(options),
        "budget": config.budget or DEFAULT_BUDGET,
        "sweep": config.sweep,
        "task_entries": config.tasks,
        "function": FUNCTION,
        "entry": ENTRY,
    }


def routes() -> list[dict[str, Any]]:
    """Every request to the one function, with its path as sent (as ``vercel build`` routes a Python app)."""
    return [
        {"handle": "filesystem"},
        {
            "src": "/(.*)",
            "dest": f"/{FUNCTION}",
            "transforms": [{"type": "request.path", "op": "set", "args": "/$1"}],
        },
    ]


def crons(sweep: str | bool, base_path: str, tasks: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """Vercel's crons: the sweep, and one per task at its route. Vercel GETs each path with
    ``Authorization: Bearer $CRON_SECRET``."""
    prefix = "/" + base_path.strip("/")
    prefix = "" if prefix == "/" else prefix
    jobs = [] if sweep is False else [{"path": prefix + "/__agent-unit/sweep", "schedule": str(sweep)}]
    for name, task in sorted((tasks or {}).items()):
        jobs.append({"path": f"{prefix}/__agent-unit/tasks/{quote(name)}", "schedule": vercel_schedule(task.schedule)})
    return jobs


def function_config(python: str) -> dict[str, Any]:
    """``.vc-config.json``: what ``vercel build`` writes for a Python function, with its time limit."""
    return {
        "handler": f"{HANDLER}.vc_handler",
        "runtime": f"python{python}",
        "architecture": "x86_64",
        "environment": {"PYTHONPATH": "vendor", "PYTHONDONTWRITEBYTECODE": "1"},
        "supportsResponseStreaming": True,
        "maxDuration": MAX_DURATION,
    }


def _vendor_runtime(step: Finish) -> None:
    """Vercel's runtime package from PyPI, beside the other dependencies (it needs none of its own)."""
    step.progress(f"vendoring {VERCEL_RUNTIME}")
    vendor = step.output / "functions" / f"{FUNCTION}.func" / "vendor"
    try:
        platform, using = linux_wheels(step.options), installer(step.root)
        install([VERCEL_RUNTIME], vendor, platform=platform, deps=False, what=VERCEL_RUNTIME, using=using)
    except PipError as exc:  # the build reports it as a BuildError
        raise ValueError(str(exc)) from None


def _precompile(step: Finish, version: str) -> None:
    """Bytecode for the function (Vercel's function files are read-only): see :mod:`agent_unit_cli.bytecode`."""
    from ..bytecode import compile_bytecode, no_bytecode

    step.progress("compiling bytecode")
    if not compile_bytecode([step.output / "functions" / f"{FUNCTION}.func"], version):
        step.warnings.append(no_bytecode(version, "Vercel"))


def finish(step: Finish) -> list[str]:
    """The runtime package, the function's ``.vc-config.json`` and the output's ``config.json``."""
    _vendor_runtime(step)
    _precompile(step, step.context["python_version"])
    config = step.context
    function = step.output / "functions" / f"{FUNCTION}.func" / ".vc-config.json"
    function.write_text(json.dumps(function_config(config["python_version"]), indent=2) + "\n")
    output: dict[str, Any] = {"version": 3, "routes": routes()}
    if jobs := crons(config["sweep"], config["base_path"], config["task_entries"]):
        output["crons"] = jobs
    (step.output / "config.json").write_text(json.dumps(output, indent=2) + "\n")
    return ["config.json", str(function.relative_to(step.output))]


preset = Preset(
    name="vercel",
    description="Vercel: .vercel/output (Build Output API v3), one Python function and a cron for the sweep.",
    output=".vercel/output",
    runs_on="Vercel (Python 3.12-3.14 functions)",
    storage="shared: redis://, postgres:// or dynamodb://",
    templates=("vercel",),
    run="vercel deploy --prebuilt",
    serverless=True,
    app_path=f"functions/{FUNCTION}.func",
    pip_platform=linux_wheels,
    check=check,
    context=context,
    finish=finish,
    requirements=("httpx",),
    start=start,
    runs_tasks="one Vercel cron each, in config.json (authenticated with CRON_SECRET)",
    notes=(
        "Set AGENT_UNIT_SECRET (or CRON_SECRET, which Vercel's cron sends) in the project's environment "
        "variables: the sweep and long runs' continuations need it.",
        "Vercel runs crons on production deployments only, and once a day on the Hobby plan "
        '(sweep = "0 0 * * *" there): sleeping runs wake at the next sweep.',
    ),
)
