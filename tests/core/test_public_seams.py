"""Modules of agent_unit talk through public names, so a third-party adapter or host can do what a built-in one does.

The check walks the source of every module of ``agent_unit`` (adapters, hosts and protocol
modules included), of ``agent_unit_cli`` and of ``examples/``, and fails naming ``file:line``
for an underscored name imported from another module of agent_unit, a private module imported
from outside its package, or an underscored attribute read or written on anything but ``self``
or ``cls`` that the module does not define itself. Dunder names are public.

A private module is private to the package holding it: ``agent_unit._clock`` is for every module
of ``agent_unit`` (``agent_unit.stores.sqlite`` included), ``agent_unit.stores._listen`` for those
of ``agent_unit.stores``. ``agent_unit_cli`` ships in the same wheel, at the same version, as the
runtime, so it may import agent_unit's private modules (``agent_unit._tasks``); it still uses no
underscored name of theirs. The examples stand for third-party code (an adapter, a user's app):
they import public modules only.

Which modules are public is decided here, in ``PUBLIC``: a top-level module of agent_unit is
either named there (the docs name it) or underscored, so a new internal module is named as one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agent_unit

PACKAGE = Path(agent_unit.__file__).parent
REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "agent_unit_cli"
CHECKED = [PACKAGE, CLI, REPO / "examples"]
SKIPPED = {".output", "node_modules", ".venv", "__pycache__"}  # builds and installs inside an example

# The top-level modules and packages of agent_unit the documentation names; every other one is
# underscored (``_clock.py``), as httpx and pydantic name theirs. Public names that live in an
# internal module (``Host``, ``RunEngine``, ``RunRecord``) are re-exported by ``agent_unit`` itself.
PUBLIC = {
    "adapters",  # README "Write an adapter": define_adapter; adapters.api is the adapter API
    "client",  # README "The HTTP API": from agent_unit.client import AgentClient
    "discovery",  # README "The engine": from agent_unit.discovery import discover_agents
    "env",  # README "Background work": from agent_unit.env import env, wait_until
    "errors",  # README: from agent_unit.errors (InterruptExpired...); journals name its types
    "hosts",  # README "Write a host": agent_unit.hosts.continuation, hosts.server.HOST...
    "http",  # README "What agent_unit exports": the HTTP app
    "run",  # README adapter API: agent_unit.run.current_step(), current_run()
    "runtime",  # README "What agent_unit exports": the engine layer (RunEngine, the records, Store)
    "stores",  # README "Stores", "What agent_unit exports": the Store protocol, open_store
    "telemetry",  # README "Observability": agent_unit.telemetry.configure(...)
    "temporal",  # README "Temporal"
    "testing",  # README "Test your agents": create_test_unit, assert_adapter, testing.adapters
}

# The protocol modules reach into the HTTP app's private _Api: removed when the protocol gateway lands.
KNOWN_HTTP: set[tuple[str, str]] = set()  # the protocol modules use the public gateway

# Underscored names that belong to a framework, not to agent_unit: the adapter has no public way.
FRAMEWORK_PRIVATES = {
    # LangGraph's graph.copy() drops the msgpack allowlist its strict checkpoint decoding needs.
    ("agent_unit/adapters/langgraph.py", "_serde_allowlist"),
    # openai-agents' handoff() keeps its target agent there; the adapter points it at its clone.
    ("agent_unit/adapters/openai_agents.py", "_agent_ref"),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    """``agent_unit/stores/sqlite.py`` -> ``agent_unit.stores.sqlite`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _own_names(tree: ast.Module) -> set[str]:
    """The names a module defines: its functions, classes, variables and ``self.``/``cls.`` attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return names


def _is_module(name: str) -> bool:
    """Whether ``name`` (``agent_unit.stores._listen``) is a module or package of agent_unit."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private_module_reached(importer: str, module: str) -> bool:
    """Whether importing ``module`` from ``importer`` reaches into a private module of another package.

    A private module (``stores/_listen.py``) is private to the package holding it: its siblings use it,
    and so does ``agent_unit_cli``, which ships with the runtime.
    """
    parts = module.split(".")
    for index, part in enumerate(parts):
        if _private(part):
            package = ".".join(parts[:index])
            if importer.split(".")[0] == "agent_unit_cli" and parts[0] == "agent_unit":
                return False  # the CLI ships with the runtime: one wheel, one version
            return not (importer == package or importer.startswith(package + "."))
    return False


def seam_violations(source: str, relative: str, module: str) -> list[tuple[int, str, str]]:
    """``(line, private name, what)`` for each use of another module's private in ``source``.

    ``relative`` is the file's path as reported; ``module`` its dotted name inside agent_unit
    (the package it is in decides relative imports and which private modules are its own).
    """
    tree = ast.parse(source, relative)
    own = _own_names(tree)
    is_package = relative.endswith("__init__.py")
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "agent_unit":
                target = node.module
            else:
                continue  # a third party's module: its privates are its own business
            if _private_module_reached(module, target):
                found.append((node.lineno, target.rpartition(".")[2], f"imports from the private module {target}"))
                continue
            for alias in node.names:
                if not _private(alias.name):
                    continue
                full = f"{target}.{alias.name}"
                if _is_module(full):
                    if _private_module_reached(module, full):
                        found.append((node.lineno, alias.name, f"imports the private module {full}"))
                else:
                    found.append((node.lineno, alias.name, f"imports {alias.name} from {target}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "agent_unit" and _private_module_reached(module, alias.name):
                    found.append((node.lineno, alias.name.rpartition(".")[2], f"imports {alias.name}"))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in own:
                continue
            found.append((node.lineno, node.attr, f"uses {ast.unparse(node)}"))
    return found


def _checked_files() -> list[Path]:
    found = (path for folder in CHECKED for path in folder.rglob("*.py"))
    return sorted(path for path in found if not SKIPPED & set(path.parts))


def _module_of(path: Path) -> str:
    if path.is_relative_to(PACKAGE):
        return _module_name(path)
    return ".".join(path.relative_to(REPO).with_suffix("").parts)  # an example: outside agent_unit


def test_no_module_of_agent_unit_uses_another_modules_private_names() -> None:
    allowed = KNOWN_HTTP | FRAMEWORK_PRIVATES
    problems = []
    used: set[tuple[str, str]] = set()
    for path in _checked_files():
        relative = path.relative_to(REPO).as_posix()
        for line, name, what in seam_violations(path.read_text(), relative, _module_of(path)):
            if (relative, name) in allowed:
                used.add((relative, name))
            else:
                problems.append(f"{relative}:{line}: {what}")
    assert not problems, "use (or add) a documented public name instead:\n" + "\n".join(problems)
    stale = sorted(allowed - used)
    assert not stale, f"these allowances are no longer used; remove them: {stale}"


def test_the_check_finds_a_private_import_a_private_module_and_a_private_attribute() -> None:
    source = (
        "from ..run import _current_step, Run\n"
        "from ..hosts._continue import continue_at\n"
        "from ..stores import _listen\n"
        "from agent_unit.stores._checkpoint import THREADS\n"
        "import agent_unit.stores._pg_pool\n"
        "def go(run, engine):\n"
        "    run._once(1)\n"
        "    engine._executions.clear()\n"
    )
    found = seam_violations(source, "agent_unit/adapters/mine.py", "agent_unit.adapters.mine")
    assert [(line, name) for line, name, _ in found] == [
        (1, "_current_step"),
        (2, "_continue"),
        (3, "_listen"),
        (4, "_checkpoint"),
        (5, "_pg_pool"),
        (7, "_once"),
        (8, "_executions"),
    ]


def test_the_check_allows_self_dunders_a_modules_own_privates_and_a_packages_private_modules() -> None:
    source = (
        "from ._listen import Listener\n"
        "from . import _checkpoint\n"
        "from .sqlite import __all__\n"
        "from strands.types._events import ModelStreamEvent\n"
        "_cache = {}\n"
        "class Store:\n"
        "    def __init__(self):\n"
        "        self._rows = []\n"
        "    def _load(self): ...\n"
        "    def merge(self, other):\n"
        "        other._load()\n"
        "        return self._rows + other._rows + list(_cache) + [other.__class__]\n"
    )
    assert seam_violations(source, "agent_unit/stores/mine.py", "agent_unit.stores.mine") == []


def test_the_check_lets_the_package_and_the_cli_import_private_modules_and_no_example() -> None:
    source = "from agent_unit._clock import ManualClock\nimport agent_unit._tasks\n"
    assert seam_violations(source, "agent_unit/stores/mine.py", "agent_unit.stores.mine") == []
    assert seam_violations(source, "agent_unit_cli/mine.py", "agent_unit_cli.mine") == []
    outside = seam_violations(source, "examples/adapter/mine.py", "examples.adapter.mine")
    assert [(line, name) for line, name, _ in outside] == [(1, "_clock"), (2, "_tasks")]
    named = "from agent_unit._tasks import _next\n"
    assert [name for _, name, _ in seam_violations(named, "agent_unit_cli/mine.py", "agent_unit_cli.mine")] == ["_next"]


def test_every_top_level_module_of_agent_unit_is_documented_or_named_as_internal() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")} | {
        path.parent.name for path in PACKAGE.glob("*/__init__.py")
    }
    unnamed = sorted(name for name in modules if not name.startswith("_") and name not in PUBLIC)
    assert not unnamed, (
        "name each internal module of agent_unit with a leading underscore (clock.py -> _clock.py), "
        f"or add it to PUBLIC with the docs that name it: {unnamed}"
    )
    assert not PUBLIC - modules, f"PUBLIC names modules agent_unit no longer has: {sorted(PUBLIC - modules)}"


def store_reads(source: str, relative: str) -> list[int]:
    """The lines of ``source`` that read or write a ``.store`` attribute, on anything."""
    tree = ast.parse(source, relative)
    return sorted({node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "store"})


def test_no_protocol_module_reads_the_store_the_engine_is_the_only_door_to_runs() -> None:
    problems = []
    for path in sorted((PACKAGE / "http").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        problems += [f"{relative}:{line}" for line in store_reads(path.read_text(), relative)]
    assert not problems, "read runs through the engine's public methods, not its store:\n" + "\n".join(problems)


def test_the_store_check_finds_a_store_read_through_any_name() -> None:
    source = "async def go(self, engine):\n    await engine.store.last_seq('r')\n    s = self.engine.store\n"
    assert store_reads(source, "agent_unit/http/mine.py") == [2, 3]
