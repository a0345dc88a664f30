"""``agent-unit build``: render a preset's output for the project's agents.

The build discovers the agents once and writes their registry into the output, copies the
project's Python source, vendors the runtime and the project's dependencies with pip, and
renders the preset's templates with Jinja2.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

import agent_unit
from agent_unit.discovery import agent_sources
from agent_unit.errors import DiscoveryError

from .config import Config
from .presets import PRESETS, BuildOptions, Finish, Preset

__all__ = ["BuildError", "BuildResult", "build"]

# What a built server needs at run time (the CLI's own dependencies stay out).
RUNTIME_REQUIREMENTS = ("pydantic", "starlette", "jsonschema", "uvicorn", "ag-ui-protocol")
STORE_DRIVERS = {"redis": "redis", "rediss": "redis", "postgres": "psycopg[binary]", "postgresql": "psycopg[binary]"}
STORE_DRIVERS |= {"dynamodb": "boto3"}
"""The driver a built app needs for its storage URL's scheme (pinned to the version installed here)."""


def _store_driver(storage: str) -> list[str]:
    driver = STORE_DRIVERS.get(storage.split(":", 1)[0].lower())
    if driver is None:
        return []
    name = driver.split("[", 1)[0]
    try:
        return [f"{driver}=={importlib.metadata.version(name)}"]
    except importlib.metadata.PackageNotFoundError:
        return [driver]


def _pinned(name: str) -> str:
    """``name`` at the version installed here (the one tested with), or unpinned when it is not installed."""
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


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
SKIP = {".output", ".git", ".agent-unit", "__pycache__", "node_modules", "dist", "build", "tests", ".venv", "venv"}


class BuildError(Exception):
    """The build cannot go on; the message says what to change."""


@dataclass
class BuildResult:
    preset: str
    output: Path
    agents: list[str]
    routes: list[str]
    files: list[str] = field(default_factory=list)
    run: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "output": str(self.output),
            "agents": self.agents,
            "routes": self.routes,
            "files": self.files,
            "run": self.run,
            "notes": self.notes,
        }


def routes(base_path: str, *, mcp: bool = True) -> list[str]:
    """The public routes under ``base_path``; ``POST /mcp`` only where it is served (``mcp``)."""
    prefix = base_path.rstrip("/")
    listed = [
        f"GET    {prefix}/agents",
        f"POST   {prefix}/agents/{{name}}/runs",
        f"GET    {prefix}/runs",
        f"GET    {prefix}/runs/{{id}}",
        f"GET    {prefix}/runs/{{id}}/events",
        f"POST   {prefix}/runs/{{id}}/resume",
        f"POST   {prefix}/runs/{{id}}/cancel",
        f"DELETE {prefix}/runs/{{id}}",
        f"POST   {prefix}/agents/{{name}}/ag-ui",
        f"POST   {prefix}/mcp",
        f"POST   {prefix}/a2a",
        f"GET    {prefix}/.well-known/agent-card.json",
    ]
    return [route for route in listed if mcp or not route.endswith("/mcp")]


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


def _vendor(preset: Preset, requirements: list[str], destination: Path, options: BuildOptions) -> None:
    pinned = [_pinned(name) for name in (*RUNTIME_REQUIREMENTS, *preset.requirements)]
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--target",
        str(destination),
        *pinned,
        *requirements,
    ]
    if preset.pip_platform is not None:  # the host's platform, not this machine's
        command += preset.pip_platform(options)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"pip could not install the dependencies:\n{done.stderr.strip()[-2000:]}")
    shutil.copytree(
        Path(agent_unit.__file__).parent,
        destination / "agent_unit",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )


def build(
    root: Path,
    config: Config,
    *,
    preset: str | None = None,
    out: Path | None = None,
    options: BuildOptions | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> BuildResult:
    """Build ``root``'s agents with ``preset`` into ``out``; raise :class:`BuildError` on any problem."""
    options = options or BuildOptions()
    name = preset or config.preset
    chosen = PRESETS.get(name)
    if chosen is None:
        raise BuildError(f"unknown preset {name!r}: use one of {', '.join(sorted(PRESETS))} (agent-unit presets)")
    storage = config.storage or "sqlite:///.agent-unit/agent-unit.db"
    if chosen.serverless and storage.split(":", 1)[0] in ("sqlite", "memory"):
        raise BuildError(
            f"the {name} preset needs storage that every invocation shares, not {storage.split(':')[0]}: "
            'set storage = "redis://...", "postgres://..." or "dynamodb://table?region=..." in agent-unit.toml'
        )
    if chosen.check is not None:
        try:
            chosen.check(config, options)
        except ValueError as exc:
            raise BuildError(str(exc)) from None
    root = root.resolve()
    output = (out or root / chosen.output).resolve()
    if root == output or output in root.parents:
        raise BuildError(f"--out {output} would overwrite the project: choose a new folder, like .output/")
    for source in _sources(root):
        if output == source or source in output.parents:
            raise BuildError(
                f"--out {output} is inside the project's source ({source.name}): choose .output/ or a new folder"
            )
    ours = output == root / ".output" or (root / ".output") in output.parents or (output / MARKER).exists()
    if output.exists() and any(output.iterdir()) and not ours:
        raise BuildError(f"--out {output} is not empty and was not written by agent-unit build: choose a new folder")

    progress("discovering agents")
    try:
        registry = agent_sources(root, adapters=config.adapters)
    except DiscoveryError as exc:
        raise BuildError(exc.message) from None
    if not registry:
        raise BuildError("agents/ has no agents: add agents/<name>.py with `agent = define_agent(...)`")

    if output.exists():
        shutil.rmtree(output)  # only a folder a build wrote (checked above) or an empty one
    output.mkdir(parents=True)
    home = output / chosen.app_path
    serves_mcp = True  # a host that runs no Python here (netlify) proxies /mcp to its backend
    if chosen.python_app:
        progress("copying the project")
        _copy_source(root, home / "app")
        progress("vendoring dependencies with pip")
        requirements = _project_requirements(root)
        mcp_sdk = _mcp(config, requirements)
        serves_mcp = bool(mcp_sdk)  # without the SDK, POST /mcp only answers 501: not a route to list
        _vendor(chosen, [*_store_driver(storage), *mcp_sdk, *requirements], home / "vendor", options)

    progress("rendering templates")
    templates = Environment(
        loader=PackageLoader("agent_unit_cli", "templates"), undefined=StrictUndefined, keep_trailing_newline=True
    )
    templates.filters["py"] = repr  # Python literals in generated Python
    context = {
        "name": config.name,
        "version": agent_unit.__version__,
        "preset": name,
        "registry": registry,
        "storage": storage,
        "base_path": config.base_path,
        "authorize": config.authorize,
        "max_body_bytes": config.max_body_bytes,
        "allowed_origins": config.allowed_origins,
        "a2a_default_agent": config.a2a_default_agent,
        "budget": config.budget,
        "retention": config.retention,
        "adapters": config.adapters,
        "python_version": f"{sys.version_info.major}.{sys.version_info.minor}",
        "app_path": chosen.app_path,
        "url": config.url,
        "ui": config.ui,
    }
    if chosen.context is not None:
        context |= chosen.context(config, options)
    written = []
    for folder in chosen.templates:
        for template_name in templates.list_templates(filter_func=lambda n, f=folder: n.startswith(f + "/")):
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
    (output / MARKER).write_text("written by agent-unit build: the next build replaces this folder\n")
    if chosen.finish is not None:
        try:
            step = Finish(root=root, output=output, context=context, options=options, progress=progress)
            written += chosen.finish(step)
        except ValueError as exc:  # the preset refused something it found while finishing
            raise BuildError(str(exc)) from None
    prefix = f"{chosen.app_path}/" if chosen.app_path else ""
    return BuildResult(
        preset=name,
        output=output,
        agents=sorted(registry),
        routes=routes(config.base_path, mcp=serves_mcp),
        files=[*sorted(written), *([f"{prefix}app/", f"{prefix}vendor/"] if chosen.python_app else [])],
        run=chosen.run.format(output=_shown(output), name=config.name),
        notes=list(chosen.notes),
    )


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
