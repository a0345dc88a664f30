"""The frameworks agent-unit adapts itself, and the extra of agent-unit that installs each.

``agent-unit add pydantic-ai`` must not treat a supported framework as a third-party adapter
package: its adapter ships in ``agent_unit.adapters`` (:data:`agent_unit.adapters.registry.BUILTINS`)
and ``agent-unit[pydantic-ai]`` installs the framework at the version that adapter needs.
The extras' requirements are read from agent-unit's own installed metadata, so they are
written once, in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = ["FRAMEWORKS", "Framework", "framework_for", "installable", "missing", "requirements"]


@dataclass(frozen=True, slots=True)
class Framework:
    """One framework with a built-in adapter: agent-unit's ``extra`` for it, its top-level
    ``module`` (as ``BUILTINS`` keys it) and the package names a user may ask ``add`` for."""

    name: str
    extra: str
    module: str
    packages: tuple[str, ...]


FRAMEWORKS: tuple[Framework, ...] = (
    Framework("PydanticAI", "pydantic-ai", "pydantic_ai", ("pydantic-ai", "pydantic-ai-slim")),
    Framework("OpenAI Agents SDK", "openai-agents", "agents", ("openai-agents",)),
    Framework("LangGraph", "langgraph", "langgraph", ("langgraph",)),
    Framework(
        "Microsoft Agent Framework", "agent-framework", "agent_framework", ("agent-framework", "agent-framework-core")
    ),
    Framework("Strands Agents", "strands", "strands", ("strands-agents",)),
    Framework("Google ADK", "google-adk", "google.adk", ("google-adk",)),
)


def framework_for(package: str) -> Framework | None:
    """The framework a requirement (``pydantic-ai``, ``pydantic_ai>=1``) names, if agent-unit adapts it."""
    try:
        name = canonicalize_name(Requirement(package).name)
    except ValueError:
        return None
    return next((framework for framework in FRAMEWORKS if name in framework.packages), None)


def requirements(framework: Framework) -> list[Requirement]:
    """What ``agent-unit[extra]`` installs, from agent-unit's installed metadata."""
    found = []
    for line in importlib.metadata.requires("agent-unit") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        # only with this extra (a marker true without it would be a base requirement)
        if marker is not None and marker.evaluate({"extra": framework.extra}) and not marker.evaluate({"extra": ""}):
            found.append(requirement)
    return found


def missing(wanted: list[Requirement]) -> list[Requirement]:
    """The requirements this environment does not satisfy (not installed, or at another version)."""
    absent = []
    for requirement in wanted:
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            absent.append(requirement)
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            absent.append(requirement)
    return absent


def installable(requirement: Requirement) -> str:
    """``requirement`` as pip takes it here: without the ``extra == ...`` marker it was listed under."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{requirement.name}{extras}{requirement.specifier}"
