"""`agent-unit build --preset netlify`: a static site whose rules proxy the agent routes to a backend.

Netlify runs no Python, so the build refuses without the backend's URL and says why. The
generated ``netlify.toml`` is parsed here with tomllib; where Node is present, Netlify's own
config and redirect parsers (``@netlify/config``, ``@netlify/redirect-parser``, installed from
npm into pytest's cache) read the output offline as ``netlify deploy`` does, in both the
folders it may run from, and the rules must come out whole and first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_unit_cli.main import app
from agent_unit_cli.presets.netlify import PROXY_TIMEOUT_SECONDS

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"
ORIGIN = "https://agents.example.com"
runner = CliRunner()

NETLIFY_PACKAGES = ("@netlify/config@24.6.0", "@netlify/redirect-parser@15.0.4")
"""Netlify's parsers, pinned: 24.6 is the last @netlify/config that runs on Node 18 and 20."""

NETLIFY_READ = """
import { resolveConfig } from '@netlify/config'
import { parseAllRedirects } from '@netlify/redirect-parser'

// As `netlify deploy --dir <published>` run in <cwd>: the config from <cwd>, then _redirects from <published>.
const [cwd, published] = process.argv.slice(2)
const { config, logs } = await resolveConfig({ cwd, repositoryRoot: cwd, offline: true, mode: 'cli', buffer: true })
const { redirects, errors } = await parseAllRedirects({
  configRedirects: config.redirects, redirectsFiles: [`${published}/_redirects`], minimal: true,
})
console.log(JSON.stringify({ redirects, errors: errors.map(String), warnings: [...logs.stdout, ...logs.stderr] }))
"""


def _project(tmp_path: Path, config: str = "") -> Path:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    if config:
        (project / "agent-unit.toml").write_text(config)
    return project


def _build(project: Path, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["build", "--root", str(project), "--preset", "netlify", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _redirects(output: Path) -> list[dict[str, Any]]:
    return tomllib.loads((output / "netlify.toml").read_text()).get("redirects", [])


PUBLIC_PATHS = [
    "/agents",
    "/agents/{agent}/runs",
    "/runs",
    "/runs/{run_id}",
    "/runs/{run_id}/events",
    "/runs/{run_id}/resume",
    "/runs/{run_id}/cancel",
    "/runs/{run_id}/retry",
    "/healthz",
    "/agents/{agent}/ag-ui",
    *(
        f"{where}/.well-known/{file}"
        for where in ("", "/a2a", "/agents/{agent}", "/agents/{agent}/a2a")
        for file in ("agent-card.json", "agent.json")
    ),
    "/a2a",
    "/agents/{agent}/a2a",
    "/mcp",
]
"""Every public route of the backend (spec/openapi.yaml, and each agent's own A2A endpoint and cards)."""


def _expected_paths(base_path: str, *, ui: bool = False) -> set[str]:
    """Every public route of the backend, as Netlify writes it (placeholders renamed alike to compare)."""
    prefix = base_path.rstrip("/")
    return {_generic(prefix + path) for path in [*PUBLIC_PATHS, *(["/ui", "/ui/:file"] if ui else [])]}


def _generic(path: str) -> str:
    return re.sub(r"\{\w+\}|:\w+", ":_", path)


def test_without_an_origin_the_build_refuses_and_says_why(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = runner.invoke(app, ["build", "--root", str(project), "--preset", "netlify"])
    output = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "Netlify cannot run Python" in output
    assert "--preset docker" in output and "aws-lambda" in output and "vercel" in output
    assert "--origin" in output and not (project / ".output").exists()


@pytest.mark.parametrize(
    ("origin", "message"),
    [
        ("https://user:secret@agents.example.com", "carries credentials"),
        ("https://agents.example.com/?token=1", "has a query or a fragment"),
        ("https://agents.example.com/#top", "has a query or a fragment"),
        ("ftp://agents.example.com", "is not an http(s) URL with a host"),
        ("https://", "is not an http(s) URL with a host"),
        ("https://agents.example.com:port", "is not a URL"),
        ('https://agents.example.com/"x', "has a space or a quote"),
    ],
)
def test_an_origin_that_cannot_be_proxied_to_is_refused(tmp_path: Path, origin: str, message: str) -> None:
    project = _project(tmp_path)
    result = runner.invoke(app, ["build", "--root", str(project), "--preset", "netlify", "--origin", origin])
    assert result.exit_code == 1 and message in " ".join(result.output.split()), result.output
    assert "secret" not in result.output  # a password in the URL is not echoed back


def test_every_agent_route_is_proxied_with_status_200_forced(tmp_path: Path) -> None:
    built = _build(_project(tmp_path), "--origin", ORIGIN + "/")
    output = Path(built["output"])
    redirects = _redirects(output)
    assert {_generic(rule["from"]) for rule in redirects} == _expected_paths("/")
    assert len(redirects) == len(_expected_paths("/"))  # one rule per route
    for rule in redirects:
        assert rule["status"] == 200 and rule["force"] is True, rule
        assert rule["to"] == ORIGIN + rule["from"], rule  # the same path on the backend, placeholders kept
    assert not any("__agent-unit" in rule["from"] for rule in redirects)  # the scheduler's routes stay private
    assert "/agents/:agent/a2a" in {rule["from"] for rule in redirects}  # each agent's own A2A endpoint too

    toml = (output / "netlify.toml").read_text()
    assert f"after {PROXY_TIMEOUT_SECONDS} seconds" in toml and "Last-Event-ID" in toml and "no Python" in toml
    lines = (output / "_redirects").read_text().splitlines()
    assert [line.split() for line in lines if not line.startswith("#")] == [
        [rule["from"], rule["to"], "200!"] for rule in redirects
    ]

    assert built["files"] == ["_redirects", "index.html", "netlify.toml"]
    assert not (output / "app").exists() and not (output / "vendor").exists()  # nothing for a Python host
    assert built["run"].startswith("netlify deploy --dir ") and "--no-build" in built["run"]
    notes = " ".join(built["notes"])
    assert f"{PROXY_TIMEOUT_SECONDS} s" in notes and "Last-Event-ID" in notes and "no Python" in notes

    index = (output / "index.html").read_text()
    assert "<code>refund</code>" in index and "<code>support</code>" in index and 'href="/agents"' in index


def test_the_origin_comes_from_the_config_and_the_flag_wins(tmp_path: Path) -> None:
    project = _project(tmp_path, 'origin = "https://from-config.example.com"\n')
    output = Path(_build(project)["output"])
    assert {rule["to"].split("/")[2] for rule in _redirects(output)} == {"from-config.example.com"}
    output = Path(_build(project, "--origin", "https://from-flag.example.com")["output"])
    assert {rule["to"].split("/")[2] for rule in _redirects(output)} == {"from-flag.example.com"}


def test_a_base_path_and_an_origin_path_are_both_kept(tmp_path: Path) -> None:
    project = _project(tmp_path, 'base_path = "/api/agents"\n')
    stage = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"
    output = Path(_build(project, "--origin", stage)["output"])
    redirects = {rule["from"]: rule["to"] for rule in _redirects(output)}
    api = {path: target for path, target in redirects.items() if path.startswith("/api/agents/")}
    assert {_generic(path) for path in api} == _expected_paths("/api/agents")
    assert all(target == stage + path for path, target in api.items())
    # A2A clients look for the card at the site's root: it is proxied to the backend's card.
    assert redirects["/.well-known/agent-card.json"] == f"{stage}/api/agents/.well-known/agent-card.json"
    assert redirects["/.well-known/agent.json"] == f"{stage}/api/agents/.well-known/agent.json"
    assert 'href="/api/agents/agents"' in (output / "index.html").read_text()


def test_public_is_published_and_its_redirects_come_after_the_agent_routes(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "public" / "assets").mkdir(parents=True)
    (project / "public" / "index.html").write_text("<h1>my chat</h1>\n")
    (project / "public" / "assets" / "app.js").write_text("console.log('hi')\n")
    (project / "public" / "assets" / "_redirects").write_text("not the site's\n")  # only the top level is merged
    (project / "public" / "_redirects").write_text("/*  /index.html  200\n")
    built = _build(project, "--origin", ORIGIN)
    output = Path(built["output"])
    assert (output / "index.html").read_text() == "<h1>my chat</h1>\n"  # theirs, not the generated page
    assert (output / "assets" / "app.js").exists() and (output / "assets" / "_redirects").exists()
    assert built["files"] == ["_redirects", "assets/", "index.html", "netlify.toml"]

    rules = [line for line in (output / "_redirects").read_text().splitlines() if line and not line.startswith("#")]
    assert rules[-1] == "/*  /index.html  200" and all(rule.endswith("200!") for rule in rules[:-1])
    assert len(rules) - 1 == len(_expected_paths("/"))
    # netlify.toml repeats no rule: Netlify would keep its copy, after the single-page app's catch-all.
    assert _redirects(output) == [] and "ahead of public/_redirects" in (output / "netlify.toml").read_text()

    (project / "public" / "_redirects").unlink()
    output = Path(_build(project, "--origin", ORIGIN)["output"])
    assert len(_redirects(output)) == len(_expected_paths("/"))


def test_public_netlify_toml_is_refused_and_the_next_build_may_replace_the_folder(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "public").mkdir()
    (project / "public" / "netlify.toml").write_text("[build]\n")
    out = tmp_path / "site"
    result = runner.invoke(
        app, ["build", "--root", str(project), "--preset", "netlify", "--origin", ORIGIN, "--out", str(out)]
    )
    assert result.exit_code == 1 and "public/netlify.toml" in " ".join(result.output.split()), result.output
    (project / "public" / "netlify.toml").unlink()
    _build(project, "--origin", ORIGIN, "--out", str(out))
    assert len(_redirects(out)) == len(_expected_paths("/"))


@pytest.fixture(scope="module")
def netlify_parsers(request: pytest.FixtureRequest) -> Path:
    """A folder with Netlify's parsers installed from npm, kept in pytest's cache between runs."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Node.js and npm to check the generated Netlify config with Netlify's parsers")
        pytest.skip("Node.js and npm are not installed: Netlify's own parsers cannot read the output here")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 18:
        pytest.skip(f"Node.js {version} is older than @netlify/config's 18.14")
    folder = request.config.cache.mkdir("netlify-parsers-" + "-".join(re.sub(r"\W", "", p) for p in NETLIFY_PACKAGES))
    if not (folder / "node_modules" / "@netlify" / "config").is_dir():
        done = subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--ignore-scripts", *NETLIFY_PACKAGES],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            message = f"npm could not install {' '.join(NETLIFY_PACKAGES)}:\n{done.stderr[-2000:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
    (folder / "read.mjs").write_text(NETLIFY_READ)
    return folder


def _netlify_reads(parsers: Path, cwd: Path, published: Path) -> list[str]:
    done = subprocess.run(
        ["node", str(parsers / "read.mjs"), str(cwd), str(published)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NETLIFY_AUTH_TOKEN": ""},  # offline: no account, no API
    )
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read["errors"] == [] and not any("syntax error" in line for line in read["warnings"]), read
    return [f"{rule['from']} {rule['to']} {rule['status']}{'!' if rule['force'] else ''}" for rule in read["redirects"]]


@pytest.mark.parametrize("public_redirects", [False, True])
def test_netlify_reads_the_rules_first_wherever_the_deploy_runs(
    tmp_path: Path, netlify_parsers: Path, public_redirects: bool
) -> None:
    project = _project(tmp_path, 'base_path = "/api/agents"\n')
    if public_redirects:
        (project / "public").mkdir()
        (project / "public" / "_redirects").write_text("/*  /index.html  200\n")
    output = Path(_build(project, "--origin", ORIGIN)["output"])
    lines = (output / "_redirects").read_text().splitlines()
    ours = [" ".join(line.split()) for line in lines if line.endswith("200!")]
    assert len(ours) == len(_expected_paths("/api/agents")) + 2  # and the two root cards

    elsewhere = tmp_path / "elsewhere"  # `netlify deploy --dir .output/netlify` from a folder with no netlify.toml
    elsewhere.mkdir()
    theirs = ["/* /index.html 200"] if public_redirects else []
    assert _netlify_reads(netlify_parsers, elsewhere, output) == ours + theirs
    assert _netlify_reads(netlify_parsers, output, output) == ours + theirs  # run inside the output: netlify.toml too


def test_with_ui_on_the_approvals_inbox_is_proxied_too(tmp_path: Path) -> None:
    built = _build(_project(tmp_path, "ui = true\n"), "--origin", ORIGIN)
    redirects = _redirects(Path(built["output"]))
    assert {_generic(rule["from"]) for rule in redirects} == _expected_paths("/", ui=True)
    assert "GET    /ui/" in built["routes"]
