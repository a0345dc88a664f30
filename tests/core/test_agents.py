"""define_agent and discovery of agents/."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from agent_unit import InvalidInput, Run, define_agent
from agent_unit.discovery import discover_agents
from agent_unit.errors import DiscoveryError
from agent_unit.testing import create_test_unit

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"


class Ticket(TypedDict):
    subject: str
    priority: int


class Refund(BaseModel):
    order_id: str


def test_decorator_and_call_forms() -> None:
    @define_agent
    async def plain(input: str) -> str:
        """First line.

        More."""
        return input

    @define_agent(name="named", description="Given.")
    async def described(input: str, run: Run) -> str:
        return input

    async def bare(input: int) -> int:
        return input

    called = define_agent(bare, description="Called.")
    assert plain.description.startswith("First line.") and plain.name is None
    assert (described.name, described.description) == ("named", "Given.")
    assert called.description == "Called." and called.input_schema == {"type": "integer"}


def test_input_schema_from_each_kind_of_annotation() -> None:
    @define_agent
    async def model(input: Refund) -> None: ...

    @define_agent
    async def typed_dict(input: Ticket) -> None: ...

    @define_agent
    async def untyped(input, run): ...  # type: ignore[no-untyped-def]

    assert model.input_schema["required"] == ["order_id"]
    assert typed_dict.input_schema["properties"]["priority"] == {"title": "Priority", "type": "integer"}
    assert untyped.input_schema == {}


def test_agents_must_be_async_and_take_input() -> None:
    def sync(input: str) -> str:
        return input

    async def nothing() -> None: ...

    with pytest.raises(TypeError, match="needs an async function"):
        define_agent(sync)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"must take \(input\) or \(input, run\)"):
        define_agent(nothing)


async def test_input_is_validated_and_given_typed() -> None:
    @define_agent
    async def agent(input: Ticket, run: Run) -> str:
        return f"{input['subject']}:{input['priority'] + 1}"

    unit = create_test_unit({"ticket": agent})
    assert (await unit.run("ticket", {"subject": "s", "priority": "2"})).output == "s:3"
    with pytest.raises(InvalidInput, match="priority"):
        await unit.run("ticket", {"subject": "s"})


def test_discovery_finds_files_and_packages() -> None:
    agents = discover_agents(FIXTURES / "project_ok")
    assert sorted(agents) == ["refund", "support"]
    assert agents["refund"].description == "Refunds an order."
    assert agents["support"].name == "support" and agents["support"].description == "Answers a support question."


def test_discovery_does_not_take_the_name_agents() -> None:
    import sys

    discover_agents(FIXTURES / "project_ok")
    taken = sys.modules.get("agents")  # the OpenAI Agents SDK's name, when it is installed and imported
    assert taken is None or not str(getattr(taken, "__file__", "")).startswith(str(FIXTURES))


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"empty.py": "X = 1\n"}, "agents/empty.py defines no agent"),
        (
            {
                "two.py": "from agent_unit import define_agent\n"
                "async def _f(i): ...\nfirst = define_agent(_f)\nsecond = define_agent(_f)\n"
            },
            r"agents/two.py defines several agents \(first, second\): name the one to serve `agent`",
        ),
        ({"wrong.py": "agent = 42\n"}, "agents/wrong.py: `agent` is a int, which no adapter recognises"),
        ({"broken.py": "import not_a_module_anywhere\n"}, "agents/broken.py failed to import: ModuleNotFoundError"),
    ],
)
def test_discovery_errors_name_the_file(tmp_path: Path, files: dict[str, str], message: str) -> None:
    (tmp_path / "agents").mkdir()
    for name, text in files.items():
        (tmp_path / "agents" / name).write_text(text)
    with pytest.raises(DiscoveryError, match=message):
        discover_agents(tmp_path)


@pytest.mark.parametrize(
    ("helper", "where"),
    [
        ("import os\n\nTOKEN = os.environ['NOT_SET_IN_ANY_TEST']\n", "lib_raising/settings.py:3"),
        ("def broken(:\n    pass\n", "lib_not_parsing/settings.py:1"),
    ],
    ids=["raises", "syntax-error"],
)
def test_an_agent_that_fails_to_import_names_the_project_file_and_line_that_raised(
    tmp_path: Path, helper: str, where: str
) -> None:
    package = where.split("/")[0]  # one per case: a package imported once stays in sys.modules
    (tmp_path / "agents").mkdir()
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "settings.py").write_text(helper)
    (tmp_path / "agents" / "billing.py").write_text(f"from {package} import settings\n")
    with pytest.raises(DiscoveryError, match=rf"agents/billing.py failed to import: .* \(raised at {where}\)"):
        discover_agents(tmp_path)


def test_missing_agents_folder(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="no agents/ folder"):
        discover_agents(tmp_path)
