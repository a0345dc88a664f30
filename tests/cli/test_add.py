"""`agent-unit add`: install an adapter package, check it, add it to the config keeping its formatting."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agent_unit.adapters.registry import BUILTINS
from agent_unit_cli.add import add_to_config
from agent_unit_cli.frameworks import FRAMEWORKS, requirements

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


def wheel(folder: Path, name: str, files: dict[str, str], *, version: str = "0.1.0", **options: Any) -> Path:
    """A wheel built by hand (no build backend, no network): ``requires`` and ``adapters`` (entry points)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {requirement}\n" for requirement in options.get("requires", ())
    )
    contents[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if adapters := options.get("adapters"):
        contents[f"{info}/entry_points.txt"] = "[agent_unit.adapters]\n" + "".join(
            f"{key} = {value}\n" for key, value in adapters.items()
        )
    contents[f"{info}/RECORD"] = "".join(f"{file},,\n" for file in [*contents, f"{info}/RECORD"])
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in contents.items():
            archive.writestr(file, text)
    return path


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """A package index of local wheels only (pip's --no-index --find-links): no test reaches the network."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    echo = (EXAMPLE / "agent_unit_adapter_echo" / "__init__.py").read_text()
    wheel(
        folder,
        "agent-unit-adapter-echo",
        {"agent_unit_adapter_echo/__init__.py": echo},
        adapters={"echo": "agent_unit_adapter_echo:adapter"},
    )
    wheel(folder, "not-an-adapter", {"not_an_adapter/__init__.py": ""}, requires=["not-an-adapter-dep"])
    wheel(folder, "not-an-adapter-dep", {"not_an_adapter_dep/__init__.py": ""})
    wheel(
        folder,
        "broken-adapter",
        {"broken_adapter/__init__.py": "adapter = 42\n"},
        requires=["broken-adapter-dep"],
        adapters={"broken": "broken_adapter:adapter"},
    )
    wheel(folder, "broken-adapter-dep", {"broken_adapter_dep/__init__.py": ""})
    wheel(folder, "strands-agents", {"strands/__init__.py": ""}, version="1.62.0")
    return folder


@pytest.fixture
def python(tmp_path: Path) -> Path:
    """A virtual environment of its own that sees this one's packages: ``add`` installs there, never here."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next((env / "lib").glob("python*/site-packages"))
    shared = [path for path in sys.path if path.endswith("site-packages") and Path(path).is_dir()]
    (site / "shared.pth").write_text("".join(f"{path}\n" for path in shared))
    return env / "bin" / "python"


def installed_in(python: Path) -> set[str]:
    """The distributions installed in ``python``'s own environment (not the ones it shares)."""
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    return {path.name.split("-")[0] for path in site.glob("*.dist-info")}


def agent_unit(python: Path, index: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}
    return subprocess.run(
        [str(python), "-m", "agent_unit_cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_add_installs_an_adapter_package_and_serves_its_agents(tmp_path: Path, index: Path, python: Path) -> None:
    project = tmp_path / "project"
    (project / "agents").mkdir(parents=True)
    (project / "agents" / "greet.py").write_text('from agent_unit_adapter_echo import Echo\n\nagent = Echo("hi ")\n')
    (project / "agent-unit.toml").write_text("# config\n")
    done = agent_unit(python, index, "add", "agent-unit-adapter-echo", "--yes", "--root", str(project))
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed_in(python) == {"agent_unit_adapter_echo"}
    assert (project / "agent-unit.toml").read_text() == '# config\nadapters = ["agent_unit_adapter_echo:adapter"]\n'
    listed = agent_unit(python, index, "agents", "--root", str(project))
    assert listed.returncode == 0 and "greet" in listed.stdout and "echo" in listed.stdout, listed.stdout


def test_a_package_that_is_not_an_adapter_is_refused_before_anything_is_installed(
    tmp_path: Path, index: Path, python: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-unit.toml").write_text('name = "x"\n')
    done = agent_unit(python, index, "add", "not-an-adapter", "--yes", "--root", str(project))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not-an-adapter is not an agent-unit adapter" in done.stderr and "nothing was installed" in done.stderr
    assert "agent-unit add pydantic-ai" in done.stderr and "langgraph" in done.stderr  # what it adapts itself
    assert "Traceback" not in done.stderr
    assert (project / "agent-unit.toml").read_text() == 'name = "x"\n'
    assert installed_in(python) == set()  # not the package, not its dependency


def test_an_adapter_that_does_not_load_is_removed_with_every_dependency_it_brought(
    tmp_path: Path, index: Path, python: Path
) -> None:
    done = agent_unit(python, index, "add", "broken-adapter", "--yes", "--root", str(tmp_path))
    assert done.returncode == 1 and "broken_adapter:adapter" in done.stderr, done.stdout + done.stderr
    assert installed_in(python) == set() and not (tmp_path / "agent-unit.toml").exists()


def test_add_of_a_framework_agent_unit_adapts_says_so_and_installs_nothing(
    tmp_path: Path, index: Path, python: Path
) -> None:
    for package in ["pydantic-ai", "pydantic-ai-slim", "langgraph"]:  # installed here by the dev extra
        done = agent_unit(python, index, "add", package, "--root", str(tmp_path))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "agent-unit adapts" in done.stdout and "is installed: nothing to add" in done.stdout, done.stdout
    assert installed_in(python) == set() and sorted(path.name for path in tmp_path.iterdir()) == ["venv", "wheels"]


def test_add_of_a_framework_agent_unit_adapts_installs_its_extra(tmp_path: Path, index: Path, python: Path) -> None:
    done = agent_unit(python, index, "add", "strands-agents", "--root", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installing agent-unit[strands] (strands-agents>=1.62)" in done.stdout
    assert installed_in(python) == {"strands_agents"} and not (tmp_path / "agent-unit.toml").exists()
    again = agent_unit(python, index, "add", "strands-agents", "--root", str(tmp_path))
    assert again.returncode == 0 and "agent-unit[strands] is installed: nothing to add" in again.stdout


def test_the_built_in_frameworks_are_the_registrys_and_pyprojects_extras() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {framework.module for framework in FRAMEWORKS} == set(BUILTINS)
    for framework in FRAMEWORKS:
        assert framework.extra in extras
        assert [str(item).split(";")[0] for item in requirements(framework)] == extras[framework.extra]


def test_a_missing_folder_is_a_clear_error(tmp_path: Path, index: Path, python: Path) -> None:
    done = agent_unit(python, index, "add", "./nowhere-at-all", "--yes", "--root", str(tmp_path))
    assert done.returncode == 1 and done.stderr.startswith("error: no folder ./nowhere-at-all:"), done.stderr


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
    (tmp_path / "pyproject.toml").write_text(
        '[tool.agent-unit.tasks.digest]\nschedule = "0 8 * * *"\nhandler = "a:b"\n'
    )
    path, _ = add_to_config(tmp_path, ["c:d"])
    assert path.name == "pyproject.toml" and not (tmp_path / "agent-unit.toml").exists()
    section = tomllib.loads(path.read_text())["tool"]["agent-unit"]
    assert section["adapters"] == ["c:d"] and section["tasks"]["digest"]["handler"] == "a:b"
