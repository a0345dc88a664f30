"""examples/ci: the GitHub Actions workflow that builds with the aws-lambda preset and deploys with SAM.

Nothing here reaches GitHub or AWS. The workflow is checked against GitHub's workflow schema
(the copy check-jsonschema vendors), step by step for what a deploy needs and for secrets,
its shell scripts with bash (and shellcheck where it is installed), and its build command
runs for real on a sample project: what it writes is what ``sam deploy`` is pointed at, and
every parameter the template requires is passed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from agent_unit_cli.main import app
from agent_unit_cli.presets import aws_lambda

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "examples" / "ci" / ".github" / "workflows" / "deploy.yml"
FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
runner = CliRunner()


def _workflow() -> dict[str, Any]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads the key `on` as true
    return workflow


def _steps() -> list[dict[str, Any]]:
    return _workflow()["jobs"]["deploy"]["steps"]


def _step(match: str) -> tuple[int, dict[str, Any]]:
    """The step that uses an action starting with ``match``, or whose script contains it."""
    found = [
        (index, step)
        for index, step in enumerate(_steps())
        if step.get("uses", "").startswith(match) or match in step.get("run", "")
    ]
    assert len(found) == 1, f"one step should match {match!r}, found {len(found)}"
    return found[0]


def _command(script: str, program: str) -> list[str]:
    """The words of the (backslash-continued) command in ``script`` that starts with ``program``."""
    joined = script.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if line.strip().startswith(program + " ")]
    assert len(lines) == 1, f"one {program} command expected in:\n{script}"
    return shlex.split(lines[0])


def test_the_workflow_is_valid_for_github() -> None:
    if importlib.util.find_spec("check_jsonschema") is None:
        message = "check-jsonschema is not installed: GitHub's workflow schema cannot be checked"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        done = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(WORKFLOW)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{schema}:\n{done.stdout}{done.stderr}"


def test_the_workflow_runs_the_steps_a_deploy_needs() -> None:
    workflow = _workflow()
    assert workflow["on"]["push"]["branches"] == ["main"] and "workflow_dispatch" in workflow["on"]
    assert workflow["permissions"] == {"contents": "read", "id-token": "write"}  # OIDC, nothing more
    assert workflow["concurrency"]["cancel-in-progress"] is False
    env = workflow["env"]
    assert env["AGENT_UNIT"].startswith("agent-unit[aws]")  # the preset pins mangum from the build's environment
    assert env["PYTHON_VERSION"] in aws_lambda.RUNTIMES and env["LAMBDA_ARCH"] in aws_lambda.ARCHITECTURES

    checkout, _ = _step("actions/checkout@")
    python, setup_python = _step("actions/setup-python@")
    install, _ = _step('pip install "$AGENT_UNIT"')
    build, build_step = _step("agent-unit build")
    credentials, aws = _step("aws-actions/configure-aws-credentials@")
    sam, _ = _step("aws-actions/setup-sam@")
    deploy, deploy_step = _step("sam deploy")
    assert checkout < python < install < build < credentials < sam < deploy

    assert setup_python["with"]["python-version"] == "${{ env.PYTHON_VERSION }}"
    words = _command(build_step["run"], "agent-unit")
    assert words[:4] == ["agent-unit", "build", "--preset", "aws-lambda"] and "--json" in words
    assert words[words.index("--arch") + 1] == "$LAMBDA_ARCH"
    assert words[words.index("--python") + 1] == "$PYTHON_VERSION"
    assert aws["with"] == {
        "role-to-assume": "${{ secrets.AWS_DEPLOY_ROLE_ARN }}",
        "aws-region": "${{ vars.AWS_REGION }}",
    }

    words = _command(deploy_step["run"], "sam")
    for flag, value in [
        ("--template-file", ".output/aws-lambda/template.yaml"),
        ("--stack-name", "$STACK_NAME"),
        ("--capabilities", "CAPABILITY_IAM"),
    ]:
        assert words[words.index(flag) + 1] == value, flag
    assert {"--resolve-s3", "--no-confirm-changeset", "--parameter-overrides"} <= set(words)
    assert deploy_step["env"]["AGENT_UNIT_SECRET"] == "${{ secrets.AGENT_UNIT_SECRET }}"
    assert '"AgentUnitSecret=$AGENT_UNIT_SECRET"' in deploy_step["run"]


def test_no_secret_is_written_into_the_workflow() -> None:
    text = WORKFLOW.read_text()
    assert not re.search(r"arn:aws:iam::\d{12}", text) and not re.search(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b", text)
    assert "aws-access-key-id" not in text and "aws-secret-access-key" not in text  # OIDC only
    for step in _steps():
        # A secret reaches a script through env only: an expression inside a script is pasted
        # into the shell before it runs, quotes and all.
        assert not EXPRESSION.search(step.get("run", "")), step["name"]
        for key, value in {**step.get("with", {}), **step.get("env", {})}.items():
            if re.search(r"secret|token|role|password|key", key, re.IGNORECASE):
                assert re.fullmatch(r"\$\{\{ (secrets|github)\.\w+ \}\}", str(value)), (step["name"], key)


def test_the_scripts_are_valid_bash() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    for step in _steps():
        if "run" not in step:
            continue
        done = subprocess.run([bash, "-n"], input=step["run"], capture_output=True, text=True)
        assert done.returncode == 0, f"{step['name']}: {done.stderr}"
        if shellcheck is not None:  # GitHub runs scripts with bash -e -o pipefail
            done = subprocess.run([shellcheck, "-s", "bash", "-"], input=step["run"], capture_output=True, text=True)
            assert done.returncode == 0, f"{step['name']}:\n{done.stdout}"


class _TemplateLoader(yaml.SafeLoader):
    """Reads a CloudFormation template: its short-form functions (!Ref, !GetAtt...) are kept as their tag."""


_TemplateLoader.add_multi_constructor("!", lambda loader, suffix, node: f"!{suffix}")


def test_the_build_command_writes_what_sam_deploys(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    (project / "agent-unit.toml").write_text('storage = "dynamodb://agent-runs?region=eu-west-1"\n')
    env = _workflow()["env"]
    words = _command(_step("agent-unit build")[1]["run"], "agent-unit")
    words = words[: words.index(">")] if ">" in words else words
    args = [re.sub(r"\$(\w+)", lambda match: env[match.group(1)], word) for word in words[1:]]

    result = runner.invoke(app, [*args, "--root", str(project)])
    assert result.exit_code == 0, result.output
    built = json.loads(result.output)
    deploy = _step("sam deploy")[1]["run"]
    sam = _command(deploy, "sam")
    template_file = project / sam[sam.index("--template-file") + 1]
    assert Path(built["output"]) == template_file.parent and template_file.is_file()

    template = yaml.load(template_file.read_text(), Loader=_TemplateLoader)  # a SafeLoader
    function = template["Resources"]["AgentsFunction"]["Properties"]
    assert (template_file.parent / function["CodeUri"]).is_file()  # function.zip, beside the template
    assert function["Runtime"] == f"python{env['PYTHON_VERSION']}" and function["Architectures"] == [env["LAMBDA_ARCH"]]

    commands = "\n".join(line for line in deploy.splitlines() if not line.strip().startswith("#"))
    passed = set(re.findall(r'overrides\+?=\("(\w+)=', commands))
    parameters = template["Parameters"]
    required = {name for name, parameter in parameters.items() if "Default" not in parameter}
    assert required <= passed <= set(parameters), (required, passed)
    assert "AgentUnitSecret" in required
