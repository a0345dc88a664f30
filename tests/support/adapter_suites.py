"""The built-in adapters' conformance suites: their fixture agents, as agent_unit.testing.adapters reads them.

Light on purpose (no framework imported here): the conformance module lists every suite, and
imports a framework only for the adapters whose framework is installed.
"""

from __future__ import annotations

from agent_unit.testing.adapters import AdapterSuite, ToolCall

REFUND = ToolCall("call_1", "refund", {"order_id": "o_1"})

# The framework's module, by adapter: the suite runs where it is installed.
FRAMEWORKS = {
    "pydantic-ai": "pydantic_ai",
    "openai-agents": "agents",
    "langgraph": "langgraph",
    "google-adk": "google.adk",
    "agent-framework": "agent_framework",
    "strands": "strands",
}

SUITES = {
    "pydantic-ai": AdapterSuite(
        agents="tests.support.pydantic_ai_fixtures:AGENTS",
        approval="support",
        approval_input="refund my order",
        crash="charger",
        crash_input="charge me",
        tool_call=REFUND,
        crash_step="tool:charge#call_1",
    ),
    "openai-agents": AdapterSuite(
        agents="tests.support.openai_agents_fixtures:AGENTS",
        approval="refund",
        approval_input="refund my order",
        crash="crashable",
        crash_input="charge my card",
        tool_call=REFUND,
        crash_step="tool:charge#call_c",
    ),
    "langgraph": AdapterSuite(
        agents="tests.support.langgraph_fixtures:AGENTS",
        approval="approval",
        approval_input={"items": ["o_1"]},
        crash="crashable",
        crash_input={"items": []},
        interrupt="approve",  # LangGraph's interrupt(), under the node's name
    ),
    "google-adk": AdapterSuite(
        agents="tests.support.google_adk_fixtures:AGENTS",
        approval="support",
        approval_input="refund my order",
        crash="charger",
        crash_input="charge me",
        tool_call=REFUND,
        crash_step="tool:charge#call_1",
    ),
    "agent-framework": AdapterSuite(
        agents="tests.support.agent_framework_fixtures:AGENTS",
        approval="refund",
        approval_input="refund my order",
        crash="crashable",
        crash_input="charge my card",
        tool_call=REFUND,
        crash_step="tool:charge#call_c",
    ),
    "strands": AdapterSuite(
        agents="tests.support.strands_fixtures:AGENTS",
        approval="refund",
        approval_input="refund my order",
        crash="crashable",
        crash_input="charge my card",
        tool_call=REFUND,
        crash_step="tool:charge#call_c",
    ),
}
