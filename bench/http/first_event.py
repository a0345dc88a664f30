"""Time from ``POST /agents/approve/runs`` (``accept: text/event-stream``) to the first ``data:`` line,
on idle built servers, from several clients, split into the server's part and the client's.

    .venv/bin/python bench/http/first_event.py                       # builds bench/http/project
    .venv/bin/python bench/http/first_event.py --main A=path/main.py --main B=other/main.py

Each ``--main LABEL=PATH`` is a built server's ``main.py`` (``agent-unit build --preset server``);
without one, ``bench/http/project`` is built into a temp dir with this interpreter's agent-unit.
Every server runs under ``traced_server.py`` (a wall-clock trace of the bytes it receives and
writes, and of the moment its run is stored), all at once, idle; a round takes one sample of
each client on each server in turn, ``--gap`` seconds apart, so the servers are compared under
the same load of the machine. Clients:

- ``raw``: a blocking socket, keep-alive, the request in one ``send``;
- ``httpx-warm``: one ``httpx.AsyncClient`` for every sample (its connection reused);
- ``httpx-fresh``: a new ``httpx.AsyncClient`` per sample (connect included);
- ``chromium``: ``fetch`` + a ``ReadableStream`` reader in headless Chromium (Playwright), on a
  page of the server's own origin (``GET /agents``): the server refuses foreign origins.

``--floor`` adds ``floor_main.py`` beside them: uvicorn as a built server runs it, with an app that
answers one constant event and does nothing else. Its times are what the host, the client and
uvicorn cost before agent-unit does anything: the floor under every other server's.

``--pin`` puts the servers on one core and the clients on the others: it shows what a client woken
on the server's core costs the server (the kernel places a task woken by a socket write next to its
waker).

Printed per server and client: the medians of request -> response headers and request -> first
``data:`` line at the client, and from the server's trace: request -> its bytes received,
received -> run stored, received -> headers written, received -> first event written, and
first event written -> read by the client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from run import build_server, free_port

HERE = Path(__file__).resolve().parent
PATH = "/agents/approve/runs"
BODY = b'{"input": {}}'
# A system Chromium (Playwright's own browsers are not needed): --chromium to name another.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Sample:
    sent: int  # wall ns at the client
    headers: int
    first: int
    server: dict[str, int] = field(default_factory=dict)  # recv, created, head, event: wall ns


@dataclass
class Server:
    label: str
    proc: subprocess.Popen[bytes]
    port: int
    trace: Path

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def start(label: str, main: Path, work: Path) -> Server:
    port = free_port()
    trace = work / f"trace-{label}.jsonl"
    env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOG_LEVEL": "warning",
        "AGENT_UNIT_STORAGE": f"sqlite:///{work / f'{label}.db'}",
    }
    argv = [sys.executable, str(HERE / "traced_server.py"), str(main), str(trace)]
    log = (work / f"{label}.log").open("wb")
    proc = subprocess.Popen(
        argv, cwd=main.parent, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/agents", trust_env=False).status_code == 200:
                return Server(label, proc, port, trace)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"{label} did not start: {(work / f'{label}.log').read_text()[-2000:]}")


# -- the clients -------------------------------------------------------------------------------


class Raw:
    """A blocking socket, keep-alive; reads the chunked stream to its end so the connection is reused."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None

    def sample(self) -> Sample:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request = (
            f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\naccept: text/event-stream\r\n"
            f"content-type: application/json\r\ncontent-length: {len(BODY)}\r\n\r\n"
        ).encode() + BODY
        sent = time.time_ns()
        self.sock.sendall(request)
        data, headers, first = b"", 0, 0
        while not data.endswith(b"\r\n0\r\n\r\n"):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
            if not headers and b"\r\n\r\n" in data:
                headers = time.time_ns()
            if not first and b"\ndata:" in data and b"\n\n" in data[data.index(b"\ndata:") :]:
                first = time.time_ns()
        return Sample(sent, headers, first)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


async def httpx_sample(client: httpx.AsyncClient, port: int) -> Sample:
    headers = first = 0
    sent = time.time_ns()
    request_headers = {"accept": "text/event-stream", "content-type": "application/json"}
    url = f"http://127.0.0.1:{port}{PATH}"
    async with client.stream("POST", url, content=BODY, headers=request_headers) as response:
        headers = time.time_ns()
        async for line in response.aiter_lines():
            if line.startswith("data:") and not first:
                first = time.time_ns()
    return Sample(sent, headers, first)


_FETCH = """async (path) => {
  const t0 = performance.now(), sent = (performance.timeOrigin + t0) * 1e6;
  const response = await fetch(path, {method: "POST", body: '{"input": {}}',
    headers: {"content-type": "application/json", "accept": "text/event-stream"}});
  const t1 = performance.now();
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let text = "", t2 = 0;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    text += decoder.decode(value, {stream: true});
    if (!t2 && /(^|\\n)data:[^\\n]*\\n/.test(text)) t2 = performance.now();
  }
  return [sent, t1 - t0, t2 - t0];
}"""


# -- the trace -----------------------------------------------------------------------------------


def attach(samples: list[Sample], trace: Path) -> None:
    """Each sample's server points: the first of each kind between its request and its first event
    at the client (one request at a time: nothing else reaches a server in between)."""
    points = [json.loads(line) for line in trace.read_text().splitlines()]
    for sample in samples:
        for t, kind, _, head, has_data in points:
            if not sample.sent <= t <= sample.first:
                continue
            if kind in ("recv", "created", "connect"):
                sample.server.setdefault(kind, t)
            elif kind == "write":
                if head.startswith("HTTP/1.1"):
                    sample.server.setdefault("head", t)
                if has_data:  # an SSE message, or headers and one together
                    sample.server.setdefault("event", t)


def ms(values: list[float]) -> str:
    values = [v for v in values if v == v]
    return f"{statistics.median(values):6.2f}" if values else "     -"


def report(label: str, client: str, samples: list[Sample], load: str) -> str:
    def span(a: str, b: str) -> list[float]:
        out = []
        for s in samples:
            at = {"sent": s.sent, "headers": s.headers, "first": s.first, **s.server}
            out.append((at[b] - at[a]) / 1e6 if a in at and b in at and at[a] and at[b] else float("nan"))
        return out

    return (
        f"{label:>8} {client:<12} n={len(samples):<3} headers {ms(span('sent', 'headers'))}"
        f"  first data {ms(span('sent', 'first'))}  | server: sent->recv {ms(span('sent', 'recv'))}"
        f"  recv->stored {ms(span('recv', 'created'))}  recv->head {ms(span('recv', 'head'))}"
        f"  recv->event {ms(span('recv', 'event'))}  new conns {sum('connect' in s.server for s in samples)}"
        f" (sent->accepted {ms(span('sent', 'connect'))})"
        f"  | event->client {ms(span('event', 'first'))}  load {load}"
    )


async def measure(
    servers: list[Server], clients: list[str], rounds: int, gap: float, chromium: str = CHROMIUM
) -> dict[tuple[str, str], list[Sample]]:
    results: dict[tuple[str, str], list[Sample]] = {(s.label, c): [] for s in servers for c in clients}
    raws = {s.label: Raw(s.port) for s in servers}
    warm = httpx.AsyncClient(trust_env=False, timeout=30)
    pages: dict[str, Any] = {}
    playwright = browser = None
    if "chromium" in clients:
        from playwright.async_api import async_playwright

        playwright = await async_playwright().start()
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for s in servers:
            page = await browser.new_page()
            await page.goto(f"http://127.0.0.1:{s.port}/agents")
            pages[s.label] = page
    try:
        for _ in range(2):  # warm-up: imports, connections, the browser's first fetch
            for s in servers:
                await asyncio.to_thread(raws[s.label].sample)
                await httpx_sample(warm, s.port)
                if s.label in pages:
                    await pages[s.label].evaluate(_FETCH, PATH)
        for _ in range(rounds):
            for s in servers:
                for client in clients:
                    await asyncio.sleep(gap)
                    if client == "raw":
                        sample = raws[s.label].sample()
                    elif client == "httpx-warm":
                        sample = await httpx_sample(warm, s.port)
                    elif client == "httpx-fresh":
                        async with httpx.AsyncClient(trust_env=False, timeout=30) as fresh:
                            sample = await httpx_sample(fresh, s.port)
                    else:
                        sent, head_ms, first_ms = await pages[s.label].evaluate(_FETCH, PATH)
                        sent = int(sent)
                        sample = Sample(sent, sent + int(head_ms * 1e6), sent + int(first_ms * 1e6))
                    results[(s.label, client)].append(sample)
    finally:
        for raw in raws.values():
            raw.close()
        await warm.aclose()
        if browser is not None:
            await browser.close()
        if playwright is not None:
            await playwright.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--main", action="append", default=[], help="LABEL=path/to/built/main.py (repeatable)")
    parser.add_argument("--clients", default="raw,httpx-warm,httpx-fresh,chromium")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between two samples")
    parser.add_argument("--chromium", default=CHROMIUM, help="the Chromium executable (default: on PATH)")
    parser.add_argument("--floor", action="store_true", help="also serve floor_main.py: an app that does nothing")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (traces, logs, databases)")
    parser.add_argument(
        "--pin", action="store_true", help="servers on the first core, the clients here on another (Linux, 2+ cores)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-unit-first-event-"))
    servers: list[Server] = []
    try:
        mains = [tuple(m.split("=", 1)) for m in args.main] or [("built", str(build_server(work)))]
        if args.floor:
            mains.append(("floor", str(HERE / "floor_main.py")))
        servers = [start(label, Path(path), work) for label, path in mains]
        if args.pin:  # a client woken by the server's write is then never run on the server's core
            cores = sorted(os.sched_getaffinity(0))
            for s in servers:  # every thread of the server (-a), not only its main one
                subprocess.run(
                    ["taskset", "-a", "-p", "-c", str(cores[0]), str(s.proc.pid)], check=True, capture_output=True
                )
            os.sched_setaffinity(0, set(cores[1:]))  # this process; Chromium, started after, inherits it
        before = os.getloadavg()[0]
        results = asyncio.run(measure(servers, args.clients.split(","), args.rounds, args.gap, args.chromium))
        load = f"{before:.2f}->{os.getloadavg()[0]:.2f}"
    finally:
        for s in servers:
            s.stop()
    for s in servers:
        for client in args.clients.split(","):
            attach(results[(s.label, client)], s.trace)
            print(report(s.label, client, results[(s.label, client)], load))
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
