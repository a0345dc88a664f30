"""The SSE response under Mangum (AWS Lambda), which buffers the whole body: the stream must end
by itself when the run parks, and the buffered body must hold every event."""

from __future__ import annotations

import base64
import json
from typing import Any

from mangum import Mangum

from agent_unit import create_agent_unit

from ..protocols.test_http import sse
from ..support.http_agents import AGENTS


def http_api_event(method: str, path: str, body: Any, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", **headers},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "t"},
            "domainName": "example.lambda-url.eu-west-1.on.aws",
            "stage": "$default",
            "requestId": "r",
            "accountId": "1",
            "apiId": "a",
            "domainPrefix": "example",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 0,
        },
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


class Context:
    aws_request_id = "r"


def test_sse_start_and_resume_under_mangum(tmp_path: Any) -> None:
    app = create_agent_unit(AGENTS, store=f"sqlite:///{tmp_path / 'runs.db'}", background_sweep=False)
    handler = Mangum(app, lifespan="off")
    stream = {"accept": "text/event-stream"}
    started = handler(http_api_event("POST", "/agents/refund/runs", {"input": {"order_id": "o_1"}}, stream), Context())
    assert started["statusCode"] == 200
    body = base64.b64decode(started["body"]).decode() if started.get("isBase64Encoded") else started["body"]
    events = sse(body)
    assert [e["type"] for e in events] == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_INTERRUPTED"]
    run_id = events[0]["runId"]
    # a new handler over the same store, as in a fresh Lambda container
    again = Mangum(create_agent_unit(AGENTS, store=f"sqlite:///{tmp_path / 'runs.db'}", background_sweep=False))
    resumed = again(http_api_event("POST", f"/runs/{run_id}/resume", {"answer": {"approved": True}}, stream), Context())
    body = base64.b64decode(resumed["body"]).decode() if resumed.get("isBase64Encoded") else resumed["body"]
    assert [e["type"] for e in sse(body)][-1] == "RUN_FINISHED"
