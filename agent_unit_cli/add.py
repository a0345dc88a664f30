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

from agent_unit.adapters import ENTRY_POINT_GROUP, load_adapter

__all__ = ["AddError", "adapter_references", "add_to_config", "install", "package_name", "uninstall"]


class AddError(Exception):
    """The package cannot be added; nothing was changed."""


def package_name(spec: str) -> str:
    """The distribution name of ``spec``: a requirement (``pkg==1.0``) or a local path."""
    path = Path(spec)
    if path.exists():
        pyproject = path / "pyproject.toml"
        if not pyproject.is_file():
            raise AddError(f"{spec} has no pyproject.toml: point to a package folder or give a package name")
        return str(tomllib.loads(pyproject.read_text())["project"]["name"])
    return re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


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
    """Add ``references`` to ``adapters`` in the project's configuration; the file and what was added."""
    own, pyproject = root / "agent-unit.toml", root / "pyproject.toml"
    if own.is_file() or not (pyproject.is_file() and "[tool.agent-unit]" in pyproject.read_text()):
        path, section = own, None
    else:
        path, section = pyproject, "[tool.agent-unit]"
    text = path.read_text() if path.exists() else ""
    values = tomllib.loads(text) if text else {}
    current = values.get("tool", {}).get("agent-unit", {}) if section else values
    new = [reference for reference in references if reference not in current.get("adapters", [])]
    if not new:
        return path, []
    lines = text.splitlines(keepends=True)
    start = next(i + 1 for i, line in enumerate(lines) if line.strip() == section) if section else 0
    end = next((i for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    for i in range(start, end):
        match = re.match(r"^(\s*adapters\s*=\s*\[)(.*)(\]\s*(#.*)?)$", lines[i].rstrip("\n"))
        if match:  # a one-line list: append to it
            inner = match.group(2).strip().rstrip(",")
            items = ", ".join([inner, *[f'"{ref}"' for ref in new]] if inner else [f'"{ref}"' for ref in new])
            lines[i] = f"{match.group(1)}{items}{match.group(3)}\n"
            break
        if re.match(r"^\s*adapters\s*=", lines[i]):
            raise AddError(f"{path.name}: write `adapters` on one line, or add {new} to it by hand")
    else:
        entry = "adapters = [" + ", ".join(f'"{ref}"' for ref in new) + "]\n"
        at = end
        while at > start and not lines[at - 1].strip():
            at -= 1  # keep blank lines before the next table
        if at > 0 and not lines[at - 1].endswith("\n"):
            lines[at - 1] += "\n"
        lines.insert(at, entry)
    path.write_text("".join(lines))
    tomllib.loads(path.read_text())  # never leave a broken file
    return path, new
