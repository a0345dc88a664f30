"""Bytecode for a serverless function: compiled by a Python of the host's version, or a warning."""

from __future__ import annotations

import sys
from pathlib import Path

from agent_unit_cli.bytecode import compile_bytecode
from agent_unit_cli.presets import BuildOptions, Finish, local_python, vercel

UNCHECKED_HASH = 0b01  # a pyc's flags: hash-based, never checked against its source


def _flags(pyc: Path) -> int:
    return int.from_bytes(pyc.read_bytes()[4:8], "little")


def test_every_module_gets_bytecode_that_stays_valid_whatever_the_files_times(tmp_path: Path) -> None:
    (tmp_path / "package").mkdir()
    (tmp_path / "package" / "module.py").write_text("VALUE = 1\n")
    (tmp_path / "entry.py").write_text("import package.module\n")
    (tmp_path / "package" / "legacy.py").write_text("print 'a vendored Python 2 file'\n")

    assert compile_bytecode([tmp_path / "package", tmp_path / "entry.py"], local_python())

    tag = sys.implementation.cache_tag
    for pyc in (
        tmp_path / "package" / "__pycache__" / f"module.{tag}.pyc",
        tmp_path / "__pycache__" / f"entry.{tag}.pyc",
    ):
        assert pyc.is_file()
        assert _flags(pyc) == UNCHECKED_HASH
    assert not (tmp_path / "package" / "__pycache__" / f"legacy.{tag}.pyc").exists()  # the rest still compiled


def test_without_a_python_of_the_hosts_version_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "module.py").write_text("VALUE = 1\n")

    assert not compile_bytecode([tmp_path], "3.1")

    assert not (tmp_path / "__pycache__").exists()


def test_a_vercel_build_without_that_python_says_what_it_costs(tmp_path: Path) -> None:
    function = tmp_path / "functions" / f"{vercel.FUNCTION}.func"
    function.mkdir(parents=True)
    (function / "agent_unit_app.py").write_text("app = None\n")
    step = Finish(root=tmp_path, output=tmp_path, context={}, options=BuildOptions(), progress=lambda _: None)

    vercel._precompile(step, "3.1")

    assert not (function / "__pycache__").exists()
    assert len(step.warnings) == 1
    assert "no Python 3.1 on this machine, so the Vercel function has no bytecode" in step.warnings[0]
    assert "Install Python 3.1" in step.warnings[0]
