"""What the dataset card says the build used (tasks/dataset_card.py): who wrote the LLM answers (a model, the
sample's human-written stand-ins, the offline stand-in), one continuation per template and its mirror, and how
strongly each group's names stand for it, with the groups fa-names kept."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.pipeline import funnel_labels
from pbbq.tasks.names.strength import PROXY_STRENGTH
from pbbq.tasks.publish.dataset_card import CardParams
from pbbq.tasks.statistics import table1
from tests.release_support import BUILD, FUNNEL, build_release, make_configs

STRENGTH = pd.DataFrame(
    [
        ("fa", "Nationality", "ژاپنی", 3, 10, 0.72, 0.3333, 0.4333, True),
        ("fa", "Nationality", "ایرانی", 3, 10, 0.5, 0.3333, 0.4333, True),
        ("fa", "Nationality", "هندی", 3, 10, 0.28, 0.3333, 0.4333, False),
    ],
    columns=PROXY_STRENGTH.names,
)


def _card(tmp_path: Path, header: dict | None, strength: pd.DataFrame | None = STRENGTH) -> str:
    transcript = None
    if header is not None:
        transcript = tmp_path / "transcript.jsonl"
        transcript.write_text(json.dumps(header) + "\n", encoding="utf-8")
    configs = make_configs()
    folder = build_release(
        tmp_path / "publish",
        configs,
        table1=table1(configs["fa"]),
        funnel=FUNNEL,
        transcript_path=transcript,
        card=CardParams(build_id=BUILD, funnel_labels=funnel_labels(), transcript_header=header),
        proxy_strength=strength,
    )
    return (folder.path / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (
            {"model": "gpt-4o", "provider": "openai", "transcript": "pbbq", "version": 1},
            "the LLM answers came from model `gpt-4o` (provider `openai`), as the header of `transcript.jsonl`",
        ),
        (
            {"model": "sample-stand-in", "provider": "openai", "transcript": "pbbq", "version": 1},
            "no model wrote the LLM answers: they are the bundled sample's stand-ins, texts people wrote",
        ),
        (
            {"model": "gpt-4o", "stand_in": True, "transcript": "pbbq", "version": 1},
            "every LLM answer is placeholder text from the offline stand-in",
        ),
        (None, "No transcript came with this release, so this card cannot say which model wrote its LLM answers"),
    ],
)
def test_the_card_says_who_wrote_the_llm_answers(tmp_path: Path, header: dict | None, says: str) -> None:
    text = " ".join(_card(tmp_path, header).split())
    assert says in text


@pytest.mark.parametrize(
    ("header", "limitations", "creators"),
    [
        (
            {"model": "gpt-4o", "provider": "openai", "transcript": "pbbq", "version": 1},
            ["continuations were written by an LLM", "The English configs are machine translations"],
            "- machine-generated",
        ),
        (
            {"model": "sample-stand-in", "provider": "openai", "transcript": "pbbq", "version": 1},
            ["written by people standing in for an LLM", "translated by people standing in for an LLM"],
            None,
        ),
        (
            {"model": "gpt-4o", "stand_in": True, "transcript": "pbbq", "version": 1},
            ["continuations are placeholder text", "placeholder translations"],
            "- machine-generated",
        ),
    ],
)
def test_the_cards_limitations_and_header_say_who_wrote_the_texts(
    tmp_path: Path, header: dict, limitations: list[str], creators: str | None
) -> None:
    """Not only the method section: the limitations and the YAML header follow the transcript too, so a card of
    the sample, whose texts people wrote, never calls them machine-written."""
    card = _card(tmp_path, header)
    text = " ".join(card.split())
    assert all(limitation in text for limitation in limitations)
    yaml_header = card.split("\n---\n")[0]
    assert ("machine-generated" in yaml_header) == (creators is not None)
    assert "joined by `/`" not in text and "'GerMans'" in text


def test_the_card_says_one_continuation_per_template_and_its_mirror(tmp_path: Path) -> None:
    text = " ".join(_card(tmp_path, None).split())
    assert "wrote, for each template, one continuation that settles the question" in text
    assert "that text with the two entities exchanged (its mirror)" in text
    assert "two continuations" not in text and "once with the other entity" not in text


def test_the_card_gives_each_groups_name_strength_and_what_fa_names_kept(tmp_path: Path) -> None:
    text = _card(tmp_path, None)
    assert "| Nationality | ژاپنی | 3 | 0.72 | 0.33 | 0.43 | kept |" in text
    assert "| Nationality | هندی | 3 | 0.28 | 0.33 | 0.43 | left out (`weak_proxy`) |" in text
    assert "Groups over the threshold: Nationality: ایرانی, ژاپنی. An example needs both of its groups" in text
    assert "chance + 0.10" in text
    assert "first names typical of the group" not in text
    unmeasured = _card(tmp_path / "none", None, strength=None)
    assert "The names' strength was not measured in this build" in unmeasured


def test_a_group_people_decided_is_marked_so_not_listed_as_over_the_threshold(tmp_path: Path) -> None:
    """A review round may keep a group the classifier found weak (Indian, 0.28 under 0.43): the card marks the
    decision as the people's, never lists the group as over a threshold it is under."""
    reviewed = STRENGTH.assign(strong=STRENGTH["strong"] | (STRENGTH["group"] == "هندی"))
    text = _card(tmp_path, None, strength=reviewed)
    assert "| Nationality | هندی | 3 | 0.28 | 0.33 | 0.43 | kept by people |" in text
    assert "| Nationality | ژاپنی | 3 | 0.72 | 0.33 | 0.43 | kept |" in text
    assert "Groups kept: Nationality: ایرانی, هندی, ژاپنی. An example needs both of its groups kept" in text
    assert "Groups over the threshold" not in text
