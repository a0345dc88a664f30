"""What a build vendors besides the runtime: the distributions the project's code needs.

``agent-unit dev`` runs where everything the agents import is installed; a build carries only
what it vendors. So the build reads the ``import`` statements of the project's own modules
(their syntax trees: nothing is run), adds the modules its configuration names (adapters,
``authorize``, tasks) and the frameworks its agents are values of, and maps each third-party
module to the distribution that installed it here (``importlib.metadata``), at the version
installed here: what ran in ``dev`` is what ships.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

__all__ = ["Import", "Needs", "distribution_name", "module_paths", "needs", "project_imports"]

OURS = {"agent_unit", "agent_unit_cli", "_agent_unit_agents"}
"""The runtime is copied into every build; the CLI never is."""
OWN_DISTRIBUTIONS = {"agent-unit"}


@dataclass(frozen=True)
class Import:
    """One imported module: its dotted name and where it is imported (``file`` relative to the project)."""

    module: str
    file: str
    line: int

    @property
    def top(self) -> str:
        return self.module.split(".", 1)[0]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Needs:
    """What the project needs: requirements by distribution name, and the modules the build cannot vendor."""

    distributions: dict[str, str] = field(default_factory=dict)  # name: requirement, as installed here
    alone: dict[str, str] = field(default_factory=dict)  # name: requirement installed without its dependencies
    unmapped: list[Import] = field(default_factory=list)  # importable here, but from no distribution
    missing: list[Import] = field(default_factory=list)  # not installed here

    def add(self, other: Needs) -> None:
        self.distributions |= other.distributions
        self.alone |= other.alone
        self.unmapped += other.unmapped
        self.missing += other.missing


def distribution_name(requirement: str) -> str:
    """The normalized distribution name of a requirement line (``Pydantic_AI[openai]>=1`` is ``pydantic-ai``)."""
    name = re.split(r"[\s<>=!~;\[@(]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


class _Imports(ast.NodeVisitor):
    """The absolute imports of one module, except those it guards (``try/except ImportError``, ``TYPE_CHECKING``)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.found: list[Import] = []

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [Import(alias.name, self.file, node.lineno) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:  # relative imports are the project's own
            self.found += [Import(f"{node.module}.{alias.name}", self.file, node.lineno) for alias in node.names]

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        guarded = any(_catches_import_error(handler.type) for handler in node.handlers)
        for statement in node.body if not guarded else ():
            self.visit(statement)
        for child in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(child)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self.visit_Try(node)  # the same fields

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
        for child in node.body if name != "TYPE_CHECKING" else ():
            self.visit(child)
        for child in node.orelse:
            self.visit(child)


def _catches_import_error(kind: ast.expr | None) -> bool:
    if kind is None:
        return True
    names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    caught = {name.id if isinstance(name, ast.Name) else getattr(name, "attr", "") for name in names}
    return bool(caught & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def project_imports(root: Path, sources: Iterable[Path]) -> list[Import]:
    """Every module imported by the ``.py`` files of ``sources`` (files and folders under ``root``)."""
    found: list[Import] = []
    for source in sources:
        files = [source] if source.is_file() else sorted(source.rglob("*.py"))
        for path in files:
            if "__pycache__" in path.parts:
                continue
            shown = path.relative_to(root).as_posix()
            try:
                tree = ast.parse(path.read_bytes(), filename=shown)
            except (SyntaxError, ValueError):
                continue  # importing it reports the error, with its line
            visitor = _Imports(shown)
            visitor.visit(tree)
            found += visitor.found
    return found


def _ships(distribution: str, module: str) -> bool:
    """Whether ``distribution`` installed ``module`` (for a namespace package several share, like ``google``)."""
    path = "/".join(module.split(".")[:2])
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(str(file).startswith(path + "/") or str(file) == path + ".py" for file in files)


def needs(
    imports: Iterable[Import],
    own: set[str],
    distributions: Iterable[str] = (),
    mapping: Mapping[str, list[str]] | None = None,
) -> Needs:
    """The distributions (at their installed versions) behind ``imports`` and ``distributions``.

    ``own`` is the project's own top-level modules. A module from no distribution is
    ``unmapped`` when it can be imported here (a path entry, an editable install) and
    ``missing`` when it cannot. ``mapping``: ``importlib.metadata.packages_distributions()``,
    read once by a caller that asks several times (it reads every installed distribution's files).
    """
    mapping = importlib.metadata.packages_distributions() if mapping is None else mapping
    result = Needs()
    names: set[str] = set(distributions)
    for found in imports:
        top = found.top
        if top in sys.stdlib_module_names or top in own or top in OURS:
            continue
        candidates = mapping.get(top, [])
        if len(candidates) > 1:
            candidates = [name for name in candidates if _ships(name, found.module)] or candidates
        if candidates:
            names.update(candidates)
        elif _importable(top):
            result.unmapped.append(found)
        else:
            result.missing.append(found)
    pending = sorted(names)
    while pending:
        try:
            distribution = importlib.metadata.distribution(pending.pop())
        except importlib.metadata.PackageNotFoundError:
            continue
        name = distribution_name(distribution.metadata["Name"])
        if name in OWN_DISTRIBUTIONS or name in result.distributions or name in result.alone:
            continue
        requirement, local = _requirement(distribution, name)
        dependencies = _dependencies(distribution)
        if local or OWN_DISTRIBUTIONS & set(dependencies):
            # pip cannot resolve it (a folder; or agent-unit, which the build copies and no index has):
            # it goes in alone, and its dependencies as what they are here
            result.alone[name] = requirement
            pending += [dependency for dependency in dependencies if dependency not in OWN_DISTRIBUTIONS]
        else:
            result.distributions[name] = requirement
    return result


def _requirement(distribution: importlib.metadata.Distribution, name: str) -> tuple[str, bool]:
    """``name==version`` as installed here, or where it was installed from (PEP 610); and whether that is a folder."""
    direct = json.loads(distribution.read_text("direct_url.json") or "{}")
    url = direct.get("url")
    if not url:
        return f"{name}=={distribution.version}", False
    if "vcs_info" in direct:
        vcs = direct["vcs_info"]
        return f"{name} @ {vcs['vcs']}+{url}@{vcs['commit_id']}", False
    return f"{name} @ {url}", "dir_info" in direct


def _dependencies(distribution: importlib.metadata.Distribution) -> list[str]:
    """The distributions ``distribution`` requires here (its extras' left out)."""
    names = []
    for line in distribution.requires or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(distribution_name(requirement.name))
    return names


def _importable(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a module in sys.modules without a spec: it was imported
        return True


def module_paths(name: str) -> list[Path]:
    """Where the top-level modules of the installed distribution ``name`` live here: a package's
    folder or a module's file. A host that installs packages from an index (Cloudflare) cannot
    install one that no index has (a folder, or a package that needs agent-unit, which the build
    copies), so the build copies these beside the app, as it copies the runtime."""
    tops = sorted(top for top, names in importlib.metadata.packages_distributions().items() if name in names)
    found: list[Path] = []
    for top in tops:
        if top in OURS or top.startswith("_"):
            continue
        spec = importlib.util.find_spec(top)
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found.extend(Path(location) for location in spec.submodule_search_locations)
        elif spec.origin:
            found.append(Path(spec.origin))
    return found
