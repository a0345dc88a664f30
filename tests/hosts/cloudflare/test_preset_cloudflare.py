"""``--preset cloudflare``: what the build writes, checked by wrangler itself and by its schema.

Python Workers cannot run here (workerd downloads Pyodide when it starts), so what runs is:

- ``wrangler deploy --dry-run`` (wrangler 4.86.0, the last release that runs on Node 20) on every
  generated ``wrangler.jsonc``, the user's resources merged in: it reads the file, warns on what
  it does not know, bundles the entry and lists the bindings, all offline;
- wrangler's ``config-schema.json`` (from the 4.164.0 package) validating the same files;
- the built entry compiled by a bare Python (``-I -S``).

The npm packages are installed once into the user's cache folder (``tests/hosts/cloudflare/npm.py``).
Without node and npm the tests skip here and fail in CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agent_unit.errors import BuildError
from agent_unit_cli.build import build
from agent_unit_cli.config import Config
from agent_unit_cli.presets import cloudflare

from .npm import cached, npm, wrangler_folder

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_FROM = "4.164.0"  # the wrangler package whose config-schema.json the files are validated against

OWN_OBJECT = """
from workers import DurableObject, Response


class Counter(DurableObject):
    async def fetch(self, request):
        return Response("1")
"""

OWN_APP = """
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


async def hello(request):
    return JSONResponse({"hello": "world"})


app = Starlette(routes=[Route("/", hello)])
"""

THEIR_RESOURCES: dict[str, Any] = {
    "compatibility_flags": ["nodejs_compat"],
    "kv_namespaces": [{"binding": "CACHE", "id": "0123456789abcdef0123456789abcdef"}],
    "r2_buckets": [{"binding": "FILES", "bucket_name": "files"}],
    "d1_databases": [
        {"binding": "APP_DB", "database_name": "app", "database_id": "c0ffee00-0000-4000-8000-000000000001"}
    ],
    "durable_objects": {"bindings": [{"name": "COUNTER", "class_name": "Counter"}]},
    "migrations": [{"tag": "v1", "new_sqlite_classes": ["Counter"]}],
    "vars": {"GREETING": "hello"},
}

D1 = {
    "d1_databases": [{"binding": "DB", "database_name": "runs", "database_id": "c0ffee00-0000-4000-8000-000000000002"}]
}


@pytest.fixture(scope="session")
def wrangler() -> Path:
    return wrangler_folder() / "node_modules" / ".bin" / "wrangler"


@pytest.fixture(scope="session")
def wrangler_schema() -> dict[str, Any]:
    command = npm()

    def install(folder: Path) -> None:
        subprocess.run(
            [command, "pack", f"wrangler@{SCHEMA_FROM}"], cwd=folder, check=True, capture_output=True, timeout=600
        )
        with tarfile.open(next(folder.glob("wrangler-*.tgz"))) as archive:
            member = archive.extractfile("package/config-schema.json")
            assert member is not None
            (folder / "config-schema.json").write_bytes(member.read())

    schema: dict[str, Any] = json.loads(
        (cached(f"wrangler-schema-{SCHEMA_FROM}", install) / "config-schema.json").read_text()
    )
    return schema


def project(tmp_path: Path, config: str, files: dict[str, str] | None = None) -> Path:
    """The refund example with ``config`` as its agent-unit.toml (and more ``files``)."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "refund", root, ignore=shutil.ignore_patterns(".output", ".agent-unit"))
    (root / "agent-unit.toml").write_text(config)
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    return root


def build_cli(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "cloudflare"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def read_jsonc(path: Path) -> dict[str, Any]:
    """The generated wrangler.jsonc: JSON after its header of ``//`` comment lines."""
    lines = path.read_text().splitlines()
    found: dict[str, Any] = json.loads("\n".join(line for line in lines if not line.startswith("//")))
    return found


def dry_run(wrangler: Path, output: Path, tmp_path: Path) -> str:
    """``wrangler deploy --dry-run`` in the output; its whole output, after checking it warned of nothing."""
    done = subprocess.run(
        [str(wrangler), "deploy", "--dry-run", "--outdir", str(tmp_path / "dist")],
        cwd=output,
        capture_output=True,
        text=True,
        env={**os.environ, "WRANGLER_SEND_METRICS": "false", "NO_COLOR": "1", "CI": "true"},
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "WARNING" not in said and "▲" not in said, said
    return said


def validate(schema: dict[str, Any], config: dict[str, Any]) -> list[str]:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [error.message for error in validator.iter_errors(config)]


CONFIGS = {
    "durable objects, a task and the user's own resources": (
        'name = "refund"\nsweep = "*/5 * * * *"\n[tasks.digest]\nschedule = "0 8 * * 1-5"\n'
        'handler = "jobs:digest"\n[cloudflare]\nexports = "durable"\n',
        THEIR_RESOURCES,
        {"durable.py": OWN_OBJECT, "jobs.py": "async def digest():\n    return None\n"},
    ),
    "the default runtime on D1": (
        'name = "refund"\nstorage = "d1://DB"\n[cloudflare]\nruntime = "default"\n',
        D1,
        {},
    ),
    "the user's own server": ('name = "refund"\nserver = "web:app"\n', {}, {"web.py": OWN_APP}),
}


def _toml(config: str, wrangler: dict[str, Any]) -> str:
    """``config`` with ``wrangler`` as its ``[cloudflare.wrangler]`` (JSON is a TOML inline value here)."""
    if not wrangler:
        return config
    lines = [f"{key} = {json.dumps(value)}" for key, value in wrangler.items()]
    return config + "[cloudflare.wrangler]\n" + "\n".join(lines).replace('": ', '" = ') + "\n"


@pytest.mark.parametrize("case", list(CONFIGS))
def test_every_generated_wrangler_config_passes_wranglers_dry_run_without_a_warning_and_its_schema(
    case: str, tmp_path: Path, wrangler: Path, wrangler_schema: dict[str, Any]
) -> None:
    config, theirs, files = CONFIGS[case]
    root = project(tmp_path, _toml(config, theirs), files)
    built = build_cli(root)
    assert built.returncode == 0, built.stderr + built.stdout
    output = root / ".output" / "cloudflare"
    generated = read_jsonc(output / "wrangler.jsonc")
    assert validate(wrangler_schema, generated) == []
    said = dry_run(wrangler, output, tmp_path)
    for binding in [
        item["binding"] for key in ("kv_namespaces", "r2_buckets", "d1_databases") for item in theirs.get(key, [])
    ]:
        assert f"env.{binding} " in said  # the user's resources, merged in
    if "durable objects" in case:
        assert "env.AGENT_UNIT_RUNS (AgentUnitRun)" in said and "env.AGENT_UNIT_INDEX (AgentUnitIndex)" in said
        assert "env.COUNTER (Counter)" in said
        assert [item["tag"] for item in generated["migrations"]] == ["v1", cloudflare.MIGRATION_TAG]
        assert generated["triggers"]["crons"] == ["*/5 * * * *", "0 8 * * MON-FRI"]
    else:
        assert "AGENT_UNIT_RUNS" not in said and "migrations" not in generated


def test_the_schema_check_refuses_what_wrangler_does_not_know(wrangler_schema: dict[str, Any]) -> None:
    config = cloudflare.wrangler_config(Config())
    assert validate(wrangler_schema, config) == []
    assert validate(wrangler_schema, {**config, "durable_object": {}}) != []
    assert validate(wrangler_schema, {**config, "triggers": {"crons": "* * * * *"}}) != []


def test_wrangler_itself_warns_of_a_field_it_does_not_know(wrangler: Path, tmp_path: Path) -> None:
    """The dry-run check can fail: an unknown field is a warning in wrangler's output."""
    output = tmp_path / "worker"
    (output / "src").mkdir(parents=True)
    (output / "src" / "entry.py").write_text("from workers import WorkerEntrypoint\n")
    config = {**cloudflare.wrangler_config(Config()), "durable_object": {}}
    (output / "wrangler.jsonc").write_text(json.dumps(config))
    with pytest.raises(AssertionError, match="durable_object"):
        dry_run(wrangler, output, tmp_path)


def test_the_worker_pins_python_3_14_by_date_and_flag_as_workers_py_selects_it() -> None:
    config = cloudflare.wrangler_config(Config())
    assert config["compatibility_date"] >= "2026-09-08"
    # pywrangler (workers-py 1.16.7, metadata.py): 3.14 is chosen by the flag python_workers_20260610
    assert {"python_workers", "python_workers_20260610"} <= set(config["compatibility_flags"])
    assert config["main"] == "src/entry.py"


def test_the_output_holds_the_entry_the_app_the_agents_and_the_runtime_and_the_entry_compiles_bare(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, 'name = "refund"\n')
    built = build_cli(root)
    assert built.returncode == 0, built.stderr + built.stdout
    src = root / ".output" / "cloudflare" / "src"
    runtime = ("agent_unit/__init__.py", "agent_unit/hosts/cloudflare/d1_store.py")
    for path in ("entry.py", "agents/refund.py", "payments.py", *runtime):
        assert (src / path).is_file(), path
    assert not (root / ".output" / "cloudflare" / "vendor").exists()  # pywrangler installs the packages
    entry = (src / "entry.py").read_text()
    assert "class Default(WorkerEntrypoint):" in entry
    assert "AgentUnitRun = worker.AgentUnitRun" in entry and "AgentUnitIndex = worker.AgentUnitIndex" in entry
    compiled = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            "import sys; compile(open(sys.argv[1]).read(), 'entry.py', 'exec')",
            str(src / "entry.py"),
        ],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
    assert "next: cd .output/cloudflare && uv run pywrangler deploy" in " ".join(built.stdout.split())


def test_the_workers_pyproject_lists_the_runtimes_packages_and_not_what_only_a_server_needs(tmp_path: Path) -> None:
    root = project(tmp_path, 'name = "Refund Desk"\n')
    assert build_cli(root).returncode == 0
    pyproject = tomllib.loads((root / ".output" / "cloudflare" / "pyproject.toml").read_text())
    names = {requirement.split("==")[0] for requirement in pyproject["project"]["dependencies"]}
    assert {"pydantic", "starlette", "ag-ui-protocol"} <= names
    assert not names & {"uvicorn", "agent-unit"}
    assert pyproject["project"]["name"] == "refund-desk"
    assert "workers-py" in pyproject["dependency-groups"]["dev"]


def _refusal(tmp_path: Path, values: dict[str, Any], files: dict[str, str] | None = None) -> str:
    root = project(tmp_path, "", files)
    with pytest.raises(BuildError) as caught:
        build(root, Config.model_validate(values), preset="cloudflare")
    return str(caught.value)


@pytest.mark.parametrize(
    ("storage", "why"),
    [
        ("redis://localhost:6379", "sockets and threads"),
        ("postgres://app@db/runs", "sockets and threads"),
        ("dynamodb://runs?region=us-east-1", "boto3"),
        ("kv://CACHE", "no compare-and-set"),
        ("sqlite:///runs.db", "no file system"),
    ],
)
def test_a_store_a_worker_cannot_use_is_refused_naming_d1_and_the_durable_objects_runtime(
    tmp_path: Path, storage: str, why: str
) -> None:
    message = _refusal(tmp_path, {"storage": storage, "cloudflare": {"runtime": "default"}})
    assert why in message and "d1://" in message and "durable-objects" in message


def test_the_durable_objects_runtime_takes_no_storage(tmp_path: Path) -> None:
    assert 'runtime = "default"' in _refusal(tmp_path, {"storage": "d1://DB"})


def test_d1_storage_needs_its_binding_in_the_users_wrangler_resources(tmp_path: Path) -> None:
    message = _refusal(tmp_path, {"storage": "d1://RUNS", "cloudflare": {"runtime": "default"}})
    assert "d1_databases" in message and 'binding = "RUNS"' in message


@pytest.mark.parametrize("name", cloudflare.RESERVED)
def test_a_build_that_reuses_a_reserved_name_says_so_and_stops(tmp_path: Path, name: str) -> None:
    theirs = {"durable_objects": {"bindings": [{"name": name, "class_name": name}]}}
    message = _refusal(tmp_path, {"cloudflare": {"wrangler": theirs}})
    assert name in message and "rename yours" in message
    assert not (tmp_path / "project" / ".output").exists()


def test_an_exported_class_with_a_reserved_name_is_refused(tmp_path: Path) -> None:
    own = OWN_OBJECT.replace("Counter", "AgentUnitRun")
    message = _refusal(tmp_path, {"cloudflare": {"exports": "durable"}}, {"durable.py": own})
    assert "AgentUnitRun" in message and "rename it" in message


def test_the_users_resources_are_merged_in_never_replacing_the_workers_own() -> None:
    config = Config.model_validate({"cloudflare": {"wrangler": THEIR_RESOURCES}})
    merged = cloudflare.wrangler_config(config)
    assert [item["name"] for item in merged["durable_objects"]["bindings"]] == [
        "AGENT_UNIT_RUNS",
        "AGENT_UNIT_INDEX",
        "COUNTER",
    ]
    assert merged["compatibility_flags"] == ["python_workers", "python_workers_20260610", "nodejs_compat"]
    assert merged["kv_namespaces"] == THEIR_RESOURCES["kv_namespaces"] and merged["vars"] == {"GREETING": "hello"}
    assert merged["main"] == "src/entry.py"


def test_the_sweep_and_the_tasks_get_cron_triggers_in_cloudflares_weekday_names() -> None:
    config = Config.model_validate(
        {
            "sweep": "* * * * *",
            "tasks": {
                "a": {"schedule": "0 9 * * 0", "handler": "m:f"},
                "b": {"schedule": "* * * * *", "handler": "m:g"},
            },
        }
    )
    assert cloudflare.crons(config.sweep, config.tasks) == {"* * * * *": [cloudflare.SWEEP, "b"], "0 9 * * SUN": ["a"]}
    assert cloudflare.crons(False, {}) == {}


def test_a_package_of_the_project_that_ships_compiled_code_is_named_in_a_warning(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    (root / "requirements.txt").write_text("httpx\nrpds-py\n")  # pure Python; compiled (Rust) here
    result = build(root, Config(), preset="cloudflare")
    native = [warning for warning in result.warnings if "ships compiled code" in warning]
    assert len(native) == 1 and native[0].startswith("rpds-py ")
    assert "pywrangler sync" in native[0]


def test_a_project_that_asks_for_opentelemetry_is_told_a_worker_emits_none(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    (root / "requirements.txt").write_text("httpx\nopentelemetry-sdk>=1.30\n")
    result = build(root, Config(), preset="cloudflare")
    assert [warning for warning in result.warnings if "OpenTelemetry" in warning] == [
        "OpenTelemetry is not emitted from a Worker: its SDK exports from threads and sockets, which "
        "Python Workers do not have, so runs there send no spans, metrics or logs (OTEL_* settings are ignored)"
    ]
    assert not any(
        "OpenTelemetry" in warning
        for warning in build(project(tmp_path / "b", ""), Config(), preset="cloudflare").warnings
    )


def test_a_compiled_dependency_with_no_pyodide_wheel_on_pypi_is_named_with_who_requires_it(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    result = build(root, Config(), preset="cloudflare")
    native = [warning for warning in result.warnings if "ships compiled code" in warning]
    assert native == [
        "rpds-py (needed by jsonschema) ships compiled code and PyPI has no wheel of it for Pyodide: "
        "`uv run pywrangler sync` installs it from Pyodide's own index; an install from PyPI alone leaves it out"
    ]


def test_a_compiled_package_deep_in_the_requirements_is_named_with_the_chain_that_brings_it_in() -> None:
    found = cloudflare.compiled_dependencies(["jsonschema-specifications", "pydantic"])
    assert found == {"rpds-py": ["jsonschema-specifications", "referencing", "rpds-py"]}  # pydantic-core: on PyPI


def test_a_d1_store_on_any_other_preset_is_refused_naming_the_cloudflare_preset(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    with pytest.raises(BuildError, match="--preset cloudflare"):
        build(root, Config.model_validate({"storage": "d1://DB"}), preset="server")


def test_the_configured_url_reaches_the_worker_as_agent_unit_url_beside_the_users_vars() -> None:
    config = Config.model_validate(
        {"url": "https://agents.example.com", "cloudflare": {"wrangler": {"vars": {"A": "1"}}}}
    )
    assert cloudflare.wrangler_config(config)["vars"] == {"AGENT_UNIT_URL": "https://agents.example.com", "A": "1"}


RUN_THE_ENTRY = """
import asyncio, json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import d1_sim
import workers_sim

class Clock:
    def time(self):
        return time.time()

sim = workers_sim.WorkersSim(Clock())
import entry


classes = {"AgentUnitRun": entry.AgentUnitRun, "AgentUnitIndex": entry.AgentUnitIndex, "Counter": entry.Counter}
bindings = {"AGENT_UNIT_RUNS": "AgentUnitRun", "AGENT_UNIT_INDEX": "AgentUnitIndex", "COUNTER": "Counter"}
variables = {"AGENT_UNIT_SECRET": "a-secret", "DB": d1_sim.D1Database(sys.argv[3])}  # D1 bound as DB
sim.isolate(entry.Default, classes, bindings, variables)

async def main():
    manifest = await sim.fetch(workers_sim.Request("https://worker.example/agents"))
    started = await sim.fetch(
        workers_sim.Request(
            "https://worker.example/agents/refund/runs?wait=1",
            method="POST",
            headers={"content-type": "application/json"},
            body=json.dumps({"input": {"order_id": "o_1"}}),
        )
    )
    await sim.scheduled("* * * * *")  # the sweep's Cron Trigger
    run = json.loads(await started.bytes())
    print(json.dumps([manifest.status, started.status, run["status"], entry.Counter.__module__]))

asyncio.run(main())
"""


@pytest.mark.parametrize("runtime", ["durable-objects", "default"])
def test_the_built_entry_serves_the_agents_and_exports_the_users_classes_in_the_workers_simulation(
    tmp_path: Path, runtime: str
) -> None:
    """The entry as built, with the runtime's ``create_worker``, in the simulation of ``workers``
    (the default runtime over the D1 simulation)."""
    simulation = Path(__file__).with_name("workers_sim.py")
    if not simulation.exists():  # the runtime side's simulation: this branch has not merged it yet
        pytest.skip("tests/hosts/cloudflare/workers_sim.py is not in this tree")
    config = 'name = "refund"\n[cloudflare]\nexports = "durable"\n'
    if runtime == "default":
        config = 'name = "refund"\nstorage = "d1://DB"\n[cloudflare]\nexports = "durable"\nruntime = "default"\n'
        config = _toml(config, D1)
    root = project(tmp_path, config, {"durable.py": OWN_OBJECT})
    built = build_cli(root)
    assert built.returncode == 0, built.stderr + built.stdout
    src = root / ".output" / "cloudflare" / "src"
    ran = subprocess.run(
        [sys.executable, "-I", "-c", RUN_THE_ENTRY, str(simulation.parent), str(src), str(tmp_path / "d1.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == [200, 200, "interrupted", "durable"]


def test_an_earlier_compatibility_date_of_the_user_keeps_the_one_that_selects_python_3_14() -> None:
    earlier = Config.model_validate({"cloudflare": {"wrangler": {"compatibility_date": "2025-01-01"}}})
    later = Config.model_validate({"cloudflare": {"wrangler": {"compatibility_date": "2026-10-01"}}})
    assert cloudflare.wrangler_config(earlier)["compatibility_date"] == cloudflare.COMPATIBILITY_DATE
    assert cloudflare.wrangler_config(later)["compatibility_date"] == "2026-10-01"


def test_the_users_wrangler_resources_cannot_replace_the_workers_entry(tmp_path: Path) -> None:
    message = _refusal(tmp_path, {"cloudflare": {"wrangler": {"main": "src/app.py"}}})
    assert "cloudflare.wrangler.main" in message and "remove it" in message


@pytest.mark.parametrize(
    ("config", "budget"),
    [
        ('name = "refund"\n', "10m"),
        ('name = "refund"\nbudget = "90s"\n', "90s"),
        (
            'name = "refund"\nstorage = "d1://DB"\n[cloudflare]\nruntime = "default"\n'
            '[[cloudflare.wrangler.d1_databases]]\nbinding = "DB"\ndatabase_name = "d"\ndatabase_id = "i"\n',
            "25s",
        ),
    ],
)
def test_a_worker_run_yields_at_a_default_budget_chosen_from_workers_limits(
    tmp_path: Path, config: str, budget: str
) -> None:
    root = project(tmp_path, config)
    build(root, Config.model_validate(tomllib.loads(config)), preset="cloudflare")
    assert f"budget={budget!r}," in (root / ".output" / "cloudflare" / "src" / "entry.py").read_text()


def test_an_adapter_added_from_a_folder_is_carried_into_the_workers_src(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"  # the adapter installed as `agent-unit add ./examples/agent-unit-adapter-echo` does
    echo_package = str(ROOT / "examples" / "agent-unit-adapter-echo")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), echo_package],
        check=True,
        capture_output=True,
    )
    monkeypatch.syspath_prepend(str(site))
    config = 'name = "refund"\nadapters = ["agent_unit_adapter_echo:adapter"]\n'
    echo = 'from agent_unit_adapter_echo import Echo\n\nagent = Echo(prefix="echo: ")\n'
    root = project(tmp_path, config, {"agents/echoer.py": echo})
    build(root, Config.model_validate(tomllib.loads(config)), preset="cloudflare")
    src = root / ".output" / "cloudflare" / "src"
    assert (src / "agent_unit_adapter_echo" / "__init__.py").is_file()
    assert "adapters=['agent_unit_adapter_echo:adapter']" in (src / "entry.py").read_text()
