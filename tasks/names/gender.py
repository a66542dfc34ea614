"""The genders of an example's references: the LLM labeller for those its cues leave undecided (§4.1.1), and the
gender an entity pair's examples agree on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import Any

from ..core.artifacts import REPO_ROOT, sha256_bytes
from ..core.schemas import OPTIONS
from ..llm import LLMClient, LLMRequest
from .params import STAGE_NAME
from .patterns import NEUTRAL, UNDECIDED
from .prepare import ENTITY_COLUMNS, Prepared
from .tables import GENDERS

GENDER_PROMPT_FILE = REPO_ROOT / "prompts" / "names_gender.txt"


def load_gender_prompt(path: Path = GENDER_PROMPT_FILE) -> str:
    """The LLM labeller's prompt (``prompts/names_gender.txt``); the flow passes its text so its hash is an input."""
    return path.read_text(encoding="utf-8")


def gender_request(row: Mapping[str, Any], entity: str, prompt: str) -> LLMRequest:
    """The question to the LLM labeller for one entity of one example (§4.1.1: GPT-4o labelled the genders)."""
    options = "\n".join(f"- {row[f]}" for f in OPTIONS)
    text = Template(prompt).substitute(
        context=row["context"], question=row["question"], options=options, mention=entity
    )
    return LLMRequest(
        messages=(("user", text),),
        prompt_hash=sha256_bytes(prompt.encode("utf-8")),
        stage=STAGE_NAME,
        context=f"example {row['example_id']}, entity {entity}",
    )


def label_undecided(prepared: Sequence[Prepared], client: LLMClient, prompt: str) -> None:
    """Ask the LLM for every undecided gender; an answer other than female, male or neutral leaves it undecided."""
    pending = [(item, index) for item in prepared for index, g in enumerate(item.genders) if g == UNDECIDED]
    requests = [gender_request(item.row, item.row[ENTITY_COLUMNS[index]], prompt) for item, index in pending]
    if not requests:
        return
    for (item, index), answer in zip(pending, client.complete_many(requests), strict=True):
        label = answer.text.strip().strip(".").lower()
        if label in (*GENDERS, NEUTRAL):
            item.genders[index] = label
        item.request_ids.append(answer.request_id)


def agree_pair_genders(prepared: Sequence[Prepared]) -> None:
    """Give an entity the gender its pair's examples (:meth:`Prepared.pair_key`) agree on where its own example has
    no cue: the pair takes one pair of names, so the disambiguated context's 'he' names the ambiguous context's
    person too. Examples whose cues differ across the pair keep their own (BBQ's Nationality-20 writes 'an
    American woman and a Vietnamese man' in one order and the genders exchanged in the other) and are drawn apart
    (:meth:`Prepared.draw_key`)."""
    pairs: dict[str, list[Prepared]] = {}
    for item in prepared:
        pairs.setdefault(item.pair_key(), []).append(item)
    for members in pairs.values():
        for index in range(len(ENTITY_COLUMNS)):
            decided = {item.genders[index] for item in members} - {NEUTRAL}
            if len(decided) == 1 and UNDECIDED not in decided:
                for item in members:
                    item.genders[index] = next(iter(decided))
