"""Find the agents of a project: every module in ``agents/`` is an agent named after the file.

``agents/refund.py`` is ``refund``; ``agents/support/__init__.py`` is ``support``. A module's
``agent`` attribute is the agent; without one, the single module-level value that is
recognised as an agent. Files and folders starting with ``_`` are helpers, not agents.

Modules are imported under a private package name (``_agent_unit_agents.<name>``), never
as ``agents``: the OpenAI Agents SDK owns the top-level name ``agents``, and relative
imports between files of ``agents/`` keep working.
"""

from __future__ import annotations

import importlib
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._agent import Agent, FrameworkAgent
from .errors import AgentBroken, DiscoveryError

__all__ = ["Discovered", "agent_sources", "discover_agents", "discover_project", "load_registry"]

PACKAGE = "_agent_unit_agents"

Resolve = Callable[[str, Any], Agent | None]


def _resolver(adapters: Sequence[Any]) -> Resolve:
    """Recognise ``define_agent`` agents, and framework agents through the adapters (loaded once, when needed)."""
    candidates: list[Any] | None = None

    def resolve(name: str, value: Any) -> Agent | None:
        nonlocal candidates
        if isinstance(value, Agent):
            return value
        from .adapters import adapters as find_adapters
        from .adapters import resolve_agent

        if candidates is None:
            candidates = find_adapters(adapters)
        return resolve_agent(name, value, candidates)

    return resolve


def _module_names(directory: Path) -> list[str]:
    names = []
    for path in sorted(directory.iterdir()):
        if path.name.startswith(("_", ".")):
            continue
        if path.is_file() and path.suffix == ".py":
            names.append(path.stem)
        elif path.is_dir() and (path / "__init__.py").is_file():
            names.append(path.name)
    return names


def _import(directory: Path, name: str) -> types.ModuleType:
    package = sys.modules.get(PACKAGE)
    if package is None or list(getattr(package, "__path__", [])) != [str(directory)]:
        for loaded in [key for key in sys.modules if key == PACKAGE or key.startswith(PACKAGE + ".")]:
            del sys.modules[loaded]
        package = types.ModuleType(PACKAGE)
        package.__path__ = [str(directory)]
        sys.modules[PACKAGE] = package
    return importlib.import_module(f"{PACKAGE}.{name}")


@dataclass(slots=True)
class Discovered:
    """What :func:`discover_project` found: the agents that load, and the files that do not.

    ``broken`` maps each agent name whose file failed to an :class:`AgentBroken` whose
    message is the one :func:`discover_agents` raises, and whose ``details`` hold the
    ``file`` and ``line`` at fault (``line`` is ``None`` where the file imports but defines no agent).
    """

    agents: dict[str, Agent] = field(default_factory=dict)
    broken: dict[str, AgentBroken] = field(default_factory=dict)


def discover_agents(
    root: str | Path = ".", *, directory: str = "agents", resolve: Resolve | None = None, adapters: Sequence[Any] = ()
) -> dict[str, Agent]:
    """Import ``<root>/agents/*`` and return ``{name: agent}``; ``DiscoveryError`` names the file at fault.

    ``resolve(name, value)`` turns a module value into an :class:`Agent` (adapters plug in
    here); by default ``define_agent`` agents and whatever the ``adapters`` (then the
    installed ones) recognise.
    """
    found = discover_project(root, directory=directory, resolve=resolve, adapters=adapters)
    for broken in found.broken.values():
        raise DiscoveryError(broken.message, details=broken.details) from broken.__cause__
    return found.agents


def discover_project(
    root: str | Path = ".", *, directory: str = "agents", resolve: Resolve | None = None, adapters: Sequence[Any] = ()
) -> Discovered:
    """As :func:`discover_agents`, but a file that fails is reported in ``broken``, not raised.

    For ``agent-unit dev``: one agent file with a mistake must not take the other agents down.
    A missing ``agents/`` folder, or an adapter that cannot load, still raises.
    """
    resolve = resolve or _resolver(adapters)
    folder = (Path(root) / directory).resolve()
    if not folder.is_dir():
        raise DiscoveryError(
            f"no {directory}/ folder in {Path(root).resolve()}: create {directory}/<name>.py with an agent"
        )
    root_path = str(folder.parent)
    if root_path not in sys.path:
        sys.path.insert(0, root_path)  # so agents can import the project's own modules
    found = Discovered()
    for name in _module_names(folder):
        shown = f"{directory}/{name}.py" if (folder / f"{name}.py").exists() else f"{directory}/{name}/__init__.py"
        try:
            module = _import(folder, name)
        except Exception as exc:  # noqa: BLE001 - any error of the user's file: reported with its file and line
            where = _raised_at(exc, folder.parent)
            broken = AgentBroken(
                f"{shown} failed to import: {type(exc).__name__}: {exc}"
                + (f" (raised at {where[0]}:{where[1]})" if where else ""),
                details={"file": where[0] if where else shown, "line": where[1] if where else None},
            )
            broken.__cause__ = exc
            found.broken[name] = broken
            continue
        try:
            found.agents[name] = _agent_of(module, name, shown, resolve)
        except DiscoveryError as exc:
            found.broken[name] = AgentBroken(exc.message, details={"file": shown, "line": None})
    return found


def _raised_at(exc: BaseException, root: Path) -> tuple[str, int] | None:
    """``(file, line)`` of the innermost frame in the user's project that raised ``exc``.

    An agent often fails in a module it imports (``lib/db.py`` reading a setting), so the
    agent's own file alone sends the user to the wrong place. Frames outside ``root`` (the
    standard library, installed packages) and in a virtual environment inside it are skipped.
    """
    found: tuple[str, int] | None = None
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        found = (exc.filename, exc.lineno)  # the file that does not parse never ran a frame
    else:
        for frame, line in traceback.walk_tb(exc.__traceback__):
            if _in_project(Path(frame.f_code.co_filename), root):
                found = (frame.f_code.co_filename, line)
    if found is None or not _in_project(Path(found[0]), root):
        return None
    return Path(found[0]).resolve().relative_to(root).as_posix(), found[1]


def _in_project(path: Path, root: Path) -> bool:
    try:
        parts = path.resolve().relative_to(root).parts
    except ValueError:
        return False
    return not any(part in ("site-packages", ".venv", "venv") for part in parts)


def _agent_of(module: types.ModuleType, name: str, shown: str, resolve: Resolve) -> Agent:
    """The module's one agent: ``agent``, else its single agent value.

    A second agent value beside ``agent`` is refused, not dropped: the file is served as one
    agent, so the other would silently never be served. A helper agent stays private with a
    leading ``_``.
    """
    has_agent = hasattr(module, "agent")
    found: dict[str, Agent] = {}
    # `agent = define_agent(framework_agent, ...)`: the framework's agent is `agent` itself too
    itself = module.agent.value if has_agent and isinstance(module.agent, FrameworkAgent) else None
    if has_agent:
        agent = resolve(name, module.agent)
        if agent is None:
            kind = type(module.agent if itself is None else itself).__name__
            raise DiscoveryError(
                f"{shown}: `agent` is a {kind}, which no adapter recognises: "
                "use define_agent(...) or an agent of a supported framework"
            )
        found["agent"] = agent
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr == "agent" or (has_agent and (value is module.agent or value is itself)):
            continue  # private helpers, and other names for `agent` itself
        if (agent := resolve(name, value)) is not None:
            found[attr] = agent
    if not found:
        raise DiscoveryError(f"{shown} defines no agent: add `agent = define_agent(...)` (or export a framework agent)")
    if len(found) > 1:
        advice = "name the one to serve `agent`"
        if has_agent:
            advice = "serve one agent per file: move the others to their own files in agents/"
        raise DiscoveryError(
            f"{shown} defines several agents ({', '.join(sorted(found))}): {advice} "
            "(a helper agent's name starts with _)"
        )
    return _named(found["agent"] if has_agent else next(iter(found.values())), name)


def _named(agent: Agent, name: str) -> Agent:
    if agent.name is None:
        agent.name = name
    return agent


def agent_sources(
    root: str | Path = ".", *, directory: str = "agents", adapters: Sequence[Any] = ()
) -> dict[str, tuple[str, str]]:
    """``{name: (module, attribute)}`` of the agents :func:`discover_agents` finds: a build's registry."""
    agents = discover_agents(root, directory=directory, adapters=adapters)
    sources = {}
    for name, agent in agents.items():
        module = sys.modules[f"{PACKAGE}.{name}"]
        source = getattr(agent, "value", agent)  # a framework agent: the value its adapter wraps
        attribute = next(attr for attr, value in vars(module).items() if value is source)
        sources[name] = (name, attribute)
    return sources


def load_registry(directory: str | Path, registry: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Import exactly the agents a build listed (no directory scan at start-up).

    The values are as the modules define them; the engine resolves framework agents.
    """
    folder = Path(directory).resolve()
    return {
        name: getattr(_import(folder, module_name), attribute) for name, (module_name, attribute) in registry.items()
    }
