"""What the LLM stages share about their prompts (docs/architecture.md §6): a bundle of prompt files whose hash
goes into every request key, and the follow-up request that names the rules an answer broke."""

from __future__ import annotations

from dataclasses import Field, astuple, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from .artifacts import sha256_bytes


class Conversation(Protocol):
    """A request as a follow-up extends it: a frozen dataclass with its (role, content) messages so far, as
    :class:`pbbq.tasks.llm.LLMRequest` is (core does not import the LLM library: it sits below it)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # a dataclass, as dataclasses.replace needs

    @property
    def messages(self) -> tuple[tuple[str, str], ...]: ...  # read-only: the dataclass is frozen


@dataclass(frozen=True)
class PromptBundle:
    """A stage's prompt files' text, one field per file, in the order they are hashed."""

    @classmethod
    def read(cls, paths: tuple[Path, ...]) -> Self:
        return cls(*(path.read_text(encoding="utf-8") for path in paths))

    @cached_property
    def sha256(self) -> str:
        """The bundle's hash: every file's text, in field order, joined by NUL (once: every request carries it)."""
        return sha256_bytes("\0".join(astuple(self)).encode("utf-8"))


def retry_request[R: Conversation](request: R, answer: str, message: str) -> R:
    """The conversation so far, the answer, and ``message`` (the retry prompt naming what the answer broke); every
    other field of the request (system prompt, prompt hash, stage, context) as it was."""
    return replace(request, messages=(*request.messages, ("assistant", answer), ("user", message)))
