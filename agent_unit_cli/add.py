"""``agent-unit add <package>``: add an adapter package to the project, or say agent-unit has it.

A framework agent-unit adapts itself (``pydantic-ai``, ``langgraph``...) needs no adapter
package: ``add`` installs agent-unit's extra for it, or says it is already there. Any other
package is looked at before anything is installed: pip builds or downloads its wheel alone
(no dependencies) into a temporary folder, and the wheel's ``entry_points.txt`` must name an
adapter in the ``agent_unit.adapters`` group. Only then is it installed, into the running
interpreter's environment (with ``uv pip`` when the project uses uv); if its adapter then
fails to load, every distribution the install added is removed again, so a refused ``add``
leaves nothing behind. The configuration is edited as text, so comments and formatting are kept.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from agent_unit.adapters import ENTRY_POINT_GROUP, load_adapter
from agent_unit.errors import AddError

from .frameworks import FRAMEWORKS

__all__ = [
    "Candidate",
    "adapter_references",
    "add_to_config",
    "candidate",
    "distributions",
    "install",
    "uninstall",
    "with_extras",
]


def distributions() -> set[str]:
    """The (normalised) names of the distributions installed in this environment."""
    return {
        canonicalize_name(dist.metadata["Name"]) for dist in importlib.metadata.distributions() if dist.metadata["Name"]
    }


def _installer(root: Path) -> list[str]:
    if (root / "uv.lock").exists() and shutil.which("uv"):
        return ["uv", "pip", "install", "--python", sys.executable]
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


def install(specs: list[str], root: Path) -> None:
    done = subprocess.run([*_installer(root), *specs], capture_output=True, text=True)
    if done.returncode != 0:
        raise AddError(f"installing {' '.join(specs)} failed:\n{(done.stderr or done.stdout).strip()[-1500:]}")
    importlib.invalidate_caches()


def uninstall(names: list[str]) -> None:
    if names:
        command = [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *names]
        subprocess.run(command, capture_output=True)
        importlib.invalidate_caches()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A package looked at before installing it: its name, its wheel, and the adapters it declares."""

    name: str
    wheel: Path
    references: list[str]


def candidate(spec: str, folder: Path) -> Candidate:
    """Get the wheel of ``spec`` alone into ``folder`` (installing nothing) and read its entry points.

    Raises ``AddError`` when pip cannot get it, or when it declares no adapter: then the
    message lists the frameworks agent-unit adapts itself.
    """
    path = Path(spec)
    if spec.startswith((".", "/", "~")) and not path.exists():
        raise AddError(f"no folder {spec}: give an adapter package's folder or its name on the package index")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*command, "--wheel-dir", str(folder), spec], capture_output=True, text=True)
    if done.returncode != 0:
        raise AddError(f"pip cannot get {spec}:\n{(done.stderr or done.stdout).strip()[-1500:]}")
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise AddError(f"pip did not give one wheel for {spec} (got {len(wheels)})")
    wheel = wheels[0]
    with zipfile.ZipFile(wheel) as archive:
        info = next((name.split("/")[0] for name in archive.namelist() if name.endswith(".dist-info/METADATA")), None)
        if info is None:
            raise AddError(f"{wheel.name} is not a wheel (no .dist-info/METADATA)")
        distribution = importlib.metadata.PathDistribution(zipfile.Path(archive, info + "/"))
        name = distribution.metadata["Name"] or wheel.name.split("-")[0]
        references = [entry.value for entry in distribution.entry_points if entry.group == ENTRY_POINT_GROUP]
    if not references:
        builtin = ", ".join(framework.packages[0] for framework in FRAMEWORKS)
        raise AddError(
            f"{name} is not an agent-unit adapter: it has no entry point in the {ENTRY_POINT_GROUP!r} group, "
            f"so nothing was installed. agent-unit adapts these frameworks itself: {builtin} "
            f"(e.g. agent-unit add {FRAMEWORKS[0].packages[0]})"
        )
    return Candidate(name, wheel, references)


def with_extras(spec: str, wheel: Path) -> str:
    """The wheel to install for ``spec``, with the extras the requirement asked for (``pkg[x]``)."""
    try:
        extras = sorted(Requirement(spec).extras)
    except InvalidRequirement:
        extras = []
    return f"{wheel}[{','.join(extras)}]" if extras else str(wheel)


def adapter_references(name: str) -> list[str]:
    """The ``module:attribute`` of each adapter the distribution ``name`` exposes."""
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise AddError(f"{name} is not installed") from None
    references = []
    for entry in distribution.entry_points:
        if entry.group == ENTRY_POINT_GROUP:
            load_adapter(entry.value)  # raises AdapterError unless it names an adapter
            references.append(entry.value)
    if not references:
        raise AddError(f"{name} is not an agent-unit adapter: it has no entry point in the {ENTRY_POINT_GROUP!r} group")
    return references


def add_to_config(root: Path, references: list[str]) -> tuple[Path, list[str]]:
    """Add ``references`` to ``adapters`` in the project's configuration; the file and what was added.

    The file is edited as text (comments, order and tables stay as they are), and the result
    is parsed and checked before it is written.
    """
    own, pyproject = root / "agent-unit.toml", root / "pyproject.toml"
    in_pyproject = not own.is_file() and pyproject.is_file() and "agent-unit" in _read(pyproject).get("tool", {})
    path = pyproject if in_pyproject else own
    text = path.read_text() if path.exists() else ""

    def adapters_of(source: str) -> list[str]:
        values = tomllib.loads(source)
        table = values.get("tool", {}).get("agent-unit", {}) if in_pyproject else values
        return list(table.get("adapters", []))

    current = adapters_of(text)
    new = [reference for reference in references if reference not in current]
    if not new:
        return path, []
    listed = ", ".join(f'"{reference}"' for reference in new)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    header = (
        next((i for i, line in enumerate(lines) if line.split("#")[0].strip() == "[tool.agent-unit]"), None)
        if in_pyproject
        else -1
    )
    if header is None:  # only subtables like [tool.agent-unit.tasks.x]: the table itself may follow them
        lines += ["\n", "[tool.agent-unit]\n", f"adapters = [{listed}]\n"]
    else:
        start = header + 1
        end = next((i for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        for i in range(start, end):
            match = re.match(r"^(\s*adapters\s*=\s*\[)([^#\]]*)(\]\s*(#.*)?)$", lines[i].rstrip("\n"))
            if match:  # a one-line list: append to it
                inner = match.group(2).strip().rstrip(",")
                lines[i] = f"{match.group(1)}{inner + ', ' if inner else ''}{listed}{match.group(3)}\n"
                break
            if re.match(r"^\s*adapters\s*=", lines[i]):
                raise AddError(f"{path.name}: write `adapters` on one line, or add {new} to it by hand")
        else:
            at = end
            while at > start and not lines[at - 1].strip():
                at -= 1  # keep blank lines before the next table
            lines.insert(at, f"adapters = [{listed}]\n")
    result = "".join(lines)
    try:
        added = adapters_of(result)
    except tomllib.TOMLDecodeError as exc:
        raise AddError(f"editing {path.name} would break it ({exc}): add {new} to `adapters` by hand") from None
    if added != [*current, *new]:
        raise AddError(f"{path.name} has a layout this command does not edit safely: add {new} to `adapters` by hand")
    path.write_text(result)
    return path, new


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise AddError(f"{path.name} is not valid TOML: {exc}") from None
