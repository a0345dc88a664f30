"""The client raises the class of every error code the server can send.

The codes come from errors.py, and the server writes no code by hand (the first test), so the list
cannot drift from what the server sends. The answers come from an ``httpx.MockTransport``: the real
app cannot be made to send every code on demand (an MCP tool clash, a store outage), and what is
checked here is the client's reading of the wire format, which the transport returns byte for byte.
"""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest

from agent_unit import errors
from agent_unit.client import AgentClient, SyncAgentClient

ROOT = Path(__file__).resolve().parents[2]
SERVER = sorted((ROOT / "agent_unit" / "http").glob("*.py")) + sorted((ROOT / "agent_unit" / "hosts").glob("*.py"))
ERROR_WRITERS = {"_error": 1, "_refuse": 1, "_error_result": 0}
"""The server's helpers that write an error body, and the position of their code argument."""

CLASSES = [
    cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.AgentUnitError) and "code" in vars(cls)
]


def _hand_written_codes(path: Path) -> list[str]:
    """String literals the module writes as an error code: ``{"code": "..."}`` or a writer's argument."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                is_code = isinstance(key, ast.Constant) and key.value == "code"
                if is_code and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.append(f"{path.name}:{node.lineno} {value.value!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ERROR_WRITERS:
            code = node.args[ERROR_WRITERS[node.func.id]]
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                found.append(f"{path.name}:{node.lineno} {code.value!r}")
    return found


def test_the_server_writes_no_error_code_by_hand_so_every_code_it_sends_is_a_class_of_errors_py() -> None:
    assert [code for path in SERVER for code in _hand_written_codes(path)] == []


def test_no_two_error_classes_share_a_code() -> None:
    codes = [cls.code for cls in CLASSES]
    assert len(CLASSES) > 20
    assert sorted(code for code in codes if codes.count(code) > 1) == []


def _server(cls: type[errors.AgentUnitError]) -> httpx.MockTransport:
    body = {"error": {"code": cls.code, "message": "what to do next", "details": {"field": "x"}}}
    return httpx.MockTransport(lambda request: httpx.Response(cls.status, json=body))


@pytest.mark.parametrize("cls", CLASSES, ids=[cls.code for cls in CLASSES])
async def test_the_async_client_raises_the_class_of_each_code(cls: type[errors.AgentUnitError]) -> None:
    async with AgentClient("http://unit", transport=_server(cls)) as agents:
        with pytest.raises(errors.AgentUnitError) as raised:
            await agents.get("run_1")
    assert type(raised.value) is cls
    assert (raised.value.code, raised.value.status, raised.value.message) == (cls.code, cls.status, "what to do next")
    assert raised.value.details == {"field": "x"}


@pytest.mark.parametrize("cls", CLASSES, ids=[cls.code for cls in CLASSES])
def test_the_sync_client_raises_the_class_of_each_code(cls: type[errors.AgentUnitError]) -> None:
    with (
        SyncAgentClient("http://unit", transport=_server(cls)) as agents,
        pytest.raises(errors.AgentUnitError) as raised,
    ):
        agents.get("run_1")
    assert type(raised.value) is cls and raised.value.code == cls.code


async def test_an_answer_that_is_not_agent_unit_json_raises_http_error_with_the_status() -> None:
    page = httpx.MockTransport(lambda request: httpx.Response(502, text="<html>Bad Gateway</html>"))
    async with AgentClient("http://unit", transport=page) as agents:
        with pytest.raises(errors.HttpError) as raised:
            await agents.get("run_1")
    assert raised.value.status == 502 and raised.value.message.startswith("HTTP 502: <html>Bad Gateway")


def test_every_error_code_the_openapi_spec_names_is_a_code_of_errors_py() -> None:
    import yaml

    spec = yaml.safe_load((ROOT / "spec" / "openapi.yaml").read_text(encoding="utf-8"))
    described = spec["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["description"]
    named = {code.strip() for code in described.replace("\n", " ").split(",")}
    assert len(named) > 10
    assert sorted(named - {cls.code for cls in CLASSES}) == []
