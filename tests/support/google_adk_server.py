"""Google ADK's own app as a server preset: the project the tests build, and the build and run helpers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from . import fetch
from .server import free_port

AGENT = '''from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.genai import types


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Offline(BaseLlm):
    """Calls add(2, 3) once, then says what the tool answered: no network, no key."""

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False):
        last = llm_request.contents[-1]
        answered = [part.function_response.response for part in last.parts or [] if part.function_response]
        if answered:
            part = types.Part(text=f"the sum is {answered[0]['result']}")
        else:
            part = types.Part(function_call=types.FunctionCall(name="add", args={"a": 2, "b": 3}, id="call_1"))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


root_agent = Agent(name="helper", model=Offline(model="offline"), instruction="Add numbers.", tools=[add])
'''

USER = "u1"


def project(folder: Path, config: str) -> Path:
    agent = folder / "agents" / "helper"
    agent.mkdir(parents=True)
    (agent / "__init__.py").write_text("from . import agent\n")
    (agent / "agent.py").write_text(AGENT)
    (folder / "agent-unit.toml").write_text(config)
    return folder


def build(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root), "--json", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def built(root: Path, *args: str) -> dict[str, Any]:
    done = build(root, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def refused(root: Path, *args: str) -> str:
    done = build(root, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr + done.stdout


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for event in events for part in event["content"]["parts"] if part.get("text")]


class Started:
    """``python -I -S main.py`` in a built folder, stopped by the test that starts it."""

    def __init__(self, folder: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.folder, self.log, self.image_env = folder, log, env or {}
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Started:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**self.image_env, "PATH": os.environ["PATH"], "HOST": "127.0.0.1", "PORT": str(port)}
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "main.py"], cwd=self.folder, env=env, stdout=out, stderr=out
            )
        for _ in range(600):
            try:
                if fetch.get(f"{self.url}/list-apps", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            subprocess.run(["sleep", "0.1"], check=True)
        raise AssertionError(f"ADK's app did not answer: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
