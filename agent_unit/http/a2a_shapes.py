"""A2A's JSON, written as plain dicts: the card, a run as a task, a message as input, events as updates.

Plain dicts rather than a2a-sdk's types on purpose: the SDK stands on protobuf and takes
long to import, and this module must stay cheap for serverless hosts. The test suite checks
every shape here against the SDK's own types and drives it with the SDK's own client.

Two dialects of the same objects are served on the one endpoint, told apart by the method
name: A2A 1.0 (protobuf JSON: ``TASK_STATE_COMPLETED``, ``ROLE_AGENT``, results wrapped as
``{"task": ...}`` or ``{"statusUpdate": ...}``) and A2A 0.3 for older clients (``kind``
discriminators, ``"completed"``, ``"agent"``, a ``final`` flag on status updates). Everything
is built in the 1.0 form first; :func:`to_v03` rewrites it for 0.3.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from .. import __version__
from .._events import MESSAGE
from .._records import RunRecord, RunStatus
from ..errors import RpcError

__all__ = [
    "Incoming",
    "AGENTS_EXTENSION",
    "SCHEMAS_EXTENSION",
    "TASK_STATES",
    "agent_card",
    "input_from",
    "read_message",
    "run_statuses",
    "stream_items",
    "history",
    "task",
    "to_v03",
]

Dialect = Literal["1.0", "0.3"]
Json = dict[str, Any]

# JSON-RPC's own codes and A2A's, as a2a-sdk maps them (``a2a.utils.errors``).
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
TASK_NOT_FOUND, TASK_NOT_CANCELABLE, PUSH_NOT_SUPPORTED, UNSUPPORTED_OPERATION = -32001, -32002, -32003, -32004
CONTENT_TYPE_NOT_SUPPORTED, EXTENDED_CARD_NOT_CONFIGURED, VERSION_NOT_SUPPORTED = -32005, -32007, -32009

# The capabilities the card claims: exactly what the endpoint serves.
STREAMING = True
PUSH_NOTIFICATIONS = False

# The card has no field for a skill's input schema, so it travels in an extension's params.
SCHEMAS_EXTENSION = "urn:agent-unit:a2a:skill-schemas:v1"
# Nor for a skill's own endpoint: the deployment's card links each agent's card in this one.
AGENTS_EXTENSION = "urn:agent-unit:a2a:agent-cards:v1"

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}

_STATES = {
    RunStatus.queued: "TASK_STATE_WORKING",  # yielded at its budget, continuing
    RunStatus.running: "TASK_STATE_WORKING",
    RunStatus.sleeping: "TASK_STATE_WORKING",  # it wakes by itself: nothing for the client to do
    RunStatus.interrupted: "TASK_STATE_INPUT_REQUIRED",
    RunStatus.completed: "TASK_STATE_COMPLETED",
    RunStatus.failed: "TASK_STATE_FAILED",
    RunStatus.cancelled: "TASK_STATE_CANCELED",
}

# TaskState's enum numbers, as a client may send a state in proto JSON.
TASK_STATES = (
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)


def run_statuses(state: str) -> frozenset[RunStatus]:
    """The run statuses a task state stands for (none for ``submitted``, ``rejected``, ``auth-required``)."""
    return frozenset(status for status, shown in _STATES.items() if shown == state)


# -- the card --------------------------------------------------------------------------


def agent_card(
    name: str, agents: Mapping[str, Any], endpoint: str, links: Mapping[str, tuple[str, str]] | None = None
) -> Json:
    """The agent card: one skill per agent, the endpoint in both dialects.

    ``links`` (the deployment's card) maps each agent to its own endpoint and card URL: a
    client that knows only A2A picks an agent there and talks to it without naming a skill.

    The 1.0 fields (``supportedInterfaces``) sit beside the 0.3 ones (``url``,
    ``preferredTransport``, ``protocolVersion``) as a2a-sdk's own server writes them, so a
    client of either version reads the same card at either well-known path.
    """
    names = sorted(agents)
    if len(names) == 1:
        description = agents[names[0]].description or f"The {names[0]} agent."
    else:
        description = (
            f"{len(names)} agents: {', '.join(names)}. Each has its own endpoint and card "
            f"({AGENTS_EXTENSION}); here, name one in message.metadata.skill."
        )
    skills = [
        {
            "id": agent_name,
            "name": agent_name,
            "description": agents[agent_name].description or f"The {agent_name} agent.",
            "tags": ["agent-unit", agents[agent_name].framework],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["application/json", "text/plain"],
        }
        for agent_name in names
    ]
    schemas = {
        agent_name: {
            "inputSchema": agents[agent_name].input_schema,
            "outputSchema": agents[agent_name].output_schema,
        }
        for agent_name in names
    }
    return {
        "name": name,
        "description": description,
        "version": __version__,
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "capabilities": {
            "streaming": STREAMING,
            "pushNotifications": PUSH_NOTIFICATIONS,
            "extendedAgentCard": False,
            "extensions": [
                {
                    "uri": SCHEMAS_EXTENSION,
                    "description": "The JSON Schema of each skill's input and output, by skill id.",
                    "required": False,
                    "params": {"skills": schemas},
                },
                *(
                    [
                        {
                            "uri": AGENTS_EXTENSION,
                            "description": "Each agent's own A2A endpoint and agent card, by skill id.",
                            "required": False,
                            "params": {
                                "agents": {
                                    agent_name: {"url": url, "agentCard": card_url}
                                    for agent_name, (url, card_url) in sorted(links.items())
                                }
                            },
                        }
                    ]
                    if links
                    else []
                ),
            ],
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": skills,
        # A2A 0.3's fields, for older clients.
        "url": endpoint,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": endpoint, "transport": "JSONRPC"}],
    }


# -- a run as a task ---------------------------------------------------------------------


def _timestamp(moment: datetime | int | None) -> str:
    if isinstance(moment, int):  # an event's milliseconds since the epoch
        moment = datetime.fromtimestamp(moment / 1000, UTC)
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _part(value: Any) -> Json:
    """A string is a text part; any other JSON value a data part."""
    if isinstance(value, str):
        return {"text": value, "mediaType": "text/plain"}
    return {"data": value, "mediaType": "application/json"}


def _agent_message(message_id: str, run_id: str, thread_id: str, parts: list[Json]) -> Json:
    return {"messageId": message_id, "taskId": run_id, "contextId": thread_id, "role": "ROLE_AGENT", "parts": parts}


def interrupt_message(run_id: str, thread_id: str, interrupt: Mapping[str, Any]) -> Json:
    """What an ``input-required`` task waits for: the interrupt's name, payload and answer schema.

    Its id is the interrupt's key, so every read of the same pause shows the same message.
    """
    request = {
        "interrupt": interrupt["name"],
        "payload": interrupt.get("payload"),
        "answerSchema": interrupt.get("answer_schema", interrupt.get("answerSchema")),
    }
    text = f"The run waits for input at {interrupt['name']!r}: answer with a message on this task."
    return _agent_message(f"{run_id}:{interrupt['key']}", run_id, thread_id, [{"text": text}, _part(request)]) | {
        "metadata": {"interrupt": interrupt["name"]}
    }


def failure_message(run_id: str, thread_id: str, error: Mapping[str, Any]) -> Json:
    return _agent_message(
        f"{run_id}:error", run_id, thread_id, [{"text": error.get("message") or "the run failed"}]
    ) | {"metadata": {"error": dict(error)}}


def output_artifact(output: Any) -> Json:
    """The run's output: a text part when it is a string, a data part (JSON) otherwise."""
    return {"artifactId": "output", "name": "output", "parts": [_part(output)]}


def _status(state: str, message: Json | None, moment: datetime | int | None) -> Json:
    status: Json = {"state": state, "timestamp": _timestamp(moment)}
    if message is not None:
        status["message"] = message
    return status


def _run_metadata(record: RunRecord, status: str) -> Json:
    meta: Json = {"agent": record.agent, "status": status}
    if record.wake_at is not None:
        meta["wakeAt"] = _timestamp(record.wake_at)
    return {"agentUnit": meta}


def _user_message(message_id: str, run_id: str, thread_id: str, value: Any) -> Json:
    return {
        "messageId": message_id,
        "taskId": run_id,
        "contextId": thread_id,
        "role": "ROLE_USER",
        "parts": [_part(value)],
    }


def history(record: RunRecord, events: Iterable[Json], answers: Mapping[str, Any]) -> list[Json]:
    """The task's messages, oldest first, as A2A's ``history`` holds them: the user's input, the
    agent's text messages, and at each pause the agent's request and the user's answer.

    Rebuilt from what the run keeps durably (its input, its stored events in seq order, and
    ``answers``: the journaled answer of each interrupt key), so every server over the store
    shows the same history, after a restart too. The status message of now (the pending
    request, a failure) is the task's ``status.message``, not history, as in a2a-sdk's server.
    Ids are stable: ``<task>:input``, the event's ``messageId`` for a text message,
    ``<task>:<key>`` for a request (as its status message had) and ``<task>:<key>:answer``.
    """
    run_id, thread_id = record.id, record.thread_id
    messages = [_user_message(f"{run_id}:input", run_id, thread_id, record.input)]
    texts: dict[str, list[str]] = {}  # open text messages, by messageId
    asked: set[str] = set()
    pending = record.interrupt.key if record.status == RunStatus.interrupted and record.interrupt else None

    def close(message_id: str) -> None:
        parts = texts.pop(message_id)
        if parts:
            messages.append(_agent_message(message_id, run_id, thread_id, [{"text": "".join(parts)}]))

    for event in events:
        kind = event.get("type")
        if kind == "TEXT_MESSAGE_START" and isinstance(event.get("messageId"), str):
            texts.setdefault(event["messageId"], [])
        elif kind == "TEXT_MESSAGE_CONTENT" and isinstance(event.get("delta"), str):
            texts.setdefault(str(event.get("messageId")), []).append(event["delta"])
        elif kind == "TEXT_MESSAGE_END" and event.get("messageId") in texts:
            close(event["messageId"])
        elif kind == "CUSTOM" and event.get("name") == MESSAGE and isinstance(event.get("value"), dict):
            sent = event["value"]  # a message to the working task (RunEngine.send)
            messages.append(_user_message(str(sent.get("messageId")), run_id, thread_id, sent.get("value")))
        elif kind == "RUN_INTERRUPTED" and isinstance(event.get("interrupt"), dict):
            interrupt = event["interrupt"]
            key = interrupt.get("key")
            if key in asked or key == pending:
                continue
            asked.add(key)
            messages.append(interrupt_message(run_id, thread_id, interrupt))
            if key in answers:
                messages.append(_user_message(f"{run_id}:{key}:answer", run_id, thread_id, answers[key]))
    for message_id in list(texts):  # a message the run never ended (it failed or was cancelled inside it)
        close(message_id)
    return messages


def task(record: RunRecord, *, state: str | None = None, history: list[Json] | None = None) -> Json:
    """The run as an A2A task: id = run id, contextId = thread id; ``history`` when given and not empty.

    ``state`` overrides the status: a stream's first task is ``working`` (it was just started
    or resumed), whatever the record said a moment before.
    """
    run_status = record.status.value if state is None else "running"
    state = state or _STATES[record.status]
    message = None
    if state == "TASK_STATE_INPUT_REQUIRED" and record.interrupt is not None:
        message = interrupt_message(record.id, record.thread_id, record.interrupt.model_dump())
    elif state == "TASK_STATE_FAILED" and record.error is not None:
        message = failure_message(record.id, record.thread_id, record.error.model_dump(exclude_none=True))
    body: Json = {
        "id": record.id,
        "contextId": record.thread_id,
        "status": _status(state, message, record.updated_at),
        "metadata": _run_metadata(record, run_status),
    }
    if state == "TASK_STATE_COMPLETED" and record.output is not None:
        body["artifacts"] = [output_artifact(record.output)]
    if history:
        body["history"] = history
    return body


def stream_items(run_id: str, thread_id: str, seq: int, event: Json) -> list[tuple[Json, bool]]:
    """A stored run event as A2A stream results (1.0 form), each with whether it ends the stream.

    Every event becomes a ``working`` status update carrying the event itself in
    ``metadata.agUiEvent``; streamed text also carries a status message, so any A2A client
    shows it. The events that park or end a run become the task's next state.
    """
    kind = event.get("type")
    moment = event.get("timestamp")
    meta = {"agUiEvent": {"seq": seq, **event}}

    def update(state: str, message: Json | None = None) -> Json:
        return {
            "statusUpdate": {
                "taskId": run_id,
                "contextId": thread_id,
                "status": _status(state, message, moment),
                "metadata": meta,
            }
        }

    if kind == "RUN_FINISHED":
        items = []
        if event.get("result") is not None:
            artifact = {
                "taskId": run_id,
                "contextId": thread_id,
                "artifact": output_artifact(event["result"]),
                "lastChunk": True,
            }
            items.append(({"artifactUpdate": artifact}, False))
        return [*items, (update("TASK_STATE_COMPLETED"), True)]
    if kind == "RUN_ERROR":
        error = {"type": event.get("code"), "message": event.get("message")}
        return [(update("TASK_STATE_FAILED", failure_message(run_id, thread_id, error)), True)]
    if kind == "RUN_INTERRUPTED":
        message = interrupt_message(run_id, thread_id, event["interrupt"])
        return [(update("TASK_STATE_INPUT_REQUIRED", message), True)]
    if kind == "RUN_CANCELLED":
        return [(update("TASK_STATE_CANCELED"), True)]
    if kind == "RUN_SLEEPING":  # the run wakes by itself; this stream ends, GetTask follows it
        return [(update("TASK_STATE_WORKING"), True)]
    if kind == "TEXT_MESSAGE_CONTENT" and isinstance(event.get("delta"), str):
        text = _agent_message(f"{run_id}:{seq}", run_id, thread_id, [{"text": event["delta"]}])
        return [(update("TASK_STATE_WORKING", text), False)]
    return [(update("TASK_STATE_WORKING"), False)]


# -- A2A 0.3 -------------------------------------------------------------------------------

_V03_STATES = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}


def _v03_part(part: Json) -> Json:
    extra = {"metadata": part["metadata"]} if part.get("metadata") else {}
    if "text" in part:
        return {"kind": "text", "text": part["text"], **extra}
    data = part.get("data")
    if isinstance(data, dict):
        return {"kind": "data", "data": data, **extra}
    # 0.3 data parts hold objects only: other values are wrapped the way a2a-sdk unwraps them.
    return {
        "kind": "data",
        "data": {"value": data},
        "metadata": {**extra.get("metadata", {}), "data_part_compat": True},
    }


def _v03_message(message: Json) -> Json:
    out = {key: value for key, value in message.items() if key not in ("role", "parts")}
    out["kind"] = "message"
    out["role"] = "user" if message.get("role") == "ROLE_USER" else "agent"
    out["parts"] = [_v03_part(part) for part in message.get("parts", [])]
    return out


def _v03_status(status: Json) -> Json:
    out: Json = {"state": _V03_STATES.get(status["state"], "unknown")}
    if "timestamp" in status:
        out["timestamp"] = status["timestamp"]
    if "message" in status:
        out["message"] = _v03_message(status["message"])
    return out


def _v03_artifact(artifact: Json) -> Json:
    return {**artifact, "parts": [_v03_part(part) for part in artifact["parts"]]}


def to_v03(result: Json, *, final: bool = False) -> Json:
    """A 1.0 result (``{"task": ...}``, a bare task, a status or artifact update) as 0.3 writes it.

    ``final`` marks the status update that ends a stream (0.3 says so on the event itself).
    """
    if "statusUpdate" in result:
        update = result["statusUpdate"]
        return {**update, "kind": "status-update", "status": _v03_status(update["status"]), "final": final}
    if "artifactUpdate" in result:
        update = result["artifactUpdate"]
        return {**update, "kind": "artifact-update", "artifact": _v03_artifact(update["artifact"])}
    body = result.get("task", result)
    out = {**body, "kind": "task", "status": _v03_status(body["status"])}
    if "artifacts" in body:
        out["artifacts"] = [_v03_artifact(artifact) for artifact in body["artifacts"]]
    if "history" in body:
        out["history"] = [_v03_message(message) for message in body["history"]]
    return out


# -- a message as input ------------------------------------------------------------------


@dataclass(slots=True)
class Incoming:
    """The parts of a client's message that decide what happens: which task, thread and agent, and the content."""

    task_id: str | None
    context_id: str | None
    skill: str | None
    message_id: str = ""
    texts: list[str] = field(default_factory=list)
    data: list[Any] = field(default_factory=list)
    files: int = 0


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"{where} must be a string")
    return value


def read_message(params: Json, dialect: Dialect) -> Incoming:
    """``params.message`` checked by hand (a client's mistake is a clear -32602, never a crash)."""
    message = params.get("message")
    if not isinstance(message, dict):
        raise RpcError(INVALID_PARAMS, "params.message is required: a message object with role and parts")
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise RpcError(INVALID_PARAMS, "message.messageId is required: a unique id the client makes (e.g. a UUID)")
    for name in ("referenceTaskIds", "extensions"):
        listed = message.get(name)
        if listed is not None and not (isinstance(listed, list) and all(isinstance(item, str) for item in listed)):
            raise RpcError(INVALID_PARAMS, f"message.{name} must be a list of strings")
    role = message.get("role")
    if role not in (("ROLE_USER", 1) if dialect == "1.0" else ("user",)):
        expected = "ROLE_USER" if dialect == "1.0" else "user"
        raise RpcError(INVALID_PARAMS, f"message.role is {role!r}: a client's message has role {expected!r}")
    skill = None
    for holder in (message.get("metadata"), params.get("metadata")):
        if holder is not None and not isinstance(holder, dict):
            raise RpcError(INVALID_PARAMS, "metadata must be an object")
        if holder and holder.get("skill") is not None:
            skill = _optional_str(holder["skill"], "metadata.skill")
            break
    incoming = Incoming(
        task_id=_optional_str(message.get("taskId"), "message.taskId"),
        context_id=_optional_str(message.get("contextId"), "message.contextId"),
        skill=skill,
        message_id=message_id,
    )
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise RpcError(INVALID_PARAMS, "message.parts must hold at least one part")
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise RpcError(INVALID_PARAMS, f"message.parts[{index}] must be an object")
        _read_part(part, index, dialect, incoming)
    return incoming


def _read_part(part: Json, index: int, dialect: Dialect, incoming: Incoming) -> None:
    if part.get("metadata") is not None and not isinstance(part["metadata"], dict):
        raise RpcError(INVALID_PARAMS, f"message.parts[{index}].metadata must be an object")
    if dialect == "0.3":
        kind = part.get("kind")
    else:
        contents = [key for key in ("text", "data", "raw", "url") if key in part]
        if len(contents) > 1:
            raise RpcError(INVALID_PARAMS, f"message.parts[{index}] holds {' and '.join(contents)}: a part holds one")
        kind = contents[0] if contents else None
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise RpcError(INVALID_PARAMS, f"message.parts[{index}].text must be a string")
        incoming.texts.append(part["text"])
    elif kind == "data":
        if "data" not in part:
            raise RpcError(INVALID_PARAMS, f"message.parts[{index}] has no data")
        value = part["data"]
        if dialect == "0.3":
            if not isinstance(value, dict):
                raise RpcError(INVALID_PARAMS, f"message.parts[{index}].data must be an object")
            if (part.get("metadata") or {}).get("data_part_compat"):
                value = value.get("value")
        incoming.data.append(value)
    elif kind in ("raw", "url", "file"):
        incoming.files += 1
    else:
        raise RpcError(INVALID_PARAMS, f"message.parts[{index}] is not a text, data or file part")


def input_from(incoming: Incoming, accepts: Callable[[Any], bool]) -> Any:
    """The value a message carries: one data part's JSON, its text, or both together.

    Text (the text parts joined by newlines) is passed as a string when ``accepts`` takes a
    string; otherwise it is parsed as JSON, so ``{"order_id": "o_1"}`` typed as text works
    for an agent whose input is an object. Text with data (or several data parts) is
    ``{"text": ..., "data": [...]}`` when ``accepts`` takes that, else, for an agent that takes
    a string (a chat agent's prompt), the text then each data part as JSON, one a line.
    Files are refused: an agent's input is JSON.
    """
    if incoming.files:
        raise RpcError(
            CONTENT_TYPE_NOT_SUPPORTED, "file parts are not accepted: send the input as a data part or as text"
        )
    text = "\n".join(incoming.texts)
    if incoming.data:
        if len(incoming.data) == 1 and not incoming.texts:
            return incoming.data[0]
        together = {"text": text, "data": list(incoming.data)}
        if accepts(together):
            return together
        lines = [*incoming.texts, *(json.dumps(value, ensure_ascii=False) for value in incoming.data)]
        prompt = "\n".join(lines)
        return prompt if accepts(prompt) else together  # else the agent's own error says what it takes
    if accepts(text):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON either: the agent's own validation error says what it wants


def field_violations(details: Iterable[Any]) -> list[Json]:
    """pydantic's or jsonschema's errors as ``google.rpc.BadRequest`` field violations."""
    violations = []
    for error in details:
        if isinstance(error, dict):
            where = ".".join(str(part) for part in error.get("loc", ()))
            violations.append({"field": where, "description": str(error.get("msg", ""))})
    return violations
