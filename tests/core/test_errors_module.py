"""Every error class lives in ``agent_unit/errors.py``: one place to find what can go wrong, and what the
client can map a server's code back to. Park signals (``BaseException`` but not ``Exception``) are control
flow, not errors, and may live beside the code that raises them."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent_unit", "agent_unit_cli")


def _classes() -> list[tuple[Path, ast.ClassDef]]:
    return [
        (path, node)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    ]


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def _kinds(classes: list[tuple[Path, ast.ClassDef]]) -> dict[str, str]:
    """Each class name's kind, "error" (an ``Exception``) or "signal" (``BaseException`` only), found from
    the builtins and then from the bases of the packages' own classes until nothing changes."""
    kinds = {
        name: "error" if issubclass(value, Exception) else "signal"
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    changed = True
    while changed:
        changed = False
        for _, node in classes:
            kind = next((kinds[base] for base in _base_names(node) if base in kinds), None)
            if kind is not None and kinds.get(node.name) != kind:
                kinds[node.name], changed = kind, True
    return kinds


def test_every_error_class_of_the_runtime_and_the_cli_is_defined_in_errors_py() -> None:
    classes = _classes()
    kinds = _kinds(classes)
    errors_py = ROOT / "agent_unit" / "errors.py"
    elsewhere = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path, node in classes
        if kinds.get(node.name) == "error" and path != errors_py
    ]
    assert elsewhere == []


def test_the_check_recognises_an_error_class_by_its_bases() -> None:
    """The check above cannot pass by finding no classes: it sees the errors of errors.py and a Park signal."""
    kinds = _kinds(_classes())
    assert kinds["StepResultError"] == "error"  # UnstorableValue -> AgentUnitError -> Exception
    assert kinds["ConfigError"] == "error"
    assert kinds["Park"] == "signal"
