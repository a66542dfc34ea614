"""The build's soundness checks: each breaks on the one defect it names, and a sound build reads 0 everywhere."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

from tasks.instantiate import InstantiateParams, instantiate
from tasks.soundness import CHECKS, soundness
from tests.test_instantiate import STEREOTYPES, _template


@pytest.fixture(scope="module")
def built() -> tuple[pd.DataFrame, pd.DataFrame]:
    templates = pd.DataFrame(
        [
            _template("T1", category="Ethnicity", stereo_entities=["مرد لر"], nonstereo_entities=["مرد فارس"]),
            _template("T2", category="Gender", stereo_entities=["زن جوان"], nonstereo_entities=["مرد جوان"]),
        ]
    )
    return instantiate(templates, STEREOTYPES, InstantiateParams(("نمی‌دانم",)))["examples"], templates


def _violations(examples: pd.DataFrame, templates: pd.DataFrame) -> dict[str, int]:
    table = soundness(examples, templates)
    return dict(zip(table["check"], table["violations"], strict=True))


def _first(column: str, value: Callable[[object], object]) -> Callable[[pd.DataFrame], None]:
    def change(frame: pd.DataFrame) -> None:
        frame.at[0, column] = value(frame.at[0, column])

    return change


def _swap_label(frame: pd.DataFrame) -> None:
    frame.at[0, "label"] = (frame.at[0, "label"] + 1) % 3


def _duplicate(frame: pd.DataFrame) -> None:
    example_id = frame.at[1, "example_id"]
    frame.loc[1] = frame.loc[0]
    frame.at[1, "example_id"] = example_id


def _mixed_pair(frame: pd.DataFrame) -> None:
    frame.loc[frame["template_id"] == "T1", "nonstereo_entity"] = "زن فارس"


BREAKS = {
    "duplicate_example": _duplicate,
    "unfilled_placeholder": _first("context", lambda text: text + " {lex}"),
    "label_role": _swap_label,
    "target_loc": _first("target_loc", lambda loc: (loc + 1) % 3),
    "answer_info_text": _first("answer_info", lambda info: {**info, "ans0": ["x", info["ans0"][1]]}),
    "gender_confound": _mixed_pair,
}


def test_a_sound_build_has_no_violation(built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    examples, templates = built
    table = soundness(examples, templates)
    assert list(table["check"]) == list(CHECKS) and set(table["config"]) == {"fa"}
    assert table["violations"].sum() == 0 and (table["examples"] == len(examples)).all()


@pytest.mark.parametrize("check", BREAKS)
def test_each_check_finds_its_defect(built: tuple[pd.DataFrame, pd.DataFrame], check: str) -> None:
    examples, templates = built
    broken = examples.copy()
    BREAKS[check](broken)
    violations = _violations(broken, templates)
    assert violations[check] >= 1
    assert {name: n for name, n in violations.items() if n} == {check: violations[check]}


def test_age_confound_outside_age_and_allowed_pairs(built: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    examples, templates = built
    broken = examples.copy()
    broken.loc[broken["template_id"] == "T2", "nonstereo_entity"] = "آقای میان‌سال"
    assert _violations(broken, templates)["age_confound"] == (broken["template_id"] == "T2").sum()
    allowed = templates.assign(allowed_pairs=[[], ["زن جوان|آقای میان‌سال|same office"]])
    assert _violations(broken, allowed)["age_confound"] == 0
