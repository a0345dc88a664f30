"""``--preset aws-lambda``: the template passes cfn-lint (with the SAM transform), and the built zip runs.

No AWS account is reachable here. What runs is the same code path Lambda runs: the zip is
unpacked into a fresh folder and run in containers (``tests/support/lambda_containers``), each
a process of this Python with nothing else on its path (``python -I -S``) that imports the
handler once and calls ``handler.handler(event, context)`` with real API Gateway v2 / Function
URL / EventBridge events, one after another, over a shared store (a real Redis, and DynamoDB on
moto's emulator). A container is reused while it is idle, as Lambda reuses a warm one; a test
whose point is a cold container says so (``cold=True``: each invocation a new process, or a
``restart()``). Continuations go to a local stand-in for the Function URL that invokes the
function once per request, in a new container whenever the others are busy, as Lambda would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from ..support.lambda_containers import Function
from ..support.serverless_agents import LONG, NAPPER

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`

ROOT = Path(__file__).resolve().parents[2]
SECRET = "a-secret-of-sixteen-chars"

# Before the handler's import: OpenTelemetry's SDK (this test's, after the function's own packages)
# configured the way an app does, batching spans for ten minutes: only a flush exports them before
# that. After each invocation: the names of the spans exported by the time the handler returned.
OTEL_SETUP = """
import sys
sys.path.append({purelib!r})
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=600_000))
trace.set_tracer_provider(provider)
"""
OTEL_SPANS = 'response["spans"] = sorted(span.name for span in exporter.get_finished_spans())'


def lint(template: str) -> list[str]:
    """cfn-lint's errors and warnings, as its command line reports them (it runs the SAM transform first)."""
    from cfnlint.api import lint_all

    return [str(match) for match in lint_all(template) if match.rule.id[0] in "EW"]


def build(tmp: Path, storage: str) -> Path:
    """Build the refund example (plus a sleeper and a long run) and unpack function.zip into a fresh folder."""
    project = tmp / "project"
    shutil.copytree(ROOT / "examples" / "refund", project, ignore=shutil.ignore_patterns(".output", ".agent-unit"))
    (project / "agents" / "napper.py").write_text(NAPPER)
    (project / "agents" / "long.py").write_text(LONG)
    (project / "agent-unit.toml").write_text(f'name = "refund"\nstorage = "{storage}"\nbudget = "1s"\n')
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "aws-lambda", "--json"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    output = project / ".output" / "aws-lambda"
    unpacked = tmp / "function"
    with zipfile.ZipFile(output / "function.zip") as archive:
        archive.extractall(unpacked)
    return output


class Lambda:
    """Invokes the unpacked function the way Lambda does: in a warm container while one is idle,
    else in a new one (``function``, a :class:`Function`); ``cold=True``: each call in a new one.

    ``env`` is read when a container starts: set it before the first invocation (or ``restart()``).
    """

    def __init__(self, folder: Path, env: dict[str, str], *, cold: bool = False) -> None:
        self.env = {"PATH": os.environ.get("PATH", ""), "AGENT_UNIT_SECRET": SECRET, **env}
        self.function = Function(folder, self.env, cold=cold)
        self.invocations = 0
        self.url: FunctionUrl | None = None
        self._lock = threading.Lock()

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.invocations += 1
        return self.function.invoke(event)  # type: ignore[no-any-return]

    def restart(self) -> None:
        """End every container: the next invocation is a cold start."""
        self.function.restart()

    def close(self) -> None:
        self.function.close()

    def __enter__(self) -> Lambda:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def http(self, method: str, path: str, body: Any = None, *, function_url: bool = False, **headers: str) -> Any:
        """An HTTP API (payload 2.0) event, or a Function URL event; the decoded JSON response."""
        raw_path, _, query = path.partition("?")
        domain = "abc123.lambda-url.eu-west-1.on.aws" if function_url else "abc123.execute-api.eu-west-1.amazonaws.com"
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": raw_path,
            "rawQueryString": query,
            "headers": {"content-type": "application/json", "host": domain, **headers},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "abc123",
                "domainName": domain,
                "domainPrefix": "abc123",
                "http": {"method": method, "path": raw_path, "protocol": "HTTP/1.1", "sourceIp": "198.51.100.7"},
                "requestId": f"req-{time.monotonic_ns()}",
                "routeKey": "$default",
                "stage": "$default",
                "time": "30/Nov/2026:00:00:00 +0000",
                "timeEpoch": int(time.time() * 1000),
            },
            "body": None if body is None else json.dumps(body),
            "isBase64Encoded": False,
        }
        response = self.invoke(event)
        text = response.get("body") or ""
        response["json"] = json.loads(text) if text and "json" in response["headers"].get("content-type", "") else None
        return response


class FunctionUrl:
    """A stand-in for the function's own URL: each POST is a new invocation (for continuations)."""

    def __init__(self, function: Lambda) -> None:
        outer = function
        self.continuations: list[str] = []
        continuations = self.continuations

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path == "/__agent-unit/continue":
                    continuations.append(body["run_id"])
                headers = {"authorization": self.headers.get("authorization", "")}
                response = outer.http("POST", self.path, body, function_url=True, **headers)
                self.send_response(response["statusCode"])
                self.end_headers()
                self.wfile.write((response.get("body") or "").encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def redis_build(tmp_path_factory: pytest.TempPathFactory, redis_server: Any) -> Path:
    return build(tmp_path_factory.mktemp("lambda-redis"), redis_server.url)


@pytest.fixture
def redis_function(redis_build: Path, redis_url: str) -> Iterator[Lambda]:
    function = Lambda(redis_build.parent.parent.parent / "function", {"AGENT_UNIT_STORAGE": redis_url})
    function.url = FunctionUrl(function)
    function.env["AGENT_UNIT_URL"] = function.url.url
    yield function
    function.close()
    function.url.close()


def test_the_zip_carries_bytecode_for_every_module(redis_build: Path) -> None:
    """Lambda's code folder is read-only: without bytecode in the zip every cold start compiles every
    module it imports. The build's Python is the function's here (the default ``--python``)."""
    tag = sys.implementation.cache_tag
    with zipfile.ZipFile(redis_build / "function.zip") as archive:
        names = set(archive.namelist())
        sources = [PurePosixPath(name) for name in names if name.endswith(".py")]
        missing = [str(s) for s in sources if str(s.parent / "__pycache__" / f"{s.stem}.{tag}.pyc") not in names]
        assert sources and missing == []
        assert int.from_bytes(archive.read(f"__pycache__/handler.{tag}.pyc")[4:8], "little") == 0b01  # unchecked hash


def test_the_template_passes_cfn_lint_with_the_sam_transform(redis_build: Path) -> None:
    template = (redis_build / "template.yaml").read_text()
    assert lint(template) == []
    assert "AGENT_UNIT_SECRET: !Ref AgentUnitSecret" in template  # a parameter, never a literal
    assert 'Input: \'{"agent_unit": "sweep"}\'' in template


def test_a_dynamodb_build_declares_its_table_and_passes_cfn_lint(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "agents").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "refund" / "agents" / "refund.py", project / "agents")
    shutil.copy(ROOT / "examples" / "refund" / "payments.py", project)
    (project / "agent-unit.toml").write_text('storage = "dynamodb://agent-runs?region=eu-west-1"\n')
    from agent_unit_cli.build import build as run_build
    from agent_unit_cli.config import load_config

    config, _ = load_config(project)
    result = run_build(project, config, preset="aws-lambda")
    template = (result.output / "template.yaml").read_text()
    assert lint(template) == []
    assert 'TableName: "agent-runs"' in template and "IndexName: due" in template
    assert any("`authorize`" in note for note in result.notes)  # the Function URL is public: say what guards it
    assert 'AGENT_UNIT_STORAGE: !Sub "dynamodb://${RunsTable}?region=${AWS::Region}"' in template


def test_the_build_refuses_storage_an_invocation_does_not_share(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "agents").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "refund" / "agents" / "refund.py", project / "agents")
    done = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--preset", "aws-lambda"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())  # Rich wraps long lines
    assert "needs storage that every invocation shares, not sqlite" in said


def test_pause_resume_and_finish_through_real_events_each_in_a_cold_process(redis_function: Lambda) -> None:
    redis_function.function.cold = True  # the point: each step in a container that never saw the run before
    started = redis_function.http("POST", "/agents/refund/runs", {"input": {"order_id": "o_1"}})
    assert started["statusCode"] == 200  # buffered: the run ran in the invocation until it parked
    run = started["json"]
    assert run["status"] == "interrupted" and run["interrupt"]["name"] == "approve-refund"
    resumed = redis_function.http(
        "POST", f"/runs/{run['id']}/resume", {"answer": {"approved": True}}, function_url=True
    )
    assert resumed["statusCode"] == 200 and resumed["json"]["status"] == "completed"
    assert resumed["json"]["output"] == "refunded"
    events = redis_function.http("GET", f"/runs/{run['id']}/events", function_url=True)
    assert events["headers"]["content-type"].startswith("text/event-stream")
    types = [json.loads(line[5:])["type"] for line in events["body"].splitlines() if line.startswith("data:")]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED" and "RUN_INTERRUPTED" in types
    assert redis_function.invocations == 3 and redis_function.function.started == 3


def test_a_runs_spans_are_exported_before_the_handler_returns(redis_function: Lambda) -> None:
    redis_function.function.before = OTEL_SETUP.format(purelib=sysconfig.get_paths()["purelib"])
    redis_function.function.after = OTEL_SPANS
    started = redis_function.http("POST", "/agents/refund/runs", {"input": {"order_id": "o_1"}})
    assert started["json"]["status"] == "interrupted"
    assert started["spans"] == ["run refund", "step load-order"]


def test_a_streamed_start_answers_with_the_events_so_far(redis_function: Lambda) -> None:
    response = redis_function.http(
        "POST", "/agents/refund/runs", {"input": {"order_id": "o_2"}}, accept="text/event-stream"
    )
    assert response["statusCode"] == 200
    types = [json.loads(line[5:])["type"] for line in response["body"].splitlines() if line.startswith("data:")]
    assert types[-1] == "RUN_INTERRUPTED"


def test_a_scheduled_event_wakes_a_sleeping_run(redis_function: Lambda) -> None:
    run = redis_function.http("POST", "/agents/napper/runs", {"input": "well"})["json"]
    assert run["status"] == "sleeping"
    time.sleep(1.2)
    assert redis_function.invoke({"agent_unit": "sweep"}) == {"woken": 1, "recovered": 0, "deleted": 0}
    done = redis_function.http("GET", f"/runs/{run['id']}")["json"]
    assert done["status"] == "completed" and done["output"] == "rested well"


def test_the_sweep_route_needs_the_secret(redis_function: Lambda) -> None:
    refused = redis_function.http("POST", "/__agent-unit/sweep", {})
    assert refused["statusCode"] == 401
    allowed = redis_function.http("POST", "/__agent-unit/sweep", {}, authorization=f"Bearer {SECRET}")
    assert allowed["statusCode"] == 200


def test_a_long_run_continues_across_several_invocations(redis_function: Lambda) -> None:
    first = redis_function.http("POST", "/agents/long/runs", {"input": 10})["json"]
    assert first["status"] in ("queued", "running")  # it yielded at its 1 s budget and handed itself on
    deadline = time.monotonic() + 90
    while (record := redis_function.http("GET", f"/runs/{first['id']}")["json"])["status"] != "completed":
        assert time.monotonic() < deadline, record
        time.sleep(0.5)
    assert record["output"] == sum(range(10))
    assert redis_function.url is not None
    # 3 s of work in 1 s slices: continued at the function's own URL, in fresh invocations, twice or more
    assert redis_function.url.continuations.count(first["id"]) >= 2


def test_pause_and_resume_over_dynamodb_on_the_emulator(tmp_path: Path, dynamodb_endpoint: str) -> None:
    output = build(tmp_path, "dynamodb://runs?region=us-east-1")
    table = f"dynamodb://lambda-runs?region=us-east-1&endpoint_url={dynamodb_endpoint}&create=true"
    function = Lambda(
        tmp_path / "function",
        {"AGENT_UNIT_STORAGE": table, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"},
        cold=True,  # resumed by a container that never saw the run: all it knows is in the table
    )
    run = function.http("POST", "/agents/refund/runs", {"input": {"order_id": "o_3"}})["json"]
    assert run["status"] == "interrupted"
    done = function.http("POST", f"/runs/{run['id']}/resume", {"answer": {"approved": False}}, function_url=True)
    assert done["json"]["status"] == "completed" and done["json"]["output"] == "declined"
    assert (output / "vendor" / "boto3").is_dir()  # the function carries its store's driver


def test_rest_api_and_alb_events_go_through_the_same_handler(redis_function: Lambda) -> None:
    """API Gateway REST API (payload 1.0) and Application Load Balancer events, one after the other in a container."""
    rest = redis_function.invoke(
        {
            "resource": "/{proxy+}",
            "path": "/agents",
            "httpMethod": "GET",
            "headers": {"host": "abc123.execute-api.eu-west-1.amazonaws.com"},
            "multiValueHeaders": {"host": ["abc123.execute-api.eu-west-1.amazonaws.com"]},
            "queryStringParameters": None,
            "multiValueQueryStringParameters": None,
            "pathParameters": {"proxy": "agents"},
            "stageVariables": None,
            "requestContext": {
                "resourcePath": "/{proxy+}",
                "httpMethod": "GET",
                "path": "/prod/agents",
                "stage": "prod",
                "requestId": "r-1",
                "identity": {"sourceIp": "198.51.100.7"},
            },
            "body": None,
            "isBase64Encoded": False,
        }
    )
    assert rest["statusCode"] == 200
    assert [agent["name"] for agent in json.loads(rest["body"])["agents"]] == ["long", "napper", "refund"]
    alb = redis_function.invoke(
        {
            "requestContext": {"elb": {"targetGroupArn": "arn:aws:elasticloadbalancing:eu-west-1:1:targetgroup/a/b"}},
            "httpMethod": "GET",
            "path": "/agents",
            "queryStringParameters": {},
            "headers": {"host": "agents.example.com", "x-forwarded-for": "198.51.100.7"},
            "body": "",
            "isBase64Encoded": False,
        }
    )
    assert alb["statusCode"] == 200 and "refund" in alb["body"]
