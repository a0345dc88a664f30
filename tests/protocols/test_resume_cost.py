"""What one resume over HTTP costs, counted where the count does not depend on the machine:
store calls, tasks, environment reads, and the checks it makes on the way."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, MutableMapping
from typing import Any

import httpx
import jsonschema
import pytest
from starlette.datastructures import Headers, QueryParams

from agent_unit import Run, RunEngine, RunStatus, create_agent_unit, define_agent, telemetry
from agent_unit._answers import check_answer
from agent_unit._records import Interrupt, RunRecord
from agent_unit.errors import InvalidAnswer
from agent_unit.http.headers import header, query
from agent_unit.stores.memory import MemoryStore


async def work() -> int:
    return 1


@define_agent
async def approve(input: None, run: Run) -> str:
    """The HTTP benchmark's agent: one step, then a yes/no question."""
    await run.step("work", work)
    return "ok" if await run.interrupt("approve", {"x": 1}, answer=bool) else "declined"


@pytest.fixture
async def http(tmp_path: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_unit({"approve": approve}, store=f"sqlite:///{tmp_path / 'runs.db'}", background_sweep=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        client.app = app  # type: ignore[attr-defined]
        yield client
    await app.engine.aclose()


async def parked(http: httpx.AsyncClient) -> str:
    started = await http.post("/agents/approve/runs?wait=1", json={"input": None})
    assert started.json()["status"] == "interrupted"
    return str(started.json()["id"])


# What agent-unit's telemetry reads (opentelemetry, once imported by anything, reads its own).
TELEMETRY_VARIABLES = {
    "AGENT_UNIT_OTEL",
    "OTEL_SDK_DISABLED",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
}


class CountingEnviron(MutableMapping[str, str]):
    """The process's environment, with each read of a telemetry variable recorded."""

    def __init__(self, environ: MutableMapping[str, str]) -> None:
        self.environ = environ
        self.read: list[str] = []

    def __getitem__(self, name: str) -> str:
        if name in TELEMETRY_VARIABLES:
            self.read.append(name)
        return self.environ[name]

    def __setitem__(self, name: str, value: str) -> None:
        self.environ[name] = value

    def __delitem__(self, name: str) -> None:
        del self.environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


async def test_a_resume_over_http_reads_no_environment_variable(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    telemetry.reset()
    await parked(http)  # the first run reads the environment once
    run_id = await parked(http)
    environ = CountingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", environ)
    resumed = await http.post(f"/runs/{run_id}/resume?wait=1", json={"answer": True})
    assert resumed.json()["status"] == "completed" and resumed.json()["output"] == "ok"
    assert environ.read == []


async def test_telemetry_reads_the_environment_once_and_again_after_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_UNIT_OTEL", raising=False)
    telemetry.reset()
    environ = CountingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", environ)
    for _ in range(3):
        telemetry.active()
    first = list(environ.read)
    assert "AGENT_UNIT_OTEL" in first and "OTEL_EXPORTER_OTLP_ENDPOINT" in first
    assert environ.read == first  # the second and third asked nobody
    telemetry.reset()
    telemetry.active()
    assert environ.read == first * 2
    telemetry.reset()


async def test_a_resume_over_http_makes_three_store_calls_and_starts_one_task(http: httpx.AsyncClient) -> None:
    """Read (authorize), journal, then the claim and the end in one write (a resume that waits
    defers its claim to the execution's first write, and this one replays to its end): and one
    task, the execution; its lease renewal is a timer until a third of the lease has passed, and
    this execution ends long before. On SQLite those calls run 8 statements."""
    run_id = await parked(http)
    store = http.app.engine.store  # type: ignore[attr-defined]
    calls: list[str] = []
    for name in ("load_run", "save_run", "load_journal", "append", "read_events", "last_seq", "renew_lease"):
        method = getattr(store, name)

        def counted(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            calls.append(_name)
            return _method(*args, **kwargs)

        setattr(store, name, counted)  # on this instance only: the store itself answers
    tasks: list[str] = []
    loop = asyncio.get_running_loop()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        if "agent_unit" in coro.cr_code.co_filename:  # ours, not the test client's
            tasks.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # the SQL each call ran
    loop.set_task_factory(factory)  # type: ignore[arg-type]
    try:
        resumed = await http.post(f"/runs/{run_id}/resume?wait=1", json={"answer": True})
    finally:
        loop.set_task_factory(None)
        store._db.set_trace_callback(None)
        for name in ("load_run", "save_run", "load_journal", "append", "read_events", "last_seq", "renew_lease"):
            delattr(store, name)
    assert resumed.json()["status"] == "completed"
    assert calls == ["load_run", "load_journal", "save_run"]
    assert tasks == ["Executor._execute"]
    # read; journal read; claim and end: BEGIN, UPDATE, PRAGMA data_version, journal INSERT, events
    # INSERT (RUN_STARTED and RUN_FINISHED, one row), COMMIT (the run's last seq remembered from its
    # park, not sought)
    assert len(statements) == 8, statements


async def test_a_long_execution_renews_its_lease_every_third_of_it_and_stops_once_it_is_taken() -> None:
    renewals: list[float] = []

    class CountingStore(MemoryStore):
        async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
            renewals.append(asyncio.get_running_loop().time())
            return await super().renew_lease(run_id, owner=owner, expires=expires)

    ran: list[str] = []

    @define_agent
    async def slow(input: float, run: Run) -> str:
        await asyncio.sleep(input)
        ran.append("after the sleep")
        return "done"

    store = CountingStore()
    engine = RunEngine({"slow": slow}, store, lease_ttl="0.3s", background_sweep=False)
    began = asyncio.get_running_loop().time()
    record = await engine.start("slow", 0.45, wait=True)
    assert record.status == RunStatus.completed and ran == ["after the sleep"]
    assert len(renewals) >= 3  # at 0.1, 0.2, 0.3 and 0.4 s (later on a busy machine)
    assert 0.09 <= renewals[0] - began <= 0.3 and 0.09 <= renewals[1] - renewals[0] <= 0.3

    renewals.clear()
    taken = await engine.start("slow", 10.0)
    await asyncio.sleep(0.05)
    stored = await store.load_run(taken.id)
    assert stored is not None
    stored.lease_owner = "another-process/x"  # taken over elsewhere (its lease lapsed there)
    await store.save_run(stored, expected_version=stored.version)
    async with asyncio.timeout(2):
        await engine.wait(taken.id)  # the next renewal finds the lease gone: the execution stops
    assert renewals and ran == ["after the sleep"]
    await engine.aclose()


@pytest.mark.parametrize("kind", ["boolean", "string", "integer", "number", "null", "object", "array"])
def test_an_answer_to_a_type_only_schema_is_accepted_exactly_when_jsonschema_accepts_it(kind: str) -> None:
    schema = {"type": kind}
    record = RunRecord.model_construct(interrupt=Interrupt.model_construct(name="q", answer_schema=schema))
    values: list[Any] = [True, False, None, 0, 7, -3, 1.0, 2.5, 10**30, "", "yes", [], [1], {}, {"a": 1}]
    for value in values:
        fits = jsonschema.Draft202012Validator(schema).is_valid(value)
        if fits:
            assert check_answer(record, value) is not None
        else:
            with pytest.raises(InvalidAnswer, match="does not fit interrupt 'q'"):
                check_answer(record, value)


def test_a_yes_or_no_answer_is_checked_without_jsonschema() -> None:
    """jsonschema walks its keywords for each answer; a type alone is one isinstance."""
    import subprocess
    import sys

    script = """
import sys
sys.modules["jsonschema"] = None  # importing it fails: it must not be needed
from agent_unit._answers import check_answer
from agent_unit._records import Interrupt, RunRecord
record = RunRecord.model_construct(interrupt=Interrupt.model_construct(name="q", answer_schema={"type": "boolean"}))
print(check_answer(record, True), check_answer(record, False))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["true", "false"]


@pytest.mark.parametrize("name", [b"host", b"origin", b"accept", b"x-twice", b"content-type"])
def test_a_header_read_from_the_scope_is_what_starlette_reads(name: bytes) -> None:
    scope = {
        "type": "http",
        "headers": [
            (b"host", b"unit.example"),
            (b"x-twice", b"first"),
            (b"content-type", b"application/json; charset=\xe9"),
            (b"x-twice", b"second"),
        ],
    }
    assert header(scope, name) == Headers(scope=scope).get(name.decode())


@pytest.mark.parametrize(
    "raw",
    [b"", b"wait=1", b"wait", b"wait=", b"a=1&wait=0&wait=true", b"&&wait=yes&", b"=&wait=on", b"waits=1&wai=1",
     b"wait=%31", b"w%61it=1", b"wait=a+b", b"wait=caf\xe9", b"x=1;wait=1", b"wait=1=2"],
)  # fmt: skip
def test_a_query_parameter_read_from_the_scope_is_what_starlette_reads(raw: bytes) -> None:
    assert query({"type": "http", "query_string": raw}, "wait") == QueryParams(raw).get("wait")


@pytest.mark.parametrize("text", ["refund for café", "a lone \ud800 surrogate"])
def test_a_run_is_answered_with_the_bytes_its_public_view_gives(text: str) -> None:
    from datetime import UTC, datetime

    from agent_unit.http.responses import JSONResponse, run_response

    now = datetime.now(UTC)
    record = RunRecord(
        id="run_1", agent="a", thread_id="t", status=RunStatus.completed, input={"note": text}, output=2.5,
        created_at=now, updated_at=now, lease_owner="me/1", lease_expires=1.0, due_at=2.0,
    )  # fmt: skip
    answered = run_response(record, 202)
    assert answered.body == JSONResponse(record.public()).body and b"lease" not in answered.body
    assert answered.status_code == 202 and answered.headers["content-type"] == "application/json"


async def test_a_waiter_that_is_cancelled_leaves_the_execution_running() -> None:
    @define_agent
    async def slow(input: None, run: Run) -> str:
        await asyncio.sleep(0.2)
        return "done"

    engine = RunEngine({"slow": slow}, MemoryStore(), background_sweep=False)
    record = await engine.start("slow", None)
    waiter = asyncio.ensure_future(engine.wait(record.id))
    await asyncio.sleep(0.05)
    waiter.cancel()  # its client left
    with pytest.raises(asyncio.CancelledError):
        await waiter
    done = await engine.wait(record.id)
    assert done.status == RunStatus.completed and done.output == "done"
    await engine.aclose()


def test_assigning_fields_at_once_leaves_the_record_as_setting_each_does() -> None:
    from datetime import UTC, datetime

    from agent_unit._records import assign

    now = datetime.now(UTC)
    made: dict[str, Any] = {"id": "run_1", "agent": "a", "thread_id": "t", "status": RunStatus.interrupted}
    one, other = RunRecord(**made, created_at=now, updated_at=now), RunRecord(**made, created_at=now, updated_at=now)
    fields = {"status": RunStatus.running, "interrupt": None, "lease_owner": "me/1", "lease_expires": 2.0}
    for name, value in fields.items():
        setattr(one, name, value)
    assign(other, **fields)
    assert other.model_dump() == one.model_dump() and other.model_fields_set == one.model_fields_set
    assert not RunRecord.model_config.get("validate_assignment")  # else setattr validates, and assign must too


def test_no_two_routes_of_the_app_match_one_path() -> None:
    """The app tries its busiest routes first: the same answers only while each path has one route."""
    import re

    from starlette.routing import compile_path

    from agent_unit.http.routes import served_routes

    served = served_routes(mcp=True, ui=True)
    for spec in served:
        path = re.sub(r"{[a-z_]+}", "x", spec.path)
        matching = {other.path for other in served if compile_path(other.path)[0].match(path)}
        assert matching == {spec.path}, (spec.path, matching)


async def test_a_resume_on_sqlite_seeks_no_last_seq_yet_its_events_follow_another_connections(tmp_path: Any) -> None:
    """The claim of a run parked by this store knows its last seq; after another connection wrote
    (another process: a message, a cancel), it seeks it again, and seqs never repeat."""
    from agent_unit import _events as ev
    from agent_unit.stores.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "runs.db")
    engine = RunEngine({"approve": approve}, store, background_sweep=False)
    statements: list[str] = []
    first = await engine.start("approve", None, wait=True)
    second = await engine.start("approve", None, wait=True)
    store._db.set_trace_callback(statements.append)
    assert (await engine.resume(first.id, True, wait=True)).status == RunStatus.completed
    assert statements and not [sql for sql in statements if "max(seq)" in sql]

    other = SQLiteStore(tmp_path / "runs.db")  # another connection writes an event to the parked run
    parked = await other.load_run(second.id)
    assert parked is not None
    await other.save_run(parked, expected_version=parked.version, events=[ev.dumps(ev.custom("x", 1))])
    statements.clear()
    assert (await engine.resume(second.id, True, wait=True)).status == RunStatus.completed
    assert [sql for sql in statements if "max(seq)" in sql]
    seqs = [event.seq for event in await store.read_events(second.id)]
    assert seqs == list(range(1, len(seqs) + 1))
    await engine.aclose()


async def test_an_authorized_request_says_so_on_its_state(http: httpx.AsyncClient) -> None:
    """The gateway marks the request in ``scope["state"]``: what ``request.state`` reads, made or not."""
    from starlette.requests import Request

    gateway = http.app.gateway  # type: ignore[attr-defined]
    scope = {"type": "http", "method": "GET", "headers": [(b"host", b"127.0.0.1")], "server": ("127.0.0.1", 80)}
    request = Request(scope)
    assert not gateway.authorized(request)
    await gateway.authorize(request, "get", {"id": "run_x"})
    assert gateway.authorized(request) and request.state.agent_unit_authorized is True
    assert gateway.authorized(Request(scope))  # a second Request over the same scope sees it too
