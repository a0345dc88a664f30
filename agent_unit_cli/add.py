"""``agent-unit add <package>``: install an adapter package and add it to the configuration.

The package is installed into the running interpreter's environment (with ``uv pip`` when the
project uses uv). It must expose an adapter through the ``agent_unit.adapters`` entry-point
group; otherwise it is uninstalled again (if this command installed it) and nothing is
changed. The configuration is edited as text, so comments and formatting are kept.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from agent_unit.adapters import ENTRY_POINT_GROUP, load_adapter
from agent_unit.errors import AddError

__all__ = ["adapter_references", "add_to_config", "install", "package_name", "uninstall"]


def package_name(spec: str) -> str:
    """The distribution name of ``spec``: a requirement (``pkg==1.0``) or a local path."""
    path = Path(spec)
    if path.exists():
        pyproject = path / "pyproject.toml"
        if not pyproject.is_file():
            raise AddError(f"{spec} has no pyproject.toml: point to a package folder or give a package name")
        return str(tomllib.loads(pyproject.read_text())["project"]["name"])
    return re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0]


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _installer(root: Path) -> list[str]:
    if (root / "uv.lock").exists() and shutil.which("uv"):
        return ["uv", "pip", "install", "--python", sys.executable]
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


def install(spec: str, root: Path) -> None:
    done = subprocess.run([*_installer(root), spec], capture_output=True, text=True)
    if done.returncode != 0:
        raise AddError(f"installing {spec} failed:\n{(done.stderr or done.stdout).strip()[-1500:]}")
    importlib.invalidate_caches()


def uninstall(name: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", name], capture_output=True)


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
