"""The HTTP benchmark: agent-unit's built server beside the LangGraph API server, over loopback.

    .venv/bin/python bench/http/run.py            # the full run (about 7 minutes), then BENCHMARKS.md
    .venv/bin/python bench/http/run.py --quick    # a smoke run (about 2 minutes), printed only

agent-unit: ``bench/http/project`` is built with ``agent-unit build --preset server`` into a temp
dir and served by the built ``main.py`` (uvicorn, one worker, SQLite store in the temp dir).
LangGraph: ``bench/http/langgraph_project`` is copied to the temp dir (``langgraph dev`` writes
its in-memory state there) and served by ``langgraph dev --no-browser --no-reload`` from
``.venv-bench``, offline. One server runs at a time, so neither takes CPU from the other; the
two take turns at the rounds of (a) and (b), so a ratio compares moments seconds apart.

Both get the same load generator (this process: asyncio + httpx, 8 concurrent clients, every
loop bounded in count and time). Measured for each:

(a) runs started per second that reach the pause (``?wait=1`` / ``/runs/wait``),
(b) resumes per second (the runs of (a), answered ``true``, waited for),
(c) time to the first SSE event of a run started on an idle server,
(d) emit-to-arrival latency of events read over SSE,
(e) (a) and (b) again once 10,000 runs are in the store (filled with runs that park).

Each of (a), (b) and (e) is repeated 3 times (median taken); the section is printed and, in a
full run, written to BENCHMARKS.md after the line ``<!-- http benchmark -->`` (what follows
that line is replaced; everything above it is left as it is).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import platform
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BENCH_VENV = REPO / ".venv-bench"
LANGGRAPH = BENCH_VENV / "bin" / "langgraph"
PY_SPY = BENCH_VENV / "bin" / "py-spy"
MARKER = "<!-- http benchmark -->"
INSTALL = '.venv-bench/bin/pip install -r bench/http/requirements.txt  # or "langgraph-cli[inmem]"'
CLIENTS = 8
TARGETS = {"ratio": 15.0, "first_event_ms": 5.0, "p50_ms": 5.0, "after_fill": 0.9}


@dataclass(frozen=True)
class Settings:
    seconds: float  # one timed window of (a) or (b)
    ramp: float  # before it: the clients are busy, nothing is counted
    repeat: int
    first_events: int  # samples of (c)
    ticks: int  # events per ticker run in (d)
    tick_runs: int  # ticker runs per mode in (d)
    gap_ms: float  # between two events of a ticker run
    fill_to: int  # runs in the store before (e)
    fill_seconds: float  # the most one system may spend filling
    lg_jobs: int | None  # langgraph dev --n-jobs-per-worker (None: its default)
    profile: bool = True  # py-spy on agent-unit's server after everything else (if .venv-bench has it)


FULL = Settings(
    seconds=5.0,
    ramp=1.0,
    repeat=3,
    first_events=20,
    ticks=100,
    tick_runs=3,
    gap_ms=5.0,
    fill_to=10_000,
    fill_seconds=150.0,
    lg_jobs=None,
)
QUICK = Settings(
    seconds=1.5,
    ramp=1.0,
    repeat=1,
    first_events=5,
    ticks=50,
    tick_runs=1,
    gap_ms=5.0,
    fill_to=1_500,
    fill_seconds=25.0,
    lg_jobs=None,
)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- statistics -----------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def med(values: Iterable[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


# -- processes ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its descendants (all their threads), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry.name)] = int(rest[1])
        times[int(entry.name)] = (int(rest[11]) + int(rest[12])) / tick
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return total


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    base: str
    log_path: Path

    def tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)  # its own session: only what it started
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def start_server(name: str, argv: list[str], *, cwd: Path, env: dict[str, str], port: int, ready: str) -> Server:
    log_path = cwd / f"{name}.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=cwd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Server(name, proc, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + 90
    with httpx.Client(trust_env=False, timeout=5) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{server.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get(server.base + ready).status_code == 200:
                    return server
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"{name} did not answer {ready} within 90 s:\n{server.tail()}")


# -- the clients ----------------------------------------------------------------------------


class HttpError(Exception):
    pass


class RawClient:
    """A minimal HTTP/1.1 client on asyncio streams: keep-alive connections, JSON in, JSON or lines out.

    The load generator's default: httpx spends about 1.5 ms of CPU per request here, so at a few
    hundred requests per second it needs a whole core and measures itself instead of the server.
    This one reads status line, headers and a sized or chunked body, nothing more.
    """

    name = "asyncio streams (HTTP/1.1 keep-alive)"

    def __init__(self, base: str) -> None:
        host_port = base.removeprefix("http://")
        self.host, port = host_port.split(":")
        self.port = int(port)
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def _send(
        self, path: str, body: Any, accept: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[str, str]]:
        payload = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\naccept: {accept}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
        ).encode()
        for fresh in (False, True):  # an idle connection the server closed: retry once on a new one
            if self._idle and not fresh:
                reader, writer = self._idle.pop()
            else:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            try:
                writer.write(head + payload)
                line = await reader.readline()
                if not line:
                    raise ConnectionResetError("closed by the server")
            except OSError:
                writer.close()
                if fresh:
                    raise
                continue
            status = int(line.split()[1])
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                key, _, value = line.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            return reader, writer, status, headers
        raise AssertionError("unreachable")

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                data = await reader.readexactly(size)
                await reader.readexactly(2)
                yield data
        elif "content-length" in headers:
            size = int(headers["content-length"])
            if size:
                yield await reader.readexactly(size)
        else:
            while data := await reader.read(65536):
                yield data

    def _release(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]) -> None:
        keep = headers.get("connection", "").lower() != "close" and (
            "content-length" in headers or headers.get("transfer-encoding", "").lower() == "chunked"
        )
        if keep:
            self._idle.append((reader, writer))
        else:
            writer.close()

    async def post(self, path: str, body: Any) -> Any:
        reader, writer, status, headers = await self._send(path, body, "application/json")
        try:
            data = b"".join([chunk async for chunk in self._chunks(reader, headers)])
        except BaseException:
            writer.close()
            raise
        self._release(reader, writer, headers)
        if status >= 400:
            raise HttpError(f"POST {path}: {status} {data[:300]!r}")
        return json.loads(data)

    async def lines(self, path: str, body: Any) -> AsyncIterator[str]:
        """The response's lines as they arrive (an SSE stream), until the server ends it."""
        reader, writer, status, headers = await self._send(path, body, "text/event-stream")
        done = False
        try:
            if status >= 400:
                data = b"".join([chunk async for chunk in self._chunks(reader, headers)])
                raise HttpError(f"POST {path}: {status} {data[:300]!r}")
            buffer = b""
            async for chunk in self._chunks(reader, headers):
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    yield line.rstrip(b"\r").decode()
            done = True
        finally:
            if done:
                self._release(reader, writer, headers)
            else:
                writer.close()

    async def aclose(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


class HttpxClient:
    """The same two calls on ``httpx.AsyncClient`` (a cross-check of the raw client's numbers)."""

    name = "httpx.AsyncClient (HTTP/1.1 keep-alive)"

    def __init__(self, base: str) -> None:
        self.http = httpx.AsyncClient(
            base_url=base,
            trust_env=False,  # loopback only: never a proxy from the environment
            timeout=httpx.Timeout(60.0),
            limits=httpx.Limits(max_connections=2 * CLIENTS, max_keepalive_connections=2 * CLIENTS),
        )

    async def post(self, path: str, body: Any) -> Any:
        response = await self.http.post(path, json=body)
        if response.status_code >= 400:
            raise HttpError(f"POST {path}: {response.status_code} {response.text[:300]}")
        return response.json()

    async def lines(self, path: str, body: Any) -> AsyncIterator[str]:
        headers = {"accept": "text/event-stream"}
        async with self.http.stream("POST", path, json=body, headers=headers) as response:
            if response.status_code >= 400:
                raise HttpError(f"POST {path}: {response.status_code}")
            async for line in response.aiter_lines():
                yield line

    async def aclose(self) -> None:
        await self.http.aclose()


Client = RawClient | HttpxClient
CLIENT_KINDS: dict[str, type[RawClient] | type[HttpxClient]] = {"raw": RawClient, "httpx": HttpxClient}


# -- the two APIs ---------------------------------------------------------------------------


@dataclass
class FirstEvent:
    first_ms: float  # request sent -> first SSE data line
    work_ms: float  # request sent -> first event of the run's own execution
    pause_ms: float  # request sent -> the stream ended at the pause


class System:
    """One server's HTTP API, as the load generator drives it."""

    name = ""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def start_to_pause(self, _: Any = None) -> str:
        raise NotImplementedError

    async def resume(self, ref: str) -> None:
        raise NotImplementedError

    async def first_event(self) -> FirstEvent:
        raise NotImplementedError

    async def ticks(self, n: int, gap_ms: float, mode: str) -> list[float]:
        raise NotImplementedError

    async def stored_runs(self) -> int:
        raise NotImplementedError


class AgentUnit(System):
    name = "agent-unit"

    def __init__(self, client: Client, db: Path) -> None:
        super().__init__(client)
        self.db = db

    async def start_to_pause(self, _: Any = None) -> str:
        run = await self.client.post("/agents/approve/runs?wait=1", {"input": {}})
        if run["status"] != "interrupted":
            raise RuntimeError(f"run {run['id']} is {run['status']}, not interrupted")
        return run["id"]

    async def resume(self, ref: str) -> None:
        run = await self.client.post(f"/runs/{ref}/resume?wait=1", {"answer": True})
        if run["status"] != "completed":
            raise RuntimeError(f"run {ref} is {run['status']}, not completed")

    async def first_event(self) -> FirstEvent:
        first = work = math.nan
        sent = time.perf_counter()
        async for line in self.client.lines("/agents/approve/runs", {"input": {}}):
            if not line.startswith("data:"):
                continue
            now = time.perf_counter()
            if math.isnan(first):
                first = now
            if math.isnan(work) and json.loads(line[5:])["type"] != "RUN_STARTED":
                work = now
        end = time.perf_counter()
        return FirstEvent((first - sent) * 1000, (work - sent) * 1000, (end - sent) * 1000)

    async def ticks(self, n: int, gap_ms: float, mode: str) -> list[float]:
        latencies: list[float] = []
        body = {"input": {"n": n, "gap_ms": gap_ms, "mode": mode}}
        async for line in self.client.lines("/agents/ticker/runs", body):
            if line.startswith("data:"):
                arrived = time.time_ns() / 1e6
                event = json.loads(line[5:])
                if event["type"] == "CUSTOM" and event["name"] == "tick":
                    latencies.append(arrived - event["value"]["t"])
        if len(latencies) != n:
            raise RuntimeError(f"ticker sent {len(latencies)} of {n} events")
        return latencies

    async def stored_runs(self) -> int:
        with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as db:
            return db.execute("SELECT count(*) FROM runs").fetchone()[0]


class LangGraph(System):
    name = "LangGraph"

    async def start_to_pause(self, _: Any = None) -> str:
        thread = str(uuid.uuid4())
        body = {"assistant_id": "approve", "input": {"input": {}}, "if_not_exists": "create"}
        values = await self.client.post(f"/threads/{thread}/runs/wait", body)
        if "__interrupt__" not in values:
            raise RuntimeError(f"thread {thread} did not pause: {str(values)[:200]}")
        return thread

    async def resume(self, ref: str) -> None:
        body = {"assistant_id": "approve", "command": {"resume": True}}
        values = await self.client.post(f"/threads/{ref}/runs/wait", body)
        if values.get("result") != "ok":
            raise RuntimeError(f"thread {ref} did not finish: {str(values)[:200]}")

    async def first_event(self) -> FirstEvent:
        body = {
            "assistant_id": "approve",
            "input": {"input": {}},
            "if_not_exists": "create",
            "stream_mode": ["values", "updates"],
        }
        first = work = math.nan
        kind = ""
        sent = time.perf_counter()
        async for line in self.client.lines(f"/threads/{uuid.uuid4()}/runs/stream", body):
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                now = time.perf_counter()
                if math.isnan(first):
                    first = now
                if math.isnan(work) and kind != "metadata":
                    work = now
        end = time.perf_counter()
        return FirstEvent((first - sent) * 1000, (work - sent) * 1000, (end - sent) * 1000)

    async def ticks(self, n: int, gap_ms: float, mode: str) -> list[float]:
        latencies: list[float] = []
        body = {
            "assistant_id": "ticker",
            "input": {"n": n, "gap_ms": gap_ms},
            "if_not_exists": "create",
            "stream_mode": ["custom"],
        }
        kind = ""
        async for line in self.client.lines(f"/threads/{uuid.uuid4()}/runs/stream", body):
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind == "custom":
                arrived = time.time_ns() / 1e6
                latencies.append(arrived - json.loads(line[5:])["t"])
        if len(latencies) != n:
            raise RuntimeError(f"ticker sent {len(latencies)} of {n} events")
        return latencies

    async def stored_runs(self) -> int:
        return int(await self.client.post("/threads/count", {}))  # one run per thread here


# -- the load generator ---------------------------------------------------------------------


@dataclass
class Load:
    ops: int
    seconds: float
    errors: int
    latencies_ms: list[float]
    client_cpu: float  # cores (CPU seconds per wall second) this process used
    server_cpu: float  # cores the server used
    results: list[Any] = field(default_factory=list)
    first_error: str = ""

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0


async def load(
    op: Callable[[Any], Awaitable[Any]],
    *,
    server_pid: int,
    seconds: float,
    max_ops: int,
    items: list[Any] | None = None,
    clients: int = CLIENTS,
    ramp: float = 0.0,
) -> Load:
    """``clients`` loops calling ``op`` until ``max_ops`` calls (or ``items``) or ``ramp + seconds`` are spent.

    Only calls that end after the first ``ramp`` seconds are counted, and CPU is read from then
    on: the timed window starts with every client busy (a queue that polls when idle, like
    LangGraph's, is not charged its first poll). ``results`` holds every call's result.
    """
    queue = iter(items) if items is not None else None
    issued = errors = 0
    latencies: list[float] = []
    results: list[Any] = []
    first_error = ""
    start = time.perf_counter()
    deadline = start + ramp + seconds
    window: list[float] = []  # [start of the timed window] once it began

    async def worker() -> None:
        nonlocal issued, errors, first_error
        while issued < max_ops and time.perf_counter() < deadline:
            item = None
            if queue is not None:
                item = next(queue, StopIteration)
                if item is StopIteration:
                    return
            issued += 1
            began = time.perf_counter()
            try:
                results.append(await op(item))
            except Exception as exc:  # noqa: BLE001 - counted and reported, the load goes on
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
                continue
            if window:
                latencies.append((time.perf_counter() - began) * 1000)

    snapshot: list[float] = []

    def open_window() -> None:
        window.append(time.perf_counter())
        snapshot.extend((own_cpu(), cpu_seconds(server_pid)))

    if ramp <= 0:
        open_window()
    workers = asyncio.gather(*(worker() for _ in range(clients)))
    if ramp > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(workers), ramp)
        open_window()
    await workers
    elapsed = time.perf_counter() - window[0]
    result = Load(
        ops=len(latencies),
        seconds=elapsed,
        errors=errors,
        latencies_ms=latencies,
        client_cpu=(own_cpu() - snapshot[0]) / elapsed,
        server_cpu=(cpu_seconds(server_pid) - snapshot[1]) / elapsed,
        results=results,
        first_error=first_error,
    )
    if errors and not results:
        raise RuntimeError(f"every call failed: {first_error}")
    return result


# samples, own time by layer (share), heaviest agent-unit functions (inclusive share)
Profile = tuple[int, dict[str, float], list[tuple[str, float]]]


# -- one system, every measurement ----------------------------------------------------------


@dataclass
class Report:
    name: str
    runs: list[Load] = field(default_factory=list)  # (a), fresh store
    resumes: list[Load] = field(default_factory=list)  # (b)
    first: list[FirstEvent] = field(default_factory=list)  # (c)
    ticks: dict[str, list[list[float]]] = field(default_factory=dict)  # (d): mode -> per run
    fill: list[tuple[int, float]] = field(default_factory=list)  # (runs in store after, runs/s of the window)
    fill_seconds: float = 0.0
    fill_stopped: str = ""
    stored_before_after: int = 0  # runs in the store when (e) started
    stored_after: list[int] = field(default_factory=list)  # runs in the store at the start of each (e) round
    runs_after: list[Load] = field(default_factory=list)  # (e)
    resumes_after: list[Load] = field(default_factory=list)
    runs_beside: list[Load] = field(default_factory=list)  # (e)'s fresh-store rounds, each run just before one
    resumes_beside: list[Load] = field(default_factory=list)
    first_after: list[FirstEvent] = field(default_factory=list)
    runs_httpx: Load | None = None  # (a) once with httpx as the client
    profiles: dict[str, tuple[Load, Profile]] = field(default_factory=dict)  # workload -> (its load, py-spy summary)
    first_httpx: list[FirstEvent] = field(default_factory=list)  # (c) with httpx
    idle_cpu: float = 0.0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


async def one_round(system: System, pid: int, s: Settings, runs: list[Load], resumes: list[Load], label: str) -> None:
    """(a), then (b) on the runs (a) parked."""
    started = await load(system.start_to_pause, server_pid=pid, seconds=s.seconds, max_ops=1_000_000, ramp=s.ramp)
    runs.append(started)
    resumed = await load(
        system.resume,
        server_pid=pid,
        seconds=s.seconds,
        max_ops=1_000_000,
        items=list(started.results),
        ramp=s.ramp,
    )
    resumes.append(resumed)
    log(
        f"{system.name} {label}: {started.rate:,.0f} runs/s to a pause, "
        f"{resumed.rate:,.0f} resumes/s ({len(resumed.results):,} of {len(started.results):,} resumed); "
        f"server {started.server_cpu:.2f}/{resumed.server_cpu:.2f} cores, "
        f"client {started.client_cpu:.2f}/{resumed.client_cpu:.2f} cores"
    )


async def first_events(system: System, n: int) -> list[FirstEvent]:
    samples = []
    for _ in range(n):
        await asyncio.sleep(0.2)  # idle between samples: nothing else in flight
        samples.append(await system.first_event())
    return samples


async def fresh_round(
    make: Callable[[Client], System],
    server: Server,
    s: Settings,
    runs: list[Load],
    resumes: list[Load],
    label: str,
    *,
    idle: Report | None = None,
) -> None:
    """One round of (a) and (b) on a server just started on an empty store; ``idle``: note its idle CPU there."""
    pid = server.proc.pid
    raw = RawClient(server.base)
    try:
        system = make(raw)
        # warm-up: imports, first connections, graph compile
        await load(system.start_to_pause, server_pid=pid, seconds=10, max_ops=40)
        await asyncio.sleep(1.0)
        if idle is not None:
            idle_cpu = cpu_seconds(pid)
            await asyncio.sleep(2.0)
            idle.idle_cpu = (cpu_seconds(pid) - idle_cpu) / 2.0
        await one_round(system, pid, s, runs, resumes, label)
    finally:
        await raw.aclose()


async def the_rest(
    make: Callable[[Client], System],
    server: Server,
    s: Settings,
    report: Report,
    launch: Launch | None = None,
) -> None:
    """(c), (d), the httpx cross-check, then the fill and (e), on a server started for them.

    With ``launch``, each (e) round is paired with a round on a server just started over an empty
    store, run right before it or (every other round) right after it: the no-slowdown ratio then
    compares moments seconds apart, not the first rounds with the last (a shared virtual machine's
    speed drifts by a third within minutes), and neither side always runs second.
    """
    pid = server.proc.pid
    raw = RawClient(server.base)
    system = make(raw)
    try:
        await load(system.start_to_pause, server_pid=pid, seconds=10, max_ops=40)  # warm-up, as a round's
        await asyncio.sleep(1.0)
        report.first = await first_events(system, s.first_events)
        log(
            f"{system.name} first event: median {med(f.first_ms for f in report.first):.2f} ms, "
            f"first from the run's work {med(f.work_ms for f in report.first):.2f} ms"
        )

        modes = ["alone", "step"] if isinstance(system, AgentUnit) else ["custom"]
        for mode in modes:
            report.ticks[mode] = []
            for _ in range(s.tick_runs):
                await asyncio.sleep(0.2)
                report.ticks[mode].append(await system.ticks(s.ticks, s.gap_ms, mode))
            pooled = [v for run in report.ticks[mode] for v in run]
            log(f"{system.name} emit->arrival ({mode}): p50 {pct(pooled, 50):.2f} ms, p99 {pct(pooled, 99):.2f} ms")

        # the same (a) and (c) with httpx as the client, for reference
        slow = HttpxClient(server.base)
        try:
            with_httpx = make(slow)
            report.runs_httpx = await load(
                with_httpx.start_to_pause, server_pid=pid, seconds=s.seconds, max_ops=1_000_000, ramp=s.ramp
            )
            await asyncio.sleep(1.0)
            report.first_httpx = await first_events(with_httpx, max(5, s.first_events // 2))
        finally:
            await slow.aclose()
        log(
            f"{system.name} with httpx: {report.runs_httpx.rate:,.0f} runs/s to a pause "
            f"(client {report.runs_httpx.client_cpu:.2f} cores), "
            f"first event {med(f.first_ms for f in report.first_httpx):.2f} ms"
        )

        # (e): fill the store with runs that park, in windows of 1,000, then measure again
        fill_began = time.perf_counter()
        stored = await system.stored_runs()
        while stored < s.fill_to:
            left = s.fill_seconds - (time.perf_counter() - fill_began)
            if left <= 0:
                report.fill_stopped = f"stopped by the {s.fill_seconds:.0f} s bound"
                break
            window = await load(
                system.start_to_pause, server_pid=pid, seconds=left, max_ops=min(1000, s.fill_to - stored)
            )
            stored = await system.stored_runs()
            report.fill.append((stored, window.rate))
            log(f"{system.name} fill: {stored:,} runs in the store, {window.rate:,.0f} runs/s over the last window")
        report.fill_seconds = time.perf_counter() - fill_began
        report.stored_before_after = stored

        async def beside(k: int) -> None:
            assert launch is not None
            fresh, make_fresh = await asyncio.to_thread(launch, 100 + k)
            try:
                await fresh_round(
                    make_fresh, fresh, s, report.runs_beside, report.resumes_beside, "fresh store, beside (e)"
                )
            finally:
                await asyncio.to_thread(fresh.stop)
            await asyncio.sleep(1.0)

        for k in range(s.repeat):  # each round adds runs: note how many were there when it started
            beside_first = k % 2 == 0  # the pair's order alternates: neither side always runs second
            if launch is not None and beside_first:
                await beside(k)
            report.stored_after.append(await system.stored_runs())
            label = f"with {report.stored_after[-1]:,} runs in the store"
            await one_round(system, pid, s, report.runs_after, report.resumes_after, label)
            if launch is not None and not beside_first:
                await asyncio.sleep(1.0)
                await beside(k)
        await asyncio.sleep(1.0)
        report.first_after = await first_events(system, max(5, s.first_events // 2))
        log(f"{system.name} first event after the fill: median {med(f.first_ms for f in report.first_after):.2f} ms")
        if s.profile and isinstance(system, AgentUnit) and PY_SPY.exists():
            await profile(system, pid, s, report, server.log_path.parent)
    finally:
        await raw.aclose()


async def profile(system: System, pid: int, s: Settings, report: Report, folder: Path) -> None:
    """(a) then (b) once more, each under ``py-spy record`` (stacks sampled from outside the server)."""
    parked: list[Any] = []
    for workload in ("runs to a pause", "resumes"):
        out = folder / f"py-spy-{workload.replace(' ', '-')}.txt"
        spy = await asyncio.create_subprocess_exec(
            str(PY_SPY),
            *("record", "--pid", str(pid), "--rate", "200", "--duration", f"{s.seconds + 1:.0f}"),
            *("--format", "raw", "--output", str(out)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(0.5)  # attached
        if workload == "resumes":
            window = await load(system.resume, server_pid=pid, seconds=s.seconds, max_ops=1_000_000, items=parked)
        else:
            window = await load(system.start_to_pause, server_pid=pid, seconds=s.seconds, max_ops=1_000_000)
            parked = list(window.results)
        await spy.wait()
        if out.exists():
            report.profiles[workload] = (window, summarize_profile(out))
            log(f"{system.name} profiled {workload}: {window.rate:,.0f}/s under py-spy")


# -- py-spy's raw output, summed up -----------------------------------------------------------

_LAYERS = (
    ("agent_unit/stores/", "SQLite store (Python and the sqlite3 C calls it makes)"),
    ("agent_unit/", "agent-unit engine, run primitives and HTTP handlers"),
    ("pydantic", "pydantic (models, validation, JSON Schema)"),
    ("typing_inspection", "pydantic (models, validation, JSON Schema)"),
    ("jsonschema", "jsonschema (answer validation)"),
    ("uvicorn/", "HTTP server: uvicorn + its HTTP parser + starlette + asyncio transports"),
    ("h11/", "HTTP server: uvicorn + its HTTP parser + starlette + asyncio transports"),
    ("httptools/", "HTTP server: uvicorn + its HTTP parser + starlette + asyncio transports"),
    ("starlette/", "HTTP server: uvicorn + its HTTP parser + starlette + asyncio transports"),
    ("selector_events", "HTTP server: uvicorn + its HTTP parser + starlette + asyncio transports"),
    ("asyncio/", "asyncio (tasks, events, futures)"),
    ("selectors", "asyncio (tasks, events, futures)"),
    ("json/", "json (stdlib)"),
)


def _layer(frame: str) -> str:
    for key, name in _LAYERS:
        if key in frame:
            return name
    return "other"


def _short(frame: str) -> str:
    """``Class.method (agent_unit/x.py)``: the frame without line number and install prefix."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for anchor in ("agent_unit/", "pydantic/", "jsonschema/", "starlette/", "uvicorn/", "h11/", "asyncio/"):
        if anchor in where:
            where = anchor + where.split(anchor, 1)[1]
            break
    return f"`{name}` ({where})"


def summarize_profile(path: Path) -> Profile:
    """Samples, own time by layer (share), and the heaviest agent-unit functions (inclusive share)."""
    total = 0
    own: dict[str, float] = {}
    inclusive: dict[str, float] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        layer = _layer(frames[-1])
        own[layer] = own.get(layer, 0) + n
        seen = set()
        for frame in frames:
            if any(k in frame for k in ("agent_unit/", "type_adapter.py", "answers.py")):
                key = _short(frame)
                if key not in seen:
                    seen.add(key)
                    inclusive[key] = inclusive.get(key, 0) + n
    if not total:
        return 0, {}, []
    shares = {k: v / total for k, v in sorted(own.items(), key=lambda kv: -kv[1])}
    top = sorted(((k, v / total) for k, v in inclusive.items()), key=lambda kv: -kv[1])
    return total, shares, top


Launch = Callable[[int], tuple[Server, Callable[[Client], System]]]


@dataclass
class Contender:
    """One system to measure: how to start a server of it, and whether (e) gets fresh-store pairs."""

    name: str
    launch: Launch
    paired: bool = False


def run_systems(contenders: list[Contender], s: Settings) -> list[Report]:
    """``s.repeat`` fresh rounds of each system, in turn (round 1 of each, then round 2 of each in the
    reverse order...), each on a new server over an empty store; then the rest of each on a server
    started for it.

    Taking turns keeps the rounds a ratio compares within seconds of each other (this host's speed
    drifts by a third within minutes), and reversing the order each round keeps either system from
    always running second.
    """
    reports = [Report(c.name) for c in contenders]
    pairs = list(zip(contenders, reports, strict=True))
    for i in range(s.repeat):
        for contender, report in pairs if i % 2 == 0 else pairs[::-1]:  # neither always runs second
            began = time.perf_counter()
            server, make = contender.launch(i)
            try:
                label = f"fresh store, round {i + 1}"
                idle = report if i == 0 else None
                asyncio.run(fresh_round(make, server, s, report.runs, report.resumes, label, idle=idle))
            finally:
                server.stop()
            report.seconds += time.perf_counter() - began
    for contender, report in pairs:
        began = time.perf_counter()
        server, make = contender.launch(s.repeat)
        try:
            asyncio.run(the_rest(make, server, s, report, contender.launch if contender.paired else None))
        finally:
            server.stop()
        report.seconds += time.perf_counter() - began
        windows = [*report.runs, *report.resumes, *report.runs_after, *report.resumes_after]
        windows += [*report.runs_beside, *report.resumes_beside]
        report.errors = [f"{window.errors} errors ({window.first_error})" for window in windows if window.errors]
    return reports


def build_server(work: Path, name: str = "project") -> Path:
    """``bench/http/project`` copied to ``work / name`` and built with the server preset: its ``main.py``."""
    project = work / name
    shutil.copytree(HERE / "project", project, ignore=shutil.ignore_patterns(".output", "__pycache__", ".agent-unit"))
    command = [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(project), "--preset", "server"]
    subprocess.run(command, cwd=project, check=True, capture_output=True)
    return project / ".output" / "server" / "main.py"


def agent_unit(work: Path) -> tuple[Contender, dict[str, str]]:
    log("agent-unit: building the server preset")
    began = time.perf_counter()
    main = build_server(work, "au_project")
    built = time.perf_counter() - began
    project = main.parents[2]
    loop = subprocess.run(
        [sys.executable, "-c", _LOOP_PROBE.format(path=str(main.parent / "vendor"))],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()

    def launch(i: int) -> tuple[Server, Callable[[Client], System]]:
        db = work / f"agent-unit-{i}.db"
        port = free_port()
        env = {"HOST": "127.0.0.1", "PORT": str(port), "LOG_LEVEL": "warning", "AGENT_UNIT_STORAGE": f"sqlite:///{db}"}
        argv = [sys.executable, str(main)]
        server = start_server("agent-unit", argv, cwd=project, env=env, port=port, ready="/agents")
        return server, lambda client: AgentUnit(client, db)

    return Contender("agent-unit", launch, paired=True), {"build_seconds": f"{built:.1f}", "loop": loop or "unknown"}


# What uvicorn picks in the server's environment (its loop="auto", http="auto").
_LOOP_PROBE = (
    "import sys, importlib.util as u; sys.path.insert(0, {path!r}); "
    "print(('uvloop' if u.find_spec('uvloop') else 'asyncio') + ' + ' + "
    "('httptools' if u.find_spec('httptools') else 'h11'))"
)


def langgraph(work: Path, s: Settings) -> tuple[Contender, dict[str, str]]:
    env = {
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
    }
    loop = subprocess.run(
        [str(BENCH_VENV / "bin" / "python"), "-c", _LOOP_PROBE.format(path=str(HERE / "langgraph_project"))],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()

    def launch(i: int) -> tuple[Server, Callable[[Client], System]]:
        # a fresh copy each time: langgraph dev keeps its in-memory state in .langgraph_api/ beside it
        project = work / f"lg_project_{i}"
        shutil.copytree(
            HERE / "langgraph_project", project, ignore=shutil.ignore_patterns(".langgraph_api", "__pycache__")
        )
        port = free_port()
        argv = [
            str(LANGGRAPH),
            "dev",
            "--no-browser",
            "--no-reload",
            "--port",
            str(port),
            *(["--n-jobs-per-worker", str(s.lg_jobs)] if s.lg_jobs is not None else []),
            "--server-log-level",
            "warning",
        ]
        log(f"LangGraph: starting langgraph dev ({f'round {i + 1} of {s.repeat}' if i < s.repeat else 'for the rest'})")
        return start_server("langgraph", argv, cwd=project, env=env, port=port, ready="/ok"), LangGraph

    return Contender("LangGraph", launch), {"loop": loop or "unknown"}


# -- the report -----------------------------------------------------------------------------


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def git_state() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "agent_unit", "agent_unit_cli")
    return f"`{head}`" + (" with uncommitted changes in `agent_unit/` or `agent_unit_cli/`" if dirty else "")


def versions(python: Path, names: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys; out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = '-'\n"
        "out['python'] = sys.version.split()[0]; print(json.dumps(out))"
    )
    done = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {}


def f0(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.0f}"


def f2(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.2f}"


def rates(loads: list[Load]) -> list[float]:
    return [load.rate for load in loads]


def each(values: list[float], fmt: Callable[[float], str] = f0) -> str:
    return ", ".join(fmt(v) for v in values) or "-"


def pair_ratios(ours: list[Load], theirs: list[Load]) -> str:
    """Each round's ratio to the other system's round of the same number (run right beside it)."""
    shown = [f"{a.rate / b.rate:.1f}x" for a, b in zip(ours, theirs, strict=False) if b.rate]
    return f"; round by round {', '.join(shown)}" if shown else ""


def after_each(rounds: list[Load], stored: list[int], beside: list[Load]) -> str:
    """Each (e) round's rate with the runs in the store when it started, and its fresh-store pair's."""
    shown = []
    for i, (window, count) in enumerate(zip(rounds, stored, strict=True)):
        text = f"{window.rate:,.0f} ({count:,} runs)"
        if i < len(beside):
            text += f" vs {beside[i].rate:,.0f} = {window.rate / beside[i].rate:.2f}"
        shown.append(text)
    return ", ".join(shown) or "-"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**PASS**" if ok else "**MISS**")


def section(
    s: Settings,
    quick: bool,
    au: Report | None,
    lg: Report | None,
    info: dict[str, Any],
    wall: float,
) -> str:
    def m_rate(report: Report | None, attr: str) -> float:
        return med(rates(getattr(report, attr))) if report else math.nan

    def ratio(a: float, b: float) -> float:
        return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan

    def ticks(report: Report | None, mode: str) -> list[float]:
        return [v for run in (report.ticks.get(mode, []) if report else []) for v in run]

    au_runs, lg_runs = m_rate(au, "runs"), m_rate(lg, "runs")
    au_res, lg_res = m_rate(au, "resumes"), m_rate(lg, "resumes")
    au_runs_after, lg_runs_after = m_rate(au, "runs_after"), m_rate(lg, "runs_after")
    au_res_after, lg_res_after = m_rate(au, "resumes_after"), m_rate(lg, "resumes_after")
    # (e)'s reference: the fresh-store rounds run beside it when there are any, else the first rounds
    paired = bool(au and au.runs_beside)
    au_runs_ref = m_rate(au, "runs_beside") if paired else au_runs
    au_res_ref = m_rate(au, "resumes_beside") if paired else au_res
    au_first = med(f.first_ms for f in au.first) if au else math.nan
    step, alone, custom = ticks(au, "step"), ticks(au, "alone"), ticks(lg, "custom")
    au_httpx = au.runs_httpx.rate if au and au.runs_httpx else math.nan
    lg_httpx = lg.runs_httpx.rate if lg and lg.runs_httpx else math.nan
    au_first_httpx = med(f.first_ms for f in au.first_httpx) if au else math.nan
    lg_first_httpx = med(f.first_ms for f in lg.first_httpx) if lg else math.nan
    au_stored = au.stored_before_after if au else 0
    lg_stored = lg.stored_before_after if lg else 0

    lines = [
        MARKER,
        "",
        "## HTTP: the built server beside the LangGraph API server",
        "",
        "Runs to a pause and resumes per second, time to the first SSE event and emit-to-arrival latency,",
        "over loopback, against agent-unit's built server and `langgraph dev` (in-memory runtime) on",
        "equivalent agents. Generated by `bench/http/run.py`"
        + (" (**quick run: one repeat, short windows; not for comparison**)" if quick else "")
        + "; do not edit by hand.",
        "",
        "    .venv/bin/python bench/http/run.py",
        "",
        "### Machine",
        "",
        f"- CPU: {cpu_model()}, {os.cpu_count()} cores; server and load generator share them",
        f"- OS: {platform.platform()}",
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; agent-unit at {git_state()}",
        f"- Wall time of the whole benchmark: {wall:.0f} s"
        + (f" (agent-unit build: {info['au'].get('build_seconds', '?')} s)" if "au" in info else ""),
        "",
        "### Settings",
        "",
        "- agent-unit: `agent-unit build --preset server` of `bench/http/project`, served by its `main.py`"
        f" (uvicorn, one worker, {info.get('au', {}).get('loop', '?')}, `LOG_LEVEL=warning`), SQLite store"
        " (`sqlite:///...`, WAL, synchronous=NORMAL) in a temp dir. Agents: `approve` (one journaled step, then"
        " `run.interrupt`; resumed with `true` it returns) and `ticker`.",
        "- LangGraph: `langgraph dev --no-browser --no-reload"
        + (f" --n-jobs-per-worker {s.lg_jobs}" if s.lg_jobs is not None else "")
        + "` of `bench/http/langgraph_project` (in-memory runtime,"
        f" {info.get('lg', {}).get('loop', '?')}), with `LANGGRAPH_CLI_NO_ANALYTICS=1`,"
        " `LANGGRAPH_NO_VERSION_CHECK=true`. Graphs: `approve` (node `work`, then a node calling `interrupt()`;"
        " resumed with `Command(resume=True)`) and `ticker`. `--n-jobs-per-worker` is left at its `dev` default"
        " (1 job at a time), its fastest setting here: with 1 job its queue takes the next pending run at once,"
        " while with 8 or 10 jobs a batch drains, the queue finds nothing and sleeps 0.5 s, and 8 clients got"
        " about 8 runs/s (`--lg-jobs N` to try).",
        "- One server runs at a time (never both). The load generator is `run.py` itself:"
        f" {CLIENTS} concurrent asyncio clients over HTTP/1.1 keep-alive connections, on a minimal client written"
        " on asyncio streams (`RawClient`). httpx costs about 1.5 ms of CPU per request here, so with httpx the"
        " load generator saturates its core near 650 requests/s and measures itself: the *with httpx* rows"
        " repeat (a) and (c) with `httpx.AsyncClient` for reference (its client CPU is in the CPU table); they run"
        " on the server of (c) and (d), after them, so LangGraph's store holds more runs there than in (a).",
        f"- (a) runs/s to a pause: {CLIENTS} clients start runs for {s.seconds:g} s, each request waiting for the"
        " pause (agent-unit `POST /agents/approve/runs?wait=1`; LangGraph `POST /threads/{id}/runs/wait` with"
        " `if_not_exists: create`, one request per run for both). (b) resumes/s: the runs (a) parked, answered"
        " and waited for (`POST /runs/{id}/resume?wait=1` `{answer: true}`; `/threads/{id}/runs/wait` with"
        f" `command: {{resume: true}}`), for at most {s.seconds:g} s. Each window starts {s.ramp:g} s after the"
        " clients do, so it is timed with every client busy (LangGraph's queue polls every 0.5 s while idle;"
        " its first poll is not charged to it). A round is (a) then (b), on a server just started over an empty"
        f" store (LangGraph slows down as runs accumulate; a fresh store each round keeps (a) about (a)); {s.repeat}"
        " round(s), median taken. The two systems take turns, the order reversed each round (agent-unit then"
        " LangGraph, LangGraph then agent-unit, ...), so the rounds a ratio compares run seconds apart: this"
        " host's speed drifts by a third within minutes. A warm-up of 40 runs comes first. (c), (d) and (e)"
        " follow, for each system, on a server started for them (after its own warm-up).",
        "- (c) time to first SSE event: a run started with an SSE request on an idle server (nothing else in"
        f" flight, 0.2 s apart), from sending the request to the first `data:` line; median of {s.first_events}."
        " agent-unit's first event is `RUN_STARTED` (stored with the run); LangGraph's is `metadata`. *First"
        " from the run's work* is the first event after those (agent-unit `STEP_STARTED`, LangGraph `values`).",
        f"- (d) emit-to-arrival: a run emits {s.ticks} events {s.gap_ms:g} ms apart, each carrying the wall time"
        " (`time.time_ns()`) at which it was emitted; the client subtracts it from its wall time when the `data:`"
        f" line arrives (one machine, one clock). {s.tick_runs} run(s) per mode on an idle server, pooled."
        " agent-unit *emit*: `run.emit` then `asyncio.sleep`: the engine stores the event by itself (a CUSTOM"
        " event is not a delta, so it is flushed at the loop's next turn, not after `delta_batch_ms`), then"
        " notifies the SSE reader: emit, commit, notify, read, HTTP. agent-unit *emit + step*: `run.emit` then a"
        " journaled no-op `run.step`, so the event rides in the step's commit. LangGraph: `get_stream_writer()`"
        " in a node, `stream_mode=custom`; its events are streamed from memory and never stored, so they skip"
        " the commit that agent-unit's include.",
        f"- (e) the store is filled with runs that park (windows of 1,000, up to {s.fill_to:,} runs in the"
        f" store, at most {s.fill_seconds:.0f} s per system), then {s.repeat} more rounds of (a) and (b) (each adds"
        " its runs to the store: each repeat shows how many were there when it began) and (c) again. Runs in the store:"
        " agent-unit counts rows of `runs` in its SQLite file; LangGraph `POST /threads/count` (one run per"
        " thread here). For agent-unit each of these rounds comes right beside a round on a server just started"
        " over an empty store (before it, then after it, in turn), and the no-slowdown targets compare the"
        " two: this host's speed drifts by a third within minutes, more than a store of 10,000 runs changes it.",
        "- CPU: cores used (CPU seconds per wall second) by the server process tree (/proc) and by the load"
        " generator (getrusage) during each timed window.",
        "",
        "### Results",
        "",
        "| measure | agent-unit | LangGraph | agent-unit / LangGraph |",
        "| --- | ---: | ---: | ---: |",
        f"| (a) runs started/s that reach the pause | {f0(au_runs)} | {f0(lg_runs)} | {f2(ratio(au_runs, lg_runs))}x |",
        f"| (b) resumes/s | {f0(au_res)} | {f0(lg_res)} | {f2(ratio(au_res, lg_res))}x |",
    ]
    for label, key in (("first SSE event", "first_ms"), ("first event from the run's work", "work_ms")):
        a = med(getattr(f, key) for f in au.first) if au else math.nan
        b = med(getattr(f, key) for f in lg.first) if lg else math.nan
        lines.append(f"| (c) {label}, idle, median | {f2(a)} ms | {f2(b)} ms | {f2(ratio(b, a))}x faster |")
    a = med(f.pause_ms for f in au.first) if au else math.nan
    b = med(f.pause_ms for f in lg.first) if lg else math.nan
    lines += [
        f"| (c) SSE request to the pause (stream ends), median | {f2(a)} ms | {f2(b)} ms | {f2(ratio(b, a))}x faster |",
        f"| (d) emit to arrival, p50 / p99: agent-unit `run.emit` (stored), LangGraph custom stream (not stored)"
        f" | {f2(pct(alone, 50))} / {f2(pct(alone, 99))} ms | {f2(pct(custom, 50))} / {f2(pct(custom, 99))} ms"
        f" | {f2(ratio(pct(custom, 50), pct(alone, 50)))}x faster (p50) |",
        f"| (d) emit to arrival, p50 / p99: agent-unit `run.emit` + `run.step` | {f2(pct(step, 50))}"
        f" / {f2(pct(step, 99))} ms | - | - |",
        f"| (a) with httpx as the client (one window, for reference) | {f0(au_httpx)} | {f0(lg_httpx)}"
        f" | {f2(ratio(au_httpx, lg_httpx))}x |",
        f"| (c) first SSE event with httpx as the client, median | {f2(au_first_httpx)} ms | {f2(lg_first_httpx)} ms"
        f" | {f2(ratio(lg_first_httpx, au_first_httpx))}x faster |",
        f"| (e) runs/s to a pause, from {au_stored:,} / {lg_stored:,} runs in the store on | {f0(au_runs_after)}"
        f" | {f0(lg_runs_after)} | {f2(ratio(au_runs_after, lg_runs_after))}x |",
        f"| (e) resumes/s, same store | {f0(au_res_after)} | {f0(lg_res_after)} |"
        f" {f2(ratio(au_res_after, lg_res_after))}x |",
    ]
    a = med(f.first_ms for f in au.first_after) if au else math.nan
    b = med(f.first_ms for f in lg.first_after) if lg else math.nan
    lines += [
        f"| (e) first SSE event, same store, median | {f2(a)} ms | {f2(b)} ms | {f2(ratio(b, a))}x faster |",
        f"| (e) runs/s after the fill / before | {f2(ratio(au_runs_after, au_runs))}"
        f" | {f2(ratio(lg_runs_after, lg_runs))} | - |",
        f"| (e) beside each round: runs/s, resumes/s on a fresh store | {f0(au_runs_ref) if paired else '-'}"
        f", {f0(au_res_ref) if paired else '-'} | - | - |",
        "",
    ]

    # targets
    def ok(value: float, good: Callable[[float], bool]) -> bool | None:
        return None if math.isnan(value) else good(value)

    r_runs, r_res = ratio(au_runs, lg_runs), ratio(au_res, lg_res)
    after = ratio(au_runs_after, au_runs_ref)
    after_res = ratio(au_res_after, au_res_ref)
    reference = "a fresh store beside it" if paired else "before"
    runs_each = after_each(au.runs_after, au.stored_after, au.runs_beside) if au else "-"
    resumes_each = after_each(au.resumes_after, au.stored_after, au.resumes_beside) if au else "-"
    p50, p50_step = pct(alone, 50), pct(step, 50)
    full_store = au_stored >= 10_000
    lines += [
        "### Targets",
        "",
        "| target | measured (median) | required | ratio | each repeat | result |",
        "| --- | --- | --- | ---: | --- | --- |",
        f"| runs/s to a pause vs LangGraph | {f0(au_runs)} vs {f0(lg_runs)} | ≥ {TARGETS['ratio']:g}x"
        f" | {f2(r_runs)} | {each(rates(au.runs) if au else [])} vs {each(rates(lg.runs) if lg else [])}"
        f"{pair_ratios(au.runs, lg.runs) if au and lg else ''}"
        f" | {verdict(ok(r_runs, lambda v: v >= TARGETS['ratio']))} |",
        f"| resumes/s vs LangGraph | {f0(au_res)} vs {f0(lg_res)} | ≥ {TARGETS['ratio']:g}x | {f2(r_res)}"
        f" | {each(rates(au.resumes) if au else [])} vs {each(rates(lg.resumes) if lg else [])}"
        f"{pair_ratios(au.resumes, lg.resumes) if au and lg else ''}"
        f" | {verdict(ok(r_res, lambda v: v >= TARGETS['ratio']))} |",
        f"| first SSE event, idle | {f2(au_first)} ms | < {TARGETS['first_event_ms']:g} ms | - | p90"
        f" {f2(pct([f.first_ms for f in au.first], 90) if au else math.nan)} ms"
        f" | {verdict(ok(au_first, lambda v: v < TARGETS['first_event_ms']))} |",
        f"| first SSE event, idle, httpx as the client | {f2(au_first_httpx)} ms | < {TARGETS['first_event_ms']:g} ms"
        f" | - | {len(au.first_httpx) if au else 0} samples, p90"
        f" {f2(pct([f.first_ms for f in au.first_httpx], 90) if au else math.nan)} ms"
        f" | {verdict(ok(au_first_httpx, lambda v: v < TARGETS['first_event_ms']))} |",
        f"| event delivery p50: `run.emit` to the SSE client | {f2(p50)} ms"
        f" | < {TARGETS['p50_ms']:g} ms | - | p99 {f2(pct(alone, 99))} ms;"
        f" per run {each([pct(run, 50) for run in (au.ticks.get('alone', []) if au else [])], f2)}"
        f" | {verdict(ok(p50, lambda v: v < TARGETS['p50_ms']))} |",
        f"| event delivery p50: `run.emit` + `run.step` to the SSE client | {f2(p50_step)} ms"
        f" | < {TARGETS['p50_ms']:g} ms | - | p99 {f2(pct(step, 99))} ms;"
        f" per run {each([pct(run, 50) for run in (au.ticks.get('step', []) if au else [])], f2)}"
        f" | {verdict(ok(p50_step, lambda v: v < TARGETS['p50_ms']))} |",
        f"| no slowdown with {au_stored:,} runs in the store (runs/s after / {reference}) | {f0(au_runs_after)}"
        f" vs {f0(au_runs_ref)} | ≥ {TARGETS['after_fill']:g} with ≥ 10,000 runs | {f2(after)}"
        f" | {runs_each}"
        f" | {verdict(ok(after, lambda v: v >= TARGETS['after_fill'] and full_store))} |",
        f"| no slowdown: resumes/s after / {reference} | {f0(au_res_after)} vs {f0(au_res_ref)}"
        f" | ≥ {TARGETS['after_fill']:g} | {f2(after_res)} | {resumes_each}"
        f" | {verdict(ok(after_res, lambda v: v >= TARGETS['after_fill'] and full_store))} |",
        "",
        "### As the store fills",
        "",
        "Runs/s to a pause over each window of the fill (1,000 runs each, 8 clients).",
        "",
        "| system | runs in the store after the window: runs/s | fill time |",
        "| --- | --- | ---: |",
    ]
    for report in (au, lg):
        if report is None:
            continue
        curve = ", ".join(f"{stored:,}: {rate:,.0f}" for stored, rate in report.fill) or (
            f"no fill needed: the measurements before left {report.stored_before_after:,} runs in the store"
        )
        stop = f" ({report.fill_stopped})" if report.fill_stopped else ""
        lines.append(f"| {report.name} | {curve}{stop} | {report.fill_seconds:.0f} s |")
    lines += [
        "",
        "### CPU (cores used, median over the rounds)",
        "",
        "| system | idle server | server: runs to a pause | client: runs to a pause | server: resumes"
        " | client: resumes | server after the fill | client after the fill | server: (a) with httpx"
        " | client: (a) with httpx |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for report in (au, lg):
        if report is None:
            continue

        def cores(loads: list[Load], attr: str) -> str:
            return f2(med(getattr(load, attr) for load in loads))

        httpx_load = [report.runs_httpx] if report.runs_httpx else []
        lines.append(
            f"| {report.name} | {f2(report.idle_cpu)} | {cores(report.runs, 'server_cpu')}"
            f" | {cores(report.runs, 'client_cpu')} | {cores(report.resumes, 'server_cpu')}"
            f" | {cores(report.resumes, 'client_cpu')} | {cores(report.runs_after, 'server_cpu')}"
            f" | {cores(report.runs_after, 'client_cpu')} | {cores(httpx_load, 'server_cpu')}"
            f" | {cores(httpx_load, 'client_cpu')} |"
        )
    lines += [
        "",
        "Latency of one request under the load of (a), median / p99 (ms): "
        + "; ".join(
            f"{r.name} {f2(med(pct(load.latencies_ms, 50) for load in r.runs))}"
            f" / {f2(med(pct(load.latencies_ms, 99) for load in r.runs))}"
            for r in (au, lg)
            if r is not None
        )
        + ".",
        "",
    ]
    if au is not None and au.profiles:
        lines += profile_section(au)
    errors = [f"{r.name}: {e}" for r in (au, lg) if r is not None for e in r.errors]
    if errors:
        lines += ["Errors during the timed windows: " + "; ".join(errors) + ".", ""]
    for key, note in info.get("notes", {}).items():
        lines += [f"{key}: {note}", ""]
    v = info.get("versions", {})
    lines += [
        "Versions: "
        + ", ".join(f"{name} {version}" for name, version in v.items() if version and version != "-")
        + ".",
        "",
    ]
    return "\n".join(lines)


def profile_section(report: Report) -> list[str]:
    summaries = {workload: (window, *summary) for workload, (window, summary) in report.profiles.items()}
    workloads = list(summaries)
    lines = [
        "### Where agent-unit's server time goes",
        "",
        "py-spy (`record --rate 200`, from `.venv-bench`) on the server process while (a) and then (b) run once"
        " more after everything else: "
        + "; ".join(
            f"{workload}: {samples:,} samples, {window.rate:,.0f}/s under the profiler"
            for workload, (window, samples, _, _) in summaries.items()
        )
        + ". Own time (the frame on top of the stack) by layer; SQLite's C calls count as the store's Python"
        " line that made them.",
        "",
        "| layer | " + " | ".join(workloads) + " |",
        "| --- | " + " | ".join("---:" for _ in workloads) + " |",
    ]
    layers: list[str] = []
    for _, _, own, _ in summaries.values():
        layers += [layer for layer in own if layer not in layers]
    for layer in layers:
        cells = [f"{100 * summaries[w][2].get(layer, 0):.1f}%" for w in workloads]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    for workload, (_, _, _, top) in summaries.items():
        lines += [
            "",
            f"Heaviest agent-unit functions, {workload} (inclusive: the share of samples with the function on"
            " the stack):",
            "",
            "| function | share |",
            "| --- | ---: |",
            *[f"| {name} | {100 * share:.1f}% |" for name, share in top[:14]],
        ]
    return [*lines, ""]


def write_section(path: Path, text: str) -> None:
    """Put the section after MARKER: it replaces an earlier one, up to the next section's marker."""
    current = path.read_text() if path.exists() else ""
    at = current.find(MARKER)
    rest = ""
    if at >= 0:
        after = current.find("<!-- ", at + len(MARKER))
        rest = current[after:] if after >= 0 else ""
        current = current[:at]
    elif current and not current.endswith("\n"):
        current += "\n"
    if current and not current.endswith("\n\n"):
        current += "\n"
    path.write_text(current + text + ("\n" + rest if rest else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short windows, one repeat, small fill; print only")
    parser.add_argument("--only", choices=["agent-unit", "langgraph"], help="measure one system")
    parser.add_argument("--write", action="store_true", help="write BENCHMARKS.md after a --quick run too")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--lg-jobs", type=int, help="langgraph dev --n-jobs-per-worker (default: its own, 1)")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile of agent-unit's server")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (servers' logs, databases)")
    args = parser.parse_args()
    s = QUICK if args.quick else FULL
    if args.no_profile:
        s = dataclasses.replace(s, profile=False)
    if args.lg_jobs is not None:
        s = dataclasses.replace(s, lg_jobs=args.lg_jobs)
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="agent-unit-http-bench-"))
    info: dict[str, Any] = {"notes": {}}
    contenders: list[Contender] = []
    try:
        if args.only in (None, "agent-unit"):
            contender, info["au"] = agent_unit(work)
            contenders.append(contender)
        if args.only in (None, "langgraph"):
            if LANGGRAPH.exists():
                contender, info["lg"] = langgraph(work, s)
                contenders.append(contender)
            else:
                info["notes"]["LangGraph skipped"] = f"`.venv-bench` has no `langgraph`: `{INSTALL}`"
                log(f"LangGraph skipped: install it with {INSTALL}")
        reports = {report.name: report for report in run_systems(contenders, s)}
        au, lg = reports.get("agent-unit"), reports.get("LangGraph")
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    ours = versions(Path(sys.executable), ["agent-unit", "uvicorn", "starlette", "httpx"])
    peers = versions(
        BENCH_VENV / "bin" / "python", ["langgraph", "langgraph-api", "langgraph-runtime-inmem", "langgraph-cli"]
    )
    info["versions"] = {
        "Python": ours.get("python", "?"),
        **{k: v for k, v in ours.items() if k != "python"},
        **({"Python (LangGraph)": peers.get("python", "?")} if peers else {}),
        **{k: v for k, v in peers.items() if k != "python"},
    }
    text = section(s, args.quick, au, lg, info, time.perf_counter() - began)
    print(text)
    if not args.no_write and (not args.quick or args.write):
        write_section(REPO / "BENCHMARKS.md", text)
        log("appended the section to BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
