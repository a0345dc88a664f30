"""The Cloudflare host's runtime lives in one package, ``agent_unit/hosts/cloudflare/``.

A module that imports what only a Worker has (the preset's ``host_modules``: ``workers``, ``js``,
``pyodide``) is Cloudflare's, so a reader looking for the Worker, its Durable Objects or its stores
finds them all under the host's name, and a generic module carries nothing of one host.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agent_unit
from agent_unit_cli.presets import PRESETS

PACKAGE = Path(agent_unit.__file__).parent
HOME = PACKAGE / "hosts" / "cloudflare"


def workers_imports(path: Path) -> list[str]:
    """``file:line module`` for each import in ``path`` of a module only a Worker has."""
    host_modules = set(PRESETS["cloudflare"].host_modules)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}"
            for name in names
            if name.split(".")[0] in host_modules
        ]
    return found


def test_only_the_cloudflare_package_imports_what_only_a_worker_has() -> None:
    outside = [
        found for path in sorted(PACKAGE.rglob("*.py")) if HOME not in path.parents for found in workers_imports(path)
    ]
    assert outside == []


def test_the_check_finds_the_workers_imports_of_the_cloudflare_package() -> None:
    inside = [found for path in sorted(HOME.rglob("*.py")) for found in workers_imports(path)]
    assert {line.rsplit(" ", 1)[1].split(".")[0] for line in inside} == {"workers", "js", "pyodide"}
