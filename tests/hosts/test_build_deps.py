"""A build carries what the agents import and proves it starts.

The project has a plain agent and a PydanticAI agent (its TestModel: offline) and NO
requirements file: what worked where it was written must work where it is deployed. Each
preset's output is started in a clean interpreter (``python -I -S``: nothing of this
machine's site-packages) from a moved copy, or unpacked as its host loads it.

Builds run pip, so each is built once per module and shared by the tests that read it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agent_unit_cli.pip import install, linux_wheels
from agent_unit_cli.starts import interpreter

from ..support import fetch
from ..support.server import free_port, wait_until_up
from .test_preset_aws_lambda import Lambda

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`

PLAIN = """from agent_unit import define_agent


@define_agent
async def agent(text: str) -> str:
    return f"plain: {text}"
"""

ASSISTANT = """from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel


agent = Agent(TestModel(custom_output_text="hello from pydantic-ai"))
"""

ROOT = Path(__file__).resolve().parents[2]
LOCAL = f"{sys.version_info.major}.{sys.version_info.minor}"


def project(folder: Path, *, pydantic_ai: bool = True, config: str = "") -> Path:
    (folder / "agents").mkdir(parents=True)
    (folder / "agents" / "plain.py").write_text(PLAIN)
    if pydantic_ai:
        (folder / "agents" / "assistant.py").write_text(ASSISTANT)
    if config:
        (folder / "agent-unit.toml").write_text(config)
    return folder


def build(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root), "--json", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def built(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = build(root, *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def failed(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = build(root, *args, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    return str(json.loads(done.stdout)["error"])


def serve_from_a_moved_copy(output: Path, tmp: Path, answers: dict[str, str] | None = None) -> None:
    """``python -I -S main.py`` from a copy elsewhere, the project gone: each agent answers "hi" as given."""
    answers = answers or {"plain": "plain: hi", "assistant": "hello from pydantic-ai"}
    moved = tmp / "elsewhere" / output.name
    shutil.copytree(output, moved)
    port = free_port()
    environment = {"PATH": os.environ["PATH"], "PORT": str(port), "HOST": "127.0.0.1"}
    server = subprocess.Popen([sys.executable, "-I", "-S", "main.py"], cwd=moved, env=environment)
    try:
        url = f"http://127.0.0.1:{port}"
        assert sorted(agent["name"] for agent in wait_until_up(url, timeout=180)["agents"]) == sorted(answers)
        for name, output_text in answers.items():
            done = fetch.post(f"{url}/agents/{name}/runs?wait=1", json={"input": "hi"}, timeout=30).json()
            assert done["status"] == "completed" and done["output"] == output_text, done
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.fixture(scope="module")
def local_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project(tmp_path_factory.mktemp("deps") / "project")


@pytest.fixture(scope="module")
def serverless_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the store's URL is a secret: its scheme is read from the variable at build time
    return project(tmp_path_factory.mktemp("deps-serverless") / "project", config='storage = "${AU_TEST_STORE}"\n')


def test_a_server_build_carries_pydantic_ai_and_runs_both_agents_with_nothing_installed(
    local_project: Path, tmp_path: Path
) -> None:
    assert not (local_project / "requirements.txt").exists() and not (local_project / "pyproject.toml").exists()
    result = built(local_project)
    output = Path(result["output"])
    assert (output / "vendor" / "pydantic_ai").is_dir() and result["warnings"] == []
    assert (output / ".agent-unit-build").read_text().startswith("written by agent-unit build")
    serve_from_a_moved_copy(output, tmp_path)


def test_a_docker_build_runs_as_an_unprivileged_user_with_a_health_check_and_its_dependencies_first(
    local_project: Path, tmp_path: Path
) -> None:
    output = Path(built(local_project, "--preset", "docker")["output"])
    dockerfile = (output / "Dockerfile").read_text()
    assert f"python:{LOCAL}-slim" in dockerfile and "\nUSER agent\n" in dockerfile
    assert dockerfile.index("COPY vendor/") < dockerfile.index("COPY app/")  # the dependencies' layer comes first
    assert "HEALTHCHECK" in dockerfile and "'/healthz'" in dockerfile and "curl" not in dockerfile
    assert (output / ".dockerignore").exists()
    serve_from_a_moved_copy(output, tmp_path)


def test_an_aws_lambda_build_starts_and_runs_both_agents_from_its_unpacked_zip(
    serverless_project: Path, tmp_path: Path, redis_url: str
) -> None:
    result = built(serverless_project, "--preset", "aws-lambda", "--python", LOCAL, env={"AU_TEST_STORE": redis_url})
    assert not any("not started here" in note for note in result["notes"])  # the build started it itself
    assert any("`authorize`" in note and "Function URL" in note for note in result["notes"])
    unpacked = tmp_path / "function"
    with zipfile.ZipFile(Path(result["output"]) / "function.zip") as archive:
        archive.extractall(unpacked)
    assert (unpacked / "vendor" / "redis").is_dir()  # the driver of the scheme behind ${AU_TEST_STORE}
    with Lambda(unpacked, {"AU_TEST_STORE": redis_url}) as function:  # one container: PydanticAI imported once
        for name, output_text in [("plain", "plain: hi"), ("assistant", "hello from pydantic-ai")]:
            response = function.http("POST", f"/agents/{name}/runs?wait=1", {"input": "hi"})
            assert response["json"]["status"] == "completed" and response["json"]["output"] == output_text


def test_a_vercel_build_vendors_wheels_for_its_python_and_starts_where_that_python_is(
    serverless_project: Path,
) -> None:
    store = {"AU_TEST_STORE": "redis://127.0.0.1:6379"}  # read for its scheme; no store is reached
    result = built(serverless_project, "--preset", "vercel", "--python", "3.12", env=store)
    function = Path(result["output"]) / "functions" / "agent-unit.func"
    assert (function / "vendor" / "pydantic_ai").is_dir() and (function / "vendor" / "vercel_runtime").is_dir()
    assert list((function / "vendor" / "pydantic_core").glob("*.cpython-312-x86_64-linux-gnu.so"))
    skipped = [note for note in result["notes"] if "not started here" in note]
    if interpreter("3.12") is None:  # no Python 3.12 here: the build says so instead of pretending
        assert skipped and "Python 3.12" in skipped[0], result["notes"]
    else:
        assert not skipped


@pytest.mark.parametrize("installer", ["pip", "uv"])  # pip: a project without a uv.lock; uv: one with
def test_docker_honours_arch_and_python_in_its_wheels_and_image(tmp_path: Path, installer: str) -> None:
    root = project(tmp_path / "project", pydantic_ai=False, config='storage = "redis://${AU_TEST_HOST}:6379"\n')
    # a module importable here from a path entry, not from a distribution: a warning, not vendored
    (tmp_path / "path-entry").mkdir()
    (tmp_path / "path-entry" / "house_rules.py").write_text("LIMIT = 3\n")
    (root / "agents" / "plain.py").write_text(
        PLAIN + "\n\ndef limit() -> int:\n    import house_rules\n\n    return 1\n"
    )
    # markers decided for the image (arm64, 3.13), not for this machine (x86_64, 3.11)
    (root / "requirements.txt").write_text('six; platform_machine == "aarch64"\ntoml; python_version < "3.12"\n')
    path = os.pathsep.join([str(tmp_path / "path-entry"), os.environ.get("PYTHONPATH", "")])
    env = {"PYTHONPATH": path, "AGENT_UNIT_INSTALLER": installer}  # the other builds here use uv
    result = built(root, "--preset", "docker", "--arch", "arm64", "--python", "3.13", env=env)
    assert result["warnings"] == [
        "agents/plain.py:10 imports house_rules, which no installed distribution provides, so the build does not "
        "vendor it: list its package in requirements.txt if the app needs it"
    ]
    output = Path(result["output"])
    assert "FROM --platform=linux/arm64 python:3.13-slim" in (output / "Dockerfile").read_text()
    wheel = next((output / "vendor").glob("pydantic_core-*.dist-info")) / "WHEEL"
    tags = [line.split(": ", 1)[1] for line in wheel.read_text().splitlines() if line.startswith("Tag: ")]
    assert tags and all(tag.startswith("cp313-cp313-") and tag.endswith("aarch64") for tag in tags), tags
    assert list((output / "vendor" / "pydantic_core").glob("*.cpython-313-aarch64-linux-gnu.so"))
    assert (output / "vendor" / "redis").is_dir()  # the scheme written around the variable names the driver
    assert any("not started here" in note and "linux-aarch64" in note for note in result["notes"])
    assert (output / "vendor" / "six.py").is_file()
    assert not list((output / "vendor").glob("toml*"))


def test_a_build_whose_app_does_not_start_fails_with_the_users_lines_and_is_marked_incomplete(tmp_path: Path) -> None:
    root = project(tmp_path / "project", pydantic_ai=False)
    (root / "prices.json").write_text("{}")  # data beside the code: not part of the build
    (root / "prices.py").write_text(
        "import json, pathlib\n\nPRICES = json.loads((pathlib.Path(__file__).parent / 'prices.json').read_text())\n"
    )
    (root / "agents" / "plain.py").write_text("import prices\n" + PLAIN)
    done = build(root)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error.startswith("the built app does not start"), error
    assert "agents/plain.py:1 in <module>: import prices" in error and "prices.py:3 in <module>" in error
    assert "FileNotFoundError" in error and "discovery.py" not in error and "importlib" not in error
    marker = root / ".output" / "server" / ".agent-unit-build"
    assert marker.read_text().startswith("incomplete")


def test_an_adapter_installed_from_a_folder_is_vendored_and_serves_its_agent(tmp_path: Path) -> None:
    """As `agent-unit add ./folder` installs it (here into a folder of its own, not the shared environment)."""
    site = tmp_path / "site"
    example = ROOT / "examples" / "agent-unit-adapter-echo"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(example)],
        check=True,
        capture_output=True,
    )
    root = project(tmp_path / "project", pydantic_ai=False)
    (root / "agents" / "greet.py").write_text('from agent_unit_adapter_echo import Echo\n\nagent = Echo("hello ")\n')
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    output = Path(built(root, env={"PYTHONPATH": path})["output"])
    assert list((output / "vendor").glob("agent_unit_adapter_echo-0.1.0.dist-info"))
    serve_from_a_moved_copy(output, tmp_path, {"plain": "plain: hi", "greet": "hello hi"})


@pytest.mark.parametrize(
    ("files", "env", "message"),
    [
        (
            {"helpers.py": "def later():\n    import not_installed_anywhere\n"},
            {},
            "the project imports modules that are not installed here, so the build cannot vendor them "
            "(helpers.py:2: not_installed_anywhere)",
        ),
        (
            {"agent-unit.toml": 'storage = "${AU_UNSET_STORE_URL}"\n'},
            {},
            'name the store beside the URL, storage = { provider = "postgres", url = "${AU_UNSET_STORE_URL}" } '
            "(or redis, dynamodb, sqlite), or set AU_UNSET_STORE_URL when you build",
        ),
        (
            {"agent-unit.toml": 'authorize = "auth:check"\n'},
            {},
            "authorize = 'auth:check' cannot be loaded: No module named 'auth'",
        ),
        (
            {
                "auth.py": "def allow(request, action, run):\n    return True\n",
                "agent-unit.toml": 'authorize = "auth:check"\n',
            },
            {},
            "authorize = 'auth:check' cannot be loaded: module 'auth' has no attribute 'check'",
        ),
        (
            {"agents/plain.py": PLAIN + "\n\n@define_agent\nasync def other(text: str) -> str:\n    return text\n"},
            {},
            "agents/plain.py defines several agents (agent, other): serve one agent per file",
        ),
    ],
)
def test_a_build_refuses_what_would_not_run_where_it_is_deployed(
    tmp_path: Path, files: dict[str, str], env: dict[str, str], message: str
) -> None:
    root = project(tmp_path / "project", pydantic_ai=False)
    for name, text in files.items():
        (root / name).write_text(text)
    assert message in failed(root, env=env)
    assert not (root / ".output").exists()


def test_a_storage_variable_set_at_build_time_names_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_unit.errors import BuildError
    from agent_unit_cli.build import storage_scheme

    monkeypatch.delenv("AU_TEST_SCHEME_URL", raising=False)
    with pytest.raises(BuildError, match="set AU_TEST_SCHEME_URL when you build"):
        storage_scheme("${AU_TEST_SCHEME_URL}")
    monkeypatch.setenv("AU_TEST_SCHEME_URL", "postgres://app@db/runs")
    assert storage_scheme("${AU_TEST_SCHEME_URL}") == "postgres"
    assert storage_scheme("rediss://:${AU_TEST_PASSWORD}@cache:6380") == "rediss"


def test_the_pip_of_a_fresh_python_311_venv_vendors_a_package_that_needs_312(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)  # its bundled pip
    target = tmp_path / "vendor"
    wheels = linux_wheels("x86_64", "3.12")
    install(["vercel-runtime==0.20.0"], target, platform=wheels, deps=False, python=str(venv / "bin" / "python"))
    assert (target / "vercel_runtime").is_dir()
