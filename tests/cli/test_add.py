"""`agent-unit add`: install an adapter package, check it, add it to the config keeping its formatting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_unit_cli.add import add_to_config, installed

pytestmark = pytest.mark.slow  # installs packages into virtual environments: left out of `make check`


ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-unit-adapter-echo"


def test_add_to_an_existing_toml_keeps_comments_and_tables(tmp_path: Path) -> None:
    (tmp_path / "agent-unit.toml").write_text(
        '# our agents\nname = "support"  # shown in the manifest\n\n[tasks.digest]\nschedule = "0 8 * * *"\n'
        'handler = "app.tasks:digest"\n'
    )
    path, added = add_to_config(tmp_path, ["pkg.mod:adapter"])
    assert added == ["pkg.mod:adapter"] and path.name == "agent-unit.toml"
    assert path.read_text() == (
        '# our agents\nname = "support"  # shown in the manifest\nadapters = ["pkg.mod:adapter"]\n\n'
        '[tasks.digest]\nschedule = "0 8 * * *"\nhandler = "app.tasks:digest"\n'
    )
    path, added = add_to_config(tmp_path, ["pkg.mod:adapter", "other:adapter"])
    assert added == ["other:adapter"]
    assert 'adapters = ["pkg.mod:adapter", "other:adapter"]\n' in path.read_text()


def test_add_to_pyproject_section_or_a_new_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n\n[tool.agent-unit]\npreset = "docker"\n')
    path, _ = add_to_config(tmp_path, ["a:b"])
    assert path.name == "pyproject.toml"
    assert path.read_text() == '[project]\nname = "app"\n\n[tool.agent-unit]\npreset = "docker"\nadapters = ["a:b"]\n'
    other = tmp_path / "fresh"
    other.mkdir()
    path, _ = add_to_config(other, ["a:b"])
    assert path == other / "agent-unit.toml" and path.read_text() == 'adapters = ["a:b"]\n'


def agent_unit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_unit_cli", *args], capture_output=True, text=True, timeout=300)


def test_add_installs_an_adapter_package_and_serves_its_agents(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "agents").mkdir(parents=True)
    (project / "agents" / "greet.py").write_text('from agent_unit_adapter_echo import Echo\n\nagent = Echo("hi ")\n')
    (project / "agent-unit.toml").write_text("# config\n")
    try:
        done = agent_unit("add", str(EXAMPLE), "--yes", "--root", str(project))
        assert done.returncode == 0, done.stdout + done.stderr
        assert installed("agent-unit-adapter-echo")
        assert (project / "agent-unit.toml").read_text() == '# config\nadapters = ["agent_unit_adapter_echo:adapter"]\n'
        listed = agent_unit("agents", "--root", str(project))
        assert listed.returncode == 0 and "greet" in listed.stdout and "echo" in listed.stdout, listed.stdout
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "agent-unit-adapter-echo"], check=False)


def test_a_package_that_is_not_an_adapter_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    package = tmp_path / "not-an-adapter"
    (package / "not_an_adapter").mkdir(parents=True)
    (package / "not_an_adapter" / "__init__.py").write_text("")
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "not-an-adapter"\nversion = "0.1.0"\n'
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-unit.toml").write_text('name = "x"\n')
    done = agent_unit("add", str(package), "--yes", "--root", str(project))
    assert done.returncode == 1
    assert "not-an-adapter is not an agent-unit adapter" in done.stderr
    assert (project / "agent-unit.toml").read_text() == 'name = "x"\n'
    assert not installed("not-an-adapter")  # it was installed to be checked, then removed


@pytest.mark.parametrize("spec", ["./nowhere-at-all"])
def test_a_missing_path_is_a_clear_error(tmp_path: Path, spec: str) -> None:
    done = agent_unit("add", spec, "--yes", "--root", str(tmp_path))
    assert done.returncode == 1 and "installing ./nowhere-at-all failed" in done.stderr


def test_add_does_not_write_into_a_comment_or_trip_on_header_comments(tmp_path: Path) -> None:
    (tmp_path / "agent-unit.toml").write_text('adapters = ["a:b"]  # see [docs]\n')
    path, _ = add_to_config(tmp_path, ["c:d"])
    assert path.read_text() == 'adapters = ["a:b", "c:d"]  # see [docs]\n'
    other = tmp_path / "py"
    other.mkdir()
    (other / "pyproject.toml").write_text('[tool.agent-unit]  # ours\nname = "x"\n')
    path, _ = add_to_config(other, ["c:d"])
    assert path.read_text() == '[tool.agent-unit]  # ours\nname = "x"\nadapters = ["c:d"]\n'


def test_add_to_a_pyproject_with_only_subtables_stays_in_pyproject(tmp_path: Path) -> None:
    import tomllib

    (tmp_path / "pyproject.toml").write_text(
        '[tool.agent-unit.tasks.digest]\nschedule = "0 8 * * *"\nhandler = "a:b"\n'
    )
    path, _ = add_to_config(tmp_path, ["c:d"])
    assert path.name == "pyproject.toml" and not (tmp_path / "agent-unit.toml").exists()
    section = tomllib.loads(path.read_text())["tool"]["agent-unit"]
    assert section["adapters"] == ["c:d"] and section["tasks"]["digest"]["handler"] == "a:b"
