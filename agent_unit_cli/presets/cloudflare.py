"""``cloudflare``: a Python Worker in ``.output/cloudflare/``, deployed with ``uv run pywrangler deploy``.

Workers run Python on Pyodide and install its packages themselves: ``pywrangler`` (Cloudflare's
``workers-py``) reads the output's ``pyproject.toml`` and vendors each package from PyPI or
Pyodide's own index before it deploys, so only pure-Python packages and ones Pyodide builds can
run there. The build copies the project and the runtime into ``src/`` beside ``src/entry.py``
and lists the rest in ``pyproject.toml``. The runtime the entry imports is the package
``agent_unit.hosts.cloudflare`` (the Worker, the Durable Object classes and their store, the D1 store).

Two runtimes (``[cloudflare] runtime``):

- ``durable-objects`` (the default): each run has its own Durable Object, ``AgentUnitRun``, and
  an index object, ``AgentUnitIndex``, keeps the run list and the state. No storage to set.
- ``default``: the engine over ``storage = "d1://BINDING"``, a D1 database the user binds in
  ``[cloudflare.wrangler]``. Drivers that need sockets or threads (redis, postgres, dynamodb's
  boto3) cannot run in Pyodide, and KV has no compare-and-set: each is refused.

Cron Triggers run the sweep and the tasks; Cloudflare numbers weekdays from 1 = Sunday, so the
schedules are written with weekday names (``schedules.cloudflare``).

``[cloudflare.wrangler]`` is merged into the generated ``wrangler.jsonc``, never replacing what
the Worker needs: the names agent-unit uses (``RESERVED``) are refused, lists are joined, and
``main`` stays the entry.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..imports import distribution_name
from ..schedules import cloudflare as cloudflare_schedule
from . import BuildOptions, Finish, Preset

__all__ = [
    "COMPATIBILITY_DATE",
    "COMPATIBILITY_FLAGS",
    "DEFAULT_BUDGET",
    "RESERVED",
    "SWEEP",
    "compiled_dependencies",
    "crons",
    "refused_store",
    "reserved_uses",
    "worker_name",
    "wrangler_config",
]

PYTHON = "3.14"
COMPATIBILITY_DATE = "2026-09-08"
COMPATIBILITY_FLAGS = ("python_workers", "python_workers_20260610")
"""Python 3.14 on Workers. workers-py's metadata (pywrangler 1.16.7) selects 3.14 by the flag
``python_workers_20260610``; a date alone selected it only while an enable date was listed, so
both are written: the date the issue names and the flag that selects 3.14 by itself."""

DEFAULT_BUDGET = {"durable-objects": "10m", "default": "25s"}
"""How long a run executes before it yields, when ``budget`` is not set, by runtime. A Durable
Object's alarm invocation may run 15 minutes of wall-clock time: a run yields after 10, leaving the
step it is in 5 more, and continues in the next alarm (the TypeScript original yields every 10
minutes too). On the default runtime a run goes on after the response in ``waitUntil``, which
Workers give 30 seconds: it yields after 25 and continues at the Worker's URL."""

RUNS_BINDING, INDEX_BINDING = "AGENT_UNIT_RUNS", "AGENT_UNIT_INDEX"
RUN_CLASS, INDEX_CLASS = "AgentUnitRun", "AgentUnitIndex"
MIGRATION_TAG = "agent-unit-v1"
RESERVED = (RUNS_BINDING, INDEX_BINDING, RUN_CLASS, INDEX_CLASS, MIGRATION_TAG)
"""The names the Worker's own Durable Objects use: a user's resource that reuses one is refused."""

ENTRY = "entry"  # src/entry.py: the Worker's main module
ENTRYPOINT = "Default"  # the WorkerEntrypoint class the entry defines
SWEEP = "agent-unit:sweep"
"""The task name a Cron Trigger runs the sweep under (no ``[tasks]`` name can contain a colon)."""

HOST_SERVES = {"uvicorn", "agent-unit"}
"""Requirements a Worker does not install: Workers serve the app themselves, and the runtime is copied."""
PYODIDE_WHEELS = {"pydantic-core"}
"""Compiled packages the runtime needs that PyPI has Pyodide wheels of (the real-workerd tests
install them from there): never warned about."""
NO_PYPI_PYODIDE_WHEEL = {"rpds-py"}
"""Compiled packages the runtime needs that PyPI has no Pyodide wheel of (jsonschema's rpds-py,
through referencing): only Pyodide's own index, which ``pywrangler sync`` reads, has a build."""
PYODIDE_MARKERS = {
    "python_version": PYTHON,
    "python_full_version": f"{PYTHON}.0",
    "sys_platform": "emscripten",
    "platform_system": "Emscripten",
    "platform_machine": "wasm32",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
"""Environment markers as a Worker's Python (3.14 on Pyodide) evaluates them."""

OWNED = ("main",)
"""wrangler keys agent-unit writes and a user's ``[cloudflare.wrangler]`` may not set."""

_NAME = re.compile(r"[^a-z0-9-]+")


def worker_name(name: str) -> str:
    """The Worker's name from ``name``: lowercase letters, digits and dashes, at most 63 characters."""
    return _NAME.sub("-", name.lower()).strip("-")[:63].strip("-") or "agent-unit"


def refused_store(storage: str | None, runtime: str) -> str | None:
    """Why ``storage`` cannot run on this runtime (None when it can)."""
    scheme = storage.split(":", 1)[0].lower() if storage and ":" in storage else (storage or "")
    instead = (
        'Use [cloudflare] runtime = "durable-objects" (the default: each run in its own Durable Object, '
        'no storage to set), or runtime = "default" with storage = "d1://BINDING" (a D1 database you bind '
        "in [cloudflare.wrangler] d1_databases)"
    )
    if runtime == "durable-objects":
        if storage is None:
            return None
        return (
            f'storage = "{storage}": the durable-objects runtime keeps every run in its own Durable Object, '
            'so it takes no storage: remove it, or set [cloudflare] runtime = "default" to use storage = "d1://BINDING"'
        )
    if scheme == "d1":
        return (
            None
            if re.fullmatch(r"d1://[A-Za-z_][A-Za-z0-9_]*", storage or "")
            else (f'storage = "{storage}": write the D1 binding\'s name, like storage = "d1://DB"')
        )
    if scheme in ("redis", "rediss", "valkey", "valkeys", "postgres", "postgresql"):
        why = f"the {scheme} driver needs sockets and threads, which Python Workers (Pyodide) do not have"
    elif scheme == "dynamodb":
        why = "dynamodb goes through boto3, which needs sockets and threads that Python Workers (Pyodide) do not have"
    elif scheme == "kv":
        why = "Workers KV is eventually consistent and has no compare-and-set, so two requests could both win a run"
    elif storage is None or scheme in ("sqlite", "memory"):
        why = "a Worker has no file system or memory that outlives a request"
    else:
        why = f"{scheme}:// is not a store a Worker can use"
    return f'storage = "{storage or "sqlite (the default)"}" cannot run on Cloudflare: {why}. {instead}'


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in ``value`` (a parsed wrangler config), with where it is."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def reserved_uses(wrangler: dict[str, Any]) -> list[str]:
    """Where ``[cloudflare.wrangler]`` uses a reserved name (a binding, a class, a migration tag)."""
    return [f"{where} = {value!r}" for where, value in _strings(wrangler, "cloudflare.wrangler") if value in RESERVED]


def exported_classes(root: Path, module: str) -> list[str]:
    """The public classes ``module`` (a project file) defines, read without importing it: it
    imports ``workers``, which only a Worker has. ValueError when it is not a project module."""
    base = root.joinpath(*module.split("."))
    found = [path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()]
    if not found:
        raise ValueError(
            f"[cloudflare] exports = {module!r} is not a module of the project: name a file at its root, "
            'like exports = "durable" for durable.py'
        )
    try:
        tree = ast.parse(found[0].read_text(), filename=str(found[0]))
    except SyntaxError as exc:
        raise ValueError(f"[cloudflare] exports = {module!r}: {found[0].name} line {exc.lineno}: {exc.msg}") from None
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_")]


def check(config: Any, options: BuildOptions) -> None:
    if options.python not in (None, PYTHON):
        raise ValueError(f"--python {options.python}: this build pins Python {PYTHON} on Workers (Pyodide)")
    if options.arch is not None:
        raise ValueError(f"--arch {options.arch}: Workers run Python on WebAssembly: leave --arch out")
    cloudflare = config.cloudflare
    if config.server is None and (problem := refused_store(config.storage_url, cloudflare.runtime)):
        raise ValueError(problem)
    if uses := reserved_uses(cloudflare.wrangler):
        raise ValueError(
            f"{'; '.join(uses)}: agent-unit's Worker uses {', '.join(RESERVED)} for its own Durable Objects "
            "and their migration: rename yours"
        )
    if owned := [key for key in OWNED if key in cloudflare.wrangler]:
        raise ValueError(
            f"cloudflare.wrangler.{owned[0]}: the build writes it (src/{ENTRY}.py, the Worker's entry): remove it"
        )
    if cloudflare.runtime == "default" and config.server is None:
        binding = (config.storage_url or "").partition("://")[2]
        databases = cloudflare.wrangler.get("d1_databases", [])
        if not any(isinstance(item, dict) and item.get("binding") == binding for item in databases):
            raise ValueError(
                f'storage = "{config.storage_url}" needs a D1 database bound as {binding}: add it to agent-unit.toml, '
                f'[[cloudflare.wrangler.d1_databases]] binding = "{binding}", database_name = "...", '
                'database_id = "..." (wrangler d1 create prints both)'
            )


def crons(sweep: str | bool, tasks: dict[str, Any]) -> dict[str, list[str]]:
    """Cloudflare cron -> what it runs: the sweep (``SWEEP``) and the tasks, in Cloudflare's form."""
    found: dict[str, list[str]] = {}
    if sweep is not False:
        found.setdefault(cloudflare_schedule(str(sweep)), []).append(SWEEP)
    for name, task in sorted(tasks.items()):
        found.setdefault(cloudflare_schedule(task.schedule), []).append(name)
    return found


def _merge(ours: Any, theirs: Any) -> Any:
    """``theirs`` merged into ``ours``: tables merged key by key, lists joined (ours first, no
    repeats), and their value where only a scalar differs."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        merged = dict(ours)
        for key, value in theirs.items():
            merged[key] = _merge(ours[key], value) if key in ours else value
        return merged
    if isinstance(ours, list) and isinstance(theirs, list):
        return [*ours, *(item for item in theirs if item not in ours)]
    return theirs


def wrangler_config(config: Any) -> dict[str, Any]:
    """``wrangler.jsonc``: the Worker's entry, Python 3.14, its Durable Objects (or nothing of its own
    with D1), the Cron Triggers, and the user's ``[cloudflare.wrangler]`` merged in."""
    ours: dict[str, Any] = {
        "name": worker_name(config.name),
        "main": f"src/{ENTRY}.py",
        "compatibility_date": COMPATIBILITY_DATE,
        "compatibility_flags": list(COMPATIBILITY_FLAGS),
    }
    if config.cloudflare.runtime == "durable-objects" and config.server is None:
        ours["durable_objects"] = {
            "bindings": [
                {"name": RUNS_BINDING, "class_name": RUN_CLASS},
                {"name": INDEX_BINDING, "class_name": INDEX_CLASS},
            ]
        }
    if schedule := crons(config.sweep, config.tasks):
        ours["triggers"] = {"crons": list(schedule)}
    if config.url:  # the Worker's own URL: where a yielded run continues (D1) and what the A2A card shows
        ours["vars"] = {"AGENT_UNIT_URL": config.url}
    theirs = dict(config.cloudflare.wrangler)
    their_migrations = theirs.pop("migrations", [])
    merged: dict[str, Any] = _merge(ours, theirs)
    if theirs.get("compatibility_date", "") < COMPATIBILITY_DATE:  # an earlier date: ours, the one tested
        merged["compatibility_date"] = COMPATIBILITY_DATE
    migrations = list(their_migrations)  # theirs first: wrangler applies the tags it has not seen, in order
    if "durable_objects" in ours:
        migrations.append({"tag": MIGRATION_TAG, "new_sqlite_classes": [RUN_CLASS, INDEX_CLASS]})
    if migrations:
        merged["migrations"] = migrations
    return merged


def _native(name: str) -> bool:
    """Whether the distribution ``name`` installed here ships compiled code."""
    try:
        files = importlib.metadata.distribution(name).files or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(str(path).endswith((".so", ".pyd")) for path in files)


def _requires(name: str) -> list[str]:
    """What the distribution ``name`` installed here requires on Pyodide (its markers evaluated
    for Python 3.14 on Emscripten, no extras), as normalized names."""
    try:
        lines = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found: list[str] = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate(PYODIDE_MARKERS):
            found.append(canonicalize_name(requirement.name))
    return found


def compiled_dependencies(requirements: list[str]) -> dict[str, list[str]]:
    """Each package ``requirements`` need (themselves or through others, as installed here) that
    ships compiled code and is not one Pyodide's wheels on PyPI are known to provide, with the
    shortest chain of requirements that brings it in (``["jsonschema", "rpds-py"]``)."""
    chains: dict[str, list[str]] = {}
    queue = deque((name, [name]) for name in dict.fromkeys(distribution_name(r) for r in requirements))
    while queue:
        name, chain = queue.popleft()
        if name in chains or name in HOST_SERVES:
            continue
        chains[name] = chain
        queue.extend((needed, [*chain, needed]) for needed in _requires(name) if needed not in chains)
    return {name: chain for name, chain in chains.items() if name not in PYODIDE_WHEELS and _native(name)}


def context(config: Any, options: BuildOptions) -> dict[str, Any]:
    return {
        "worker_name": worker_name(config.name),
        "runtime": config.cloudflare.runtime,
        "crons": crons(config.sweep, config.tasks),
        "entrypoint": ENTRYPOINT,
        "run_class": RUN_CLASS,
        "index_class": INDEX_CLASS,
        "python_version": PYTHON,
        "wrangler_json": json.dumps(wrangler_config(config), indent=2),
        "budget": config.budget or DEFAULT_BUDGET[config.cloudflare.runtime],
        "exports": config.cloudflare.exports,
        "host_serves": sorted(HOST_SERVES),
    }


def finish(step: Finish) -> list[str]:
    """``pyproject.toml`` for pywrangler; the user's exported classes checked; a package with native code named."""
    if (step.root / f"{ENTRY}.py").is_file() or (step.root / ENTRY).is_dir():
        raise ValueError(
            f"the project's {ENTRY} module would be replaced by the Worker's entry (src/{ENTRY}.py): rename it"
        )
    module = step.context["exports"]
    if module is not None:
        for name in exported_classes(step.root, module):
            if name in RESERVED or name == ENTRYPOINT:
                raise ValueError(
                    f"[cloudflare] exports = {module!r} defines {name}, a name the Worker's entry uses: rename it"
                )
    for name, chain in compiled_dependencies(step.context["requirements"]).items():
        needed = "" if len(chain) == 1 else f" (needed by {chain[0]}{_through(chain)})"
        step.warnings.append(
            f"{name}{needed} ships compiled code and PyPI has no wheel of it for Pyodide: "
            "`uv run pywrangler sync` installs it from Pyodide's own index; an install from PyPI alone leaves it out"
            if name in NO_PYPI_PYODIDE_WHEEL
            else f"{name}{needed} ships compiled code here: a Worker runs only pure-Python packages and "
            f"Pyodide's builds, so `uv run pywrangler sync` fails if Pyodide has no build of {name}"
        )
    if any(_otel(requirement) for requirement in step.context["requirements"]):
        step.warnings.append(
            "OpenTelemetry is not emitted from a Worker: its SDK exports from threads and sockets, which "
            "Python Workers do not have, so runs there send no spans, metrics or logs (OTEL_* settings are ignored)"
        )
    return []


def _otel(requirement: str) -> bool:
    """Whether a requirement asks for OpenTelemetry (its packages, Logfire, or ``agent-unit[otel]``)."""
    text = requirement.strip().lower()
    name = re.split(r"[\s\[<>=!~;@]", text, maxsplit=1)[0]
    return name.startswith(("opentelemetry", "logfire")) or (name == "agent-unit" and "otel" in text)


def _through(chain: list[str]) -> str:
    return f", through {', '.join(chain[1:-1])}" if len(chain) > 2 else ""


preset = Preset(
    name="cloudflare",
    description="Cloudflare Workers: a Python Worker, one Durable Object per run (or D1), Cron Triggers.",
    output=".output/cloudflare",
    runs_on=f"Cloudflare Workers (Python {PYTHON} on Pyodide)",
    storage='none: a Durable Object per run; or runtime = "default" with d1://BINDING',
    templates=("cloudflare",),
    run="cd {output} && uv run pywrangler deploy",
    app_path="src",
    app_folder="",
    vendors=False,
    host_modules=("workers", "js", "pyodide"),
    check=check,
    context=context,
    finish=finish,
    runs_tasks="one Cloudflare Cron Trigger each, in wrangler.jsonc (scheduled on the Worker's entry)",
    own_stores={"d1": "a Cloudflare D1 binding, which only a Worker has"},
    notes=(
        "uv run pywrangler deploy installs the packages in pyproject.toml (only pure-Python packages and "
        "Pyodide's builds run in a Worker), then deploys.",
        "Set AGENT_UNIT_SECRET as a secret (wrangler secret put AGENT_UNIT_SECRET): the internal routes need it.",
    ),
)
