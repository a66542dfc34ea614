"""The LLM requests of a translate stage: its prompt files (:class:`TranslatePrompts`), a segment's translation
request (:func:`forward_request`), the retry naming the rules an answer broke (:func:`follow_up`) and the
back-translation request (:func:`back_request`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from ..core.artifacts import REPO_ROOT
from ..core.prompts import PromptBundle, retry_request
from ..llm import LLMRequest
from ..text.languages import Language
from .checks import Failure
from .glossary import SOURCE, TARGET
from .pair import PERSIAN_ENGLISH, Pair

PROMPTS = REPO_ROOT / "prompts"
KIND_NAMES = {"entity": "phrase", "lex": "phrase", "group": "phrase", "question": "question", "context": "text"}
AGREEMENT_INSTRUCTIONS = {
    "feminine": "Both people it may be about are women.",
    "masculine": "The two people it may be about are not both women.",
}
"""What a question's request adds in a target whose verbs agree with their subject's gender
(:func:`~pbbq.tasks.translate.segments.question_agreement`): whether the people it asks about are both women."""


def prompt_files(source: Language, target: Language) -> tuple[str, ...]:
    """In :class:`TranslatePrompts`' order: instructions, data, retry (each of the pair, ``fa-en``); back-translation
    instructions and data (the pair reversed, ``en-fa``)."""
    pair, back = f"{source.code}-{target.code}", f"{target.code}-{source.code}"
    return (
        f"translate.{pair}.txt",
        f"translate.input.{pair}.txt",
        f"translate.retry.{pair}.txt",
        f"back_translate.{back}.txt",
        f"back_translate.input.{back}.txt",
    )


def prompt_folder(pair: Pair) -> Path:
    """Where a pair's prompt files are: its target's own folder (a language a build adds), else ``prompts/``."""
    return pair.target.prompts or PROMPTS


def missing_prompt_files(pair: Pair) -> list[Path]:
    """The pair's prompt files (:func:`prompt_files`) that its :func:`prompt_folder` lacks."""
    folder = prompt_folder(pair)
    return [folder / name for name in prompt_files(pair.source, pair.target) if not (folder / name).is_file()]


@dataclass(frozen=True)
class TranslatePrompts(PromptBundle):
    """``forward`` and ``back`` are system messages (the instructions); ``data`` and ``back_data`` the user
    messages, where the segment's text travels inside tags, after the instructions; ``retry`` names the broken
    rules."""

    forward: str
    data: str
    retry: str
    back: str
    back_data: str

    @classmethod
    def load(cls, folder: Path = PROMPTS, source: Language = SOURCE, target: Language = TARGET) -> TranslatePrompts:
        return cls.read(tuple(folder / name for name in prompt_files(source, target)))


def delimited(text: str) -> str:
    """Text as it goes inside a prompt's tag: angle brackets become look-alikes, so it cannot close its block or
    open another."""
    return text.replace("<", "‹").replace(">", "›")


def _lines(entries: Iterable[tuple[str, str]], empty: str) -> str:
    lines = [f"{delimited(fa)} → {delimited(en)}" for fa, en in entries]
    return "\n".join(lines) if lines else empty


def forward_request(
    segment: Mapping[str, Any], entities: Mapping[str, str], prompts: TranslatePrompts, pair: Pair = PERSIAN_ENGLISH
) -> LLMRequest:
    """The translation request of one segment: the instructions for its kind (system message), and in the user
    message its glossary entries, the translation of a context's entity phrases and its text, each in its tag."""
    kind = segment["kind"]
    note = AGREEMENT_INSTRUCTIONS.get(segment.get("agreement", ""))
    instructions = pair.instructions[kind] + (f" {note}" if note else "")
    data = Template(prompts.data).substitute(
        glossary=_lines(segment["glossary"], "(no group names in this text)"),
        phrases=_lines(entities.items(), "(none)"),
        text=delimited(segment[pair.source_column]),
    )
    return LLMRequest(
        messages=(("user", data),),
        system=Template(prompts.forward).substitute(kind=KIND_NAMES[kind], instructions=instructions),
        prompt_hash=prompts.sha256,
        stage=pair.stage,
        context=segment["segment_id"],
        languages=(pair.source_code, pair.target_code),
    )


def back_request(
    segment_id: str, translated: str, prompts: TranslatePrompts, pair: Pair = PERSIAN_ENGLISH
) -> LLMRequest:
    """The back-translation request of one segment's translation."""
    return LLMRequest(
        messages=(("user", Template(prompts.back_data).substitute(text=delimited(translated))),),
        system=prompts.back,
        prompt_hash=prompts.sha256,
        stage=pair.stage,
        context=f"back {segment_id}",
        languages=(pair.target_code, pair.source_code),
    )


def follow_up(
    request: LLMRequest, answer: str, failures: list[Failure], kind: str, prompts: TranslatePrompts
) -> LLMRequest:
    """The conversation so far, the answer, and a message that names every rule it broke."""
    named = " ".join(failure.message for failure in failures)
    return retry_request(request, answer, Template(prompts.retry).substitute(failure=named, kind=KIND_NAMES[kind]))
