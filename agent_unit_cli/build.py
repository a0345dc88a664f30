"""``agent-unit build``: render a preset's output for the project's agents.

The build discovers the agents once and writes their registry into the output, copies the
project's Python source, vendors the runtime and what the project imports with pip (at the
versions installed here, unless the project's requirements say otherwise), renders the
preset's templates with Jinja2, and proves the output starts before it reports success.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

import agent_unit
from agent_unit._tasks import tasks_from_config
from agent_unit.adapters import ENTRY_POINT_GROUP
from agent_unit.adapters.registry import load_adapter
from agent_unit.discovery import agent_sources, load_registry
from agent_unit.errors import AdapterError, BuildError, DiscoveryError, PipError, ServerError, TaskError
from agent_unit.http.auth import load_authorize
from agent_unit.http.routes import public_routes
from agent_unit.stores import DEFAULT_STORE_URL, store_kind

from . import pip
from .config import Config
from .imports import Import, Needs, distribution_name, module_paths, needs, project_imports
from .presets import BuildOptions, Finish, Preset, presets
from .server_presets import Generated, generate
from .servers import load_server
from .starts import check_starts

__all__ = ["BuildResult", "build"]

# What a built server needs at run time (the CLI's own dependencies stay out).
RUNTIME_REQUIREMENTS = ("pydantic", "starlette", "jsonschema", "uvicorn", "ag-ui-protocol")
STORE_DRIVERS = {"redis": "redis", "rediss": "redis", "valkey": "redis", "valkeys": "redis", "dynamodb": "boto3"}
STORE_DRIVERS |= {"postgres": "psycopg[binary]", "postgresql": "psycopg[binary]"}
"""The driver a built app needs for its storage URL's scheme (pinned to the version installed here)."""
SCHEMES = {"memory", "sqlite", *STORE_DRIVERS}
"""The storage schemes every Python host can reach; a preset adds those of its platform (``Preset.own_stores``)."""
DRIVER_MODULES = {"redis": "redis", "psycopg[binary]": "psycopg", "boto3": "boto3"}
"""The module each driver is imported as: a built app imports it at its first connection, the check at once."""
_LEADING_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def storage_scheme(storage: str, provider: str | None = None, own: Collection[str] = ()) -> str:
    """The storage URL's scheme: it says which driver the build vendors. ``own`` are the schemes
    the presets reach themselves (their ``own_stores``), known besides :data:`SCHEMES`.

    ``${NAME}`` stands for a secret and expands where the app runs. When it hides the scheme
    (``storage = "${DATABASE_URL}"``) the build reads ``NAME`` now; unset (a CI build has no
    production secrets), the table form's ``provider`` names the store instead. With neither,
    the build cannot tell which driver the app needs, and refuses rather than build an app that
    fails at its first request. A provider that disagrees with the URL is refused too.
    """
    leading = _LEADING_VARIABLE.match(storage)
    if leading is not None:
        name = leading.group(1)
        value = os.environ.get(name)
        if not value:
            if provider is not None:
                return provider
            raise BuildError(
                f'storage = "{storage}" hides the store\'s scheme, so the build cannot tell which driver to vendor: '
                f'name the store beside the URL, storage = {{ provider = "postgres", url = "{storage}" }} '
                f"(or redis, dynamodb, sqlite), or set {name} when you build"
            )
        scheme = storage_scheme(value + storage[leading.end() :], own=own)
        if provider is not None and store_kind(scheme) != store_kind(provider):
            raise BuildError(
                f'storage = {{ provider = "{provider}", ... }} but {name} is a {scheme}:// URL: '
                f'make them agree (provider = "{store_kind(scheme)}"), or set {name} to a {provider} URL'
            )
        return scheme
    scheme = storage.split(":", 1)[0].lower() if ":" in storage else ""
    if scheme not in SCHEMES and scheme not in own:
        raise BuildError(
            f'storage = "{storage}": unknown scheme {scheme!r}: use memory://, sqlite:///path.db, '
            "redis://host:6379, postgres://user@host/db or dynamodb://table?region=..."
        )
    if provider is not None and store_kind(scheme) != store_kind(provider):
        raise BuildError(
            f'storage = {{ provider = "{provider}", url = "{storage}" }}: the URL is a {scheme}:// URL: '
            f'make them agree (provider = "{store_kind(scheme)}")'
        )
    return scheme


def _store_driver(scheme: str) -> list[str]:
    driver = STORE_DRIVERS.get(scheme)
    if driver is None:
        return []
    name = driver.split("[", 1)[0]
    try:
        return [f"{driver}=={importlib.metadata.version(name)}"]
    except importlib.metadata.PackageNotFoundError:
        return [driver]


def _pinned(name: str) -> str:
    """``name`` (with its extras: ``psycopg[binary]``) at the version installed here (the one tested
    with), or unpinned when it is not installed.

    ``name; marker`` keeps its environment marker (``httptools; platform_python_implementation == "CPython"``).
    """
    name, _, marker = name.partition(";")
    name, marker = name.strip(), marker.strip()
    try:
        pinned = f"{name}=={importlib.metadata.version(name.split('[', 1)[0])}"
    except importlib.metadata.PackageNotFoundError:
        pinned = name
    return f"{pinned}; {marker}" if marker else pinned


def _mcp(config: Config, requirements: list[str]) -> list[str]:
    """The MCP SDK, when MCP is on (``mcp = true``, or the project's requirements name it).

    It is large (tens of MB with its dependencies), so a build carries it only when asked;
    without it ``POST /mcp`` answers 501 and says what to install.
    """
    named = any(req.replace("_", "-").lower().startswith(("mcp", "agent-unit[mcp")) for req in requirements)
    if config.mcp is False or not (config.mcp or named):
        return []
    try:
        return [f"mcp=={importlib.metadata.version('mcp')}"]
    except importlib.metadata.PackageNotFoundError:
        return ["mcp>=2.3,<3"]


MARKER = ".agent-unit-build"
INCOMPLETE = "incomplete: this build did not finish, do not deploy it; the next build replaces this folder\n"
COMPLETE = "written by agent-unit build: the next build replaces this folder\n"
SKIP = {".output", ".git", ".agent-unit", "__pycache__", "node_modules", "dist", "build", "tests", ".venv", "venv"}


@dataclass
class BuildResult:
    preset: str
    output: Path
    agents: list[str]
    routes: list[str]
    files: list[str] = field(default_factory=list)
    run: str = ""
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tasks: list[dict[str, str]] = field(default_factory=list)  # name, schedule, handler and what runs it
    server: str | None = None  # the user's own app, "module:app", when the build serves it

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "output": str(self.output),
            "agents": self.agents,
            "routes": self.routes,
            "files": self.files,
            "run": self.run,
            "notes": self.notes,
            "warnings": self.warnings,
            "tasks": self.tasks,
            "server": self.server,
        }


def routes(base_path: str, *, mcp: bool = True, ui: bool = False) -> list[str]:
    """The public routes under ``base_path``, one line per method, as the route table lists them;
    ``POST /mcp`` only where it is served (``mcp``), the inbox with ``ui``."""
    prefix = base_path.rstrip("/")
    return [
        f"{method:<6} {prefix}{route.path}"
        for route in public_routes(mcp=mcp, ui=ui)
        if route.listed
        for method in route.methods
    ]


def _project_requirements(root: Path) -> list[str]:
    requirements = root / "requirements.txt"
    if requirements.is_file():
        lines = [line.split("#")[0].strip() for line in requirements.read_text().splitlines()]
        return [line for line in lines if line and not line.startswith("-")]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        dependencies = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies", [])
        return [dep for dep in dependencies if not dep.replace("_", "-").lower().startswith("agent-unit")]
    return []


def _sources(root: Path) -> list[Path]:
    """The agents and the project's own top-level modules and packages they may import."""
    return [
        path
        for path in sorted(root.iterdir())
        if not (path.name in SKIP or path.name.startswith("."))
        and (
            (path.is_file() and path.suffix == ".py")
            or (path.is_dir() and (path.name == "agents" or (path / "__init__.py").is_file()))
        )
    ]


def _copy_source(root: Path, destination: Path) -> None:
    destination.mkdir(parents=True)
    for path in _sources(root):
        if path.is_file():
            shutil.copy2(path, destination / path.name)
        else:
            shutil.copytree(path, destination / path.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _requirements(
    preset: Preset, config: Config, scheme: str, project: list[str], found: dict[str, str], server: tuple[str, ...]
) -> list[str]:
    """What pip installs: the runtime, the host's entry, the store's driver, what a server preset names
    and what the project imports (each at the version installed here), then the project's requirements,
    which win over the rest."""
    chosen: dict[str, str] = {}
    for requirement in (
        *[_pinned(name) for name in (*RUNTIME_REQUIREMENTS, *preset.requirements, *server)],
        *_store_driver(scheme),
        *_mcp(config, project),
        *([_pinned("cronsim")] if config.tasks else []),  # the tasks' next and last ticks
        *([_pinned("temporalio")] if config.temporal_table is not None else []),  # [temporal]: the SDK
        *[found[name] for name in sorted(found)],
    ):
        chosen.setdefault(distribution_name(requirement), requirement)
    for requirement in project:
        chosen[distribution_name(requirement) or requirement] = requirement
    return list(chosen.values())


def _copy_runtime(destination: Path) -> None:
    shutil.copytree(
        Path(agent_unit.__file__).parent,
        destination / "agent_unit",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )


def _copy_alone(names: list[str], destination: Path) -> None:
    for name in names:
        for path in module_paths(name):
            if path.is_dir():
                shutil.copytree(path, destination / path.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(path, destination / path.name)


def _vendor(
    preset: Preset,
    requirements: list[str],
    alone: list[str],
    destination: Path,
    options: BuildOptions,
    using: pip.Installer,
) -> None:
    platform = preset.pip_platform(options) if preset.pip_platform is not None else None  # the host's, not ours
    try:
        pip.install(requirements, destination, platform=platform, alone=alone, using=using)
    except PipError as exc:
        raise BuildError(str(exc)) from None
    _copy_runtime(destination)


def _own_modules(root: Path, generated: Generated | None = None) -> set[str]:
    """The project's own top-level modules (``agents`` only as a package: else it is the OpenAI Agents SDK's),
    and those a server preset wrote."""
    made = list(generated.folder.iterdir()) if generated else []
    names = {path.stem if path.is_file() else path.name for path in [*_sources(root), *made]}
    if not (root / "agents" / "__init__.py").is_file():
        names.discard("agents")
    return names


def _configured_modules(config: Config, source: str) -> list[Import]:
    """The modules the configuration names: adapters and task handlers (``authorize`` is checked on its own)."""
    references = [*config.adapters, *[task.handler for task in config.tasks.values()]]
    return [Import(reference.partition(":")[0], source, 0) for reference in references]


def _framework_modules(root: Path, registry: dict[str, tuple[str, str]]) -> list[Import]:
    """The module of each agent's value: a framework agent's framework (``pydantic_ai``), which its adapter serves."""
    values = load_registry(root / "agents", registry)  # imported already by discovery: no second import
    return [
        Import(type(value).__module__, f"agents/{registry[name][0]}", 0)
        for name, value in values.items()
        if type(value).__module__
    ]


def _adapter_distributions() -> list[str]:
    """The installed adapter packages (the entry-point group): a build loads them as ``dev`` does."""
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return [entry.dist.name for entry in found if entry.dist is not None]


def _needs(
    root: Path,
    imports: list[Import],
    distributions: list[str],
    mapping: Mapping[str, list[str]],
    generated: Generated | None = None,
) -> Needs:
    found = needs(imports, _own_modules(root, generated), distributions, mapping)
    if found.missing:
        listed = "; ".join(f"{item.where}: {item.module.split('.')[0]}" for item in found.missing)
        raise BuildError(
            f"the project imports modules that are not installed here, so the build cannot vendor them ({listed}): "
            "install the packages that provide them (and list them in requirements.txt), or remove the imports"
        )
    return found


def _check_authorize(reference: str | None) -> None:
    """``authorize = "module:function"`` must load, here as where the app starts."""
    try:
        load_authorize(reference)
    except ValueError as exc:
        problem = str(exc)
    except Exception as exc:  # noqa: BLE001 - the user's module raised while it was imported
        problem = f"authorize = {reference!r} failed to import: {type(exc).__name__}: {exc}"
    else:
        return
    raise BuildError(
        f"{problem}: point it at a function of the project (a module at its root, e.g. "
        'authorize = "auth:authorize" for auth.py)'
    )


def _check_server(root: Path, reference: str, generated: Generated | None) -> int:
    """``server = "module:app"`` imports from the project (or a server preset's folder) and is an ASGI
    app; the number of agent units it created (each the host sweeps). One error naming the module,
    attribute and line."""
    from agent_unit.http import agent_units

    try:
        load_server(reference, root, generated.folder if generated else None)
    except ServerError as exc:
        raise BuildError(exc.message) from None
    return len(agent_units())


def _check_tasks(root: Path, config: Config) -> None:
    """Every task's handler imports from the project, here as where it runs: one error naming
    the task, its module, the attribute and the user's line that failed."""
    try:
        for task in tasks_from_config(config.tasks, root=root).values():
            task.load()
    except TaskError as exc:
        raise BuildError(exc.message) from None


def _tasks_report(preset: Preset, config: Config) -> tuple[list[dict[str, str]], list[str]]:
    """The tasks and what runs them on this host; a warning naming them when nothing does."""
    runs = preset.runs_tasks or "nothing on this host: run them with `agent-unit task NAME`"
    listed = [
        {"name": name, "schedule": task.schedule, "handler": task.handler, "runs_on": runs}
        for name, task in sorted(config.tasks.items())
    ]
    if not config.tasks or preset.runs_tasks:
        return listed, []
    names = ", ".join(sorted(config.tasks))
    unscheduled = f", {preset.unscheduled}" if preset.unscheduled else ""
    return listed, [
        f"{preset.name} has no scheduler: the tasks {names} run only when triggered (agent-unit task NAME){unscheduled}"
    ]


def build(
    root: Path,
    config: Config,
    *,
    preset: str | None = None,
    out: Path | None = None,
    options: BuildOptions | None = None,
    progress: Callable[[str], None] = lambda message: None,
    source: str = "agent-unit.toml",
) -> BuildResult:
    """Build ``root``'s agents with ``preset`` into ``out``; raise :class:`BuildError` on any problem.

    ``source`` names the configuration's file in messages.
    """
    options = options or BuildOptions()
    name = preset or config.preset
    try:
        known = presets()
    except ValueError as exc:
        raise BuildError(str(exc)) from None
    chosen = known.get(name)
    if chosen is None:
        raise BuildError(f"unknown preset {name!r}: use one of {', '.join(sorted(known))} (agent-unit presets)")
    if config.temporal_table is not None and not chosen.workers:
        holding = " or ".join(other.name for other in known.values() if other.workers)
        raise BuildError(
            f"the {name} preset cannot run [temporal]: its host keeps no process alive to hold a Temporal worker; "
            f"build with --preset {holding} (the app and a worker in one process), or remove [temporal]"
        )
    if chosen.check is not None:  # first: a preset refuses a store it cannot run with its own reason
        try:
            chosen.check(config, options)
        except ValueError as exc:
            raise BuildError(str(exc)) from None
    generated: Generated | None = None
    if config.server_preset is not None:  # the framework's own app: its module, then served as your own app is
        progress(f"writing the {config.server_preset} server's module")
        try:
            generated = generate(config.server_preset, config.server_options, root.resolve(), chosen)
        except ValueError as exc:
            raise BuildError(str(exc)) from None
        # the pages the framework's app lets call (its CORS) get past the Origin check in front of it too
        origins = [*config.allowed_origins, *generated.allowed_origins]
        config = config.model_copy(update={"server": generated.reference, "allowed_origins": origins})
    storage = config.storage_url or DEFAULT_STORE_URL
    # a host that runs no Python: its backend, built with another preset, opens the store
    owned = {scheme for other in known.values() for scheme in other.own_stores}
    scheme = storage_scheme(storage, config.storage_provider, owned) if chosen.python_app else ""
    for other in known.values():  # a store only another host reaches (a binding of its platform)
        if other is not chosen and scheme in other.own_stores:
            raise BuildError(
                f'storage = "{storage}" is {other.own_stores[scheme]}: '
                f"build with --preset {other.name}, or choose a store this host can reach"
            )
    if chosen.serverless and scheme in ("sqlite", "memory") and not config.server:  # a server app owns its store
        raise BuildError(
            f"the {name} preset needs storage that every invocation shares, not {scheme}: "
            'set storage = "redis://...", "postgres://..." or "dynamodb://table?region=..." in agent-unit.toml'
        )
    root = root.resolve()
    output = (out or root / chosen.output).resolve()
    if root == output or output in root.parents:
        raise BuildError(f"--out {output} would overwrite the project: choose a new folder, like .output/")
    for path in _sources(root):
        if output == path or path in output.parents:
            raise BuildError(
                f"--out {output} is inside the project's source ({path.name}): choose .output/ or a new folder"
            )
    ours = output == root / ".output" or (root / ".output") in output.parents or (output / MARKER).exists()
    if output.exists() and any(output.iterdir()) and not ours:
        raise BuildError(f"--out {output} is not empty and was not written by agent-unit build: choose a new folder")

    found = Needs()
    if chosen.python_app:  # before the agents are imported: a missing module is named with its line
        progress("reading the project's imports")
        for reference in config.adapters:  # a configured adapter that cannot load says so first, by its reference
            try:
                load_adapter(reference)
            except AdapterError as exc:
                raise BuildError(f"{source}: {exc.message}") from None
        imports = [*project_imports(root, _sources(root)), *_configured_modules(config, source)]
        if generated is not None:
            imports += project_imports(generated.folder, sorted(generated.folder.iterdir()))
        imports = [item for item in imports if item.module.split(".")[0] not in chosen.host_modules]
        mapping = importlib.metadata.packages_distributions()  # read once: it reads every distribution's files
        found = _needs(root, imports, _adapter_distributions(), mapping, generated)

    registry: dict[str, tuple[str, str]] = {}
    if config.server_app:  # the user's own app: agents/ is not scanned, nothing of agent-unit's is added
        progress(f"importing {config.server_app}")
        mounts = _check_server(root, config.server_app, generated)
        if not mounts:  # no agent unit to sweep: no sweep schedule or cron
            config = config.model_copy(update={"sweep": False})
    else:
        progress("discovering agents")
        try:
            registry = agent_sources(root, adapters=config.adapters)
        except DiscoveryError as exc:
            raise BuildError(exc.message) from None
        if not registry:
            raise BuildError("agents/ has no agents: add agents/<name>.py with `agent = define_agent(...)`")
        _check_authorize(config.authorize)
    _check_tasks(
        root, config
    )  # on every preset: a backend runs them where this host runs no Python, or `agent-unit task NAME` does
    if chosen.python_app and not config.server:
        authorize = [Import(config.authorize.partition(":")[0], source, 0)] if config.authorize else []
        found.add(_needs(root, [*_framework_modules(root, registry), *authorize], [], mapping))
    warnings = [
        f"{item.where} imports {item.top}, which no installed distribution provides, so the build does not "
        "vendor it: list its package in requirements.txt if the app needs it"
        for item in found.unmapped
    ]
    tasks, unscheduled = _tasks_report(chosen, config)
    warnings += unscheduled

    if output.exists():
        shutil.rmtree(output)  # only a folder a build wrote (checked above) or an empty one
    output.mkdir(parents=True)
    (output / MARKER).write_text(INCOMPLETE)  # until the output is proven to start
    home = output / chosen.app_path
    serves_mcp = True  # a host that runs no Python here proxies /mcp to its backend
    requirements: list[str] = []
    if chosen.python_app:
        progress("copying the project")
        _copy_source(root, home / chosen.app_folder)
        if generated is not None:  # beside the project's modules, as your own app's module is
            shutil.copytree(generated.folder, home / chosen.app_folder, dirs_exist_ok=True)
        requirements = _requirements(
            chosen,
            config,
            scheme,
            _project_requirements(root),
            found.distributions,
            generated.requirements if generated else (),
        )
        named = {distribution_name(requirement) for requirement in requirements}
        serves_mcp = "mcp" in named  # without the SDK, POST /mcp only answers 501: not a route to list
        if chosen.vendors:
            try:
                using = pip.installer(root)
            except PipError as exc:
                raise BuildError(str(exc)) from None
            progress(f"vendoring dependencies with {using}")
            alone = [requirement for name, requirement in sorted(found.alone.items()) if name not in named]
            _vendor(chosen, requirements, alone, home / "vendor", options, using)
        else:  # the host installs the packages; the runtime goes as it is here, beside the app
            _copy_runtime(home / chosen.app_folder)
            # and so does a package no index has (an adapter added from a folder): the host cannot install it
            _copy_alone([name for name in sorted(found.alone) if name not in named], home / chosen.app_folder)

    progress("rendering templates")
    loaders = [
        PackageLoader(package, "templates") for package in dict.fromkeys([chosen.template_package, "agent_unit_cli"])
    ]
    templates = Environment(loader=ChoiceLoader(loaders), undefined=StrictUndefined, keep_trailing_newline=True)
    templates.filters["py"] = repr  # Python literals in generated Python
    context = {
        "name": config.name,
        "version": agent_unit.__version__,
        "preset": name,
        "registry": registry,
        "storage": storage,
        "store_kind": store_kind(scheme),  # the store whose driver was vendored: a start with another says so
        "base_path": config.base_path,
        "authorize": config.authorize,
        "max_body_bytes": config.max_body_bytes,
        "allowed_origins": config.allowed_origins,
        "allowed_hosts": config.allowed_hosts,
        "host_guard": config.host_guard,  # a server app behind agent-unit's Host and Origin checks
        "a2a_default_agent": config.a2a_default_agent,
        "budget": config.budget,
        "retention": config.retention,
        "approval_timeout": config.approval_timeout,
        "require_answerer": config.require_answerer,
        "limits": None if config.limits is None else config.limits.model_dump(exclude_unset=True),
        "prices": None if config.prices is None else config.prices.model_dump(exclude_unset=True),
        "adapters": config.adapters,
        "python_version": f"{sys.version_info.major}.{sys.version_info.minor}",
        "app_path": chosen.app_path,
        "url": config.url,
        "ui": config.ui,
        "tasks": {name: {"schedule": task.schedule, "handler": task.handler} for name, task in config.tasks.items()},
        "temporal": config.temporal_table,
        "requirements": requirements,
        "server": None
        if config.server_app is None
        else dict(zip(("module", "attribute"), config.server_app.split(":"), strict=True)),
    }
    if chosen.context is not None:
        context |= chosen.context(config, options)
    written = []
    for folder in chosen.templates:
        for template_name in [name for name in templates.list_templates() if name.startswith(folder + "/")]:
            target = output / template_name.removeprefix(folder + "/").removesuffix(".j2")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(templates.get_template(template_name).render(**context))
            written.append(str(target.relative_to(output)))
            if target.suffix == ".py":
                try:
                    compile(target.read_text(), str(target), "exec")
                except SyntaxError as exc:
                    raise BuildError(
                        f"the generated {target.name} is not valid Python ({exc}): check the config values"
                    ) from None
    if chosen.finish is not None:
        try:
            step = Finish(root=root, output=output, context=context, options=options, progress=progress)
            written += chosen.finish(step)
            warnings += step.warnings
        except ValueError as exc:  # the preset refused something it found while finishing
            raise BuildError(str(exc)) from None
    notes = list(chosen.notes)
    if config.server:
        shown = generated.preset if generated else config.server_app  # a server preset by its name
        own = generated is not None and chosen.python_app  # else the host runs no Python: its own note
        notes.insert(0, generated.note if generated and own else chosen.server_note.format(server=repr(shown)))
    else:
        notes[:0] = chosen.agent_notes
    if chosen.start is not None:
        progress("starting the built app in a clean Python")
        try:
            driver = DRIVER_MODULES.get(STORE_DRIVERS.get(scheme, ""))
            skipped = check_starts(output, chosen.start(options), storage, [driver] if driver else [], scheme)
        except ValueError as exc:  # the marker still says incomplete
            raise BuildError(str(exc)) from None
        if skipped is not None:
            notes.append(f"The output was not started here to check it: {skipped}.")
    (output / MARKER).write_text(COMPLETE)
    return BuildResult(
        preset=name,
        output=output,
        agents=sorted(registry),
        routes=[] if config.server else routes(config.base_path, mcp=serves_mcp, ui=config.ui),
        files=[*sorted(written), *_copied(chosen)],
        run=chosen.run.format(output=_shown(output), name=config.name),
        notes=notes,
        warnings=warnings,
        tasks=tasks,
        server=generated.preset if generated else config.server_app,
    )


def _copied(preset: Preset) -> list[str]:
    """The folders the build copied or vendored into, for the summary."""
    if not preset.python_app:
        return []
    prefix = f"{preset.app_path}/" if preset.app_path else ""
    folders = [f"{prefix}{preset.app_folder}/" if preset.app_folder else f"{prefix}"]
    return [*folders, f"{prefix}vendor/"] if preset.vendors else folders


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
