"""The input of a chat agent (PydanticAI, the OpenAI Agents SDK): a prompt."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, model_validator

__all__ = ["Prompt"]


class Prompt(BaseModel):
    """``{"prompt": "..."}``, or the prompt as a bare string."""

    prompt: str

    @model_validator(mode="before")
    @classmethod
    def _bare_string(cls, value: Any) -> Any:
        return {"prompt": value} if isinstance(value, str) else value
