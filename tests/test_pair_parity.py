"""Role, number, status and maturity parity of an entity pair, pinned by hand with the reader's findings on the
sample (merchant vs tourist, a family vs an owner, head of household vs wealthy, girl vs young woman, …) and with
pairs that must stay: the same head with different group words."""

from __future__ import annotations

import pandas as pd
import pytest

from pbbq.tasks.core.soundness import soundness
from pbbq.tasks.instantiate import InstantiateParams, instantiate
from pbbq.tasks.statistics import funnel
from pbbq.tasks.text.cues import CONFOUNDS, entity_number, entity_role, entity_statuses, pair_confound
from tests.templates import STEREOTYPES, set_entity, template_row

pytestmark = pytest.mark.usefixtures("fresh_cue_caches")


@pytest.mark.parametrize(
    ("stereo", "nonstereo", "category", "reason"),
    [
        ("بازرگان هندی", "گردشگر آلمانی", "Nationality", "role_confound"),
        ("گردشگر هندی", "بازرگان ژاپنی", "Nationality", "role_confound"),
        ("فعال سلطنت‌طلب", "تحلیل‌گر جمهوری‌خواه", "Political Orientation", "role_confound"),
        ("خانواده‌ی مستاجر", "مالک", "Property Ownership", "number_confound"),
        ("مستاجر", "خانواده‌ی مالک", "Property Ownership", "number_confound"),
        ("زن سرپرست خانوار کم‌درآمد", "زن ثروتمند", "Socio-economic Status", "status_confound"),
        ("دختر نابینا", "زن جوان بینا", "Disability", "age_confound"),
        ("زن جوان نابینا", "دختر بینا", "Disability", "age_confound"),
        ("پسر هم‌جنس‌گرا", "مرد جوان دگرجنس‌گرا", "Sexual Orientation", "age_confound"),
        ("زن بی‌سواد", "زن استاد دانشگاه", "Educational Background", "role_confound"),
        ("کارگر جوان افغانستانی", "جوان ایرانی", "Nationality", "role_confound"),
        ("جوان کرد", "دانشجوی فارس", "Ethnicity", "status_confound"),
        ("مرد ثروتمند کرد", "مرد فارس", "Ethnicity", "status_confound"),
        # the same head with different group words, or a difference that is the category's attribute
        ("بازرگان هندی", "بازرگان ژاپنی", "Nationality", None),
        ("گردشگر هندی", "گردشگر آلمانی", "Nationality", None),
        ("خانواده‌ی مستاجر", "خانواده‌ی مالک", "Property Ownership", None),
        ("مستاجر", "مالک", "Property Ownership", None),
        ("فعال سلطنت‌طلب", "فعال جمهوری‌خواه", "Political Orientation", None),
        ("زن کم‌درآمد", "زن ثروتمند", "Socio-economic Status", None),
        ("دختر نابینا", "دختر بینا", "Disability", None),
        ("زن جوان نابینا", "زن جوان بینا", "Disability", None),
        ("زن بی‌سواد", "زن تحصیل‌کرده", "Educational Background", None),
        ("دانشجوی اصفهانی", "دانشجوی اهوازی", "Domestic Area", None),
        ("پسر تک‌فرزند", "پسر خانواده‌ی پرجمعیت", "Family Structure", None),
        ("راننده‌ی تاکسی", "کارمند بانک", "Profession", None),
        ("کارخانه‌دار ثروتمند", "معلم", "Socio-economic Status", None),
        ("مادرشوهر", "مادر عروس", "Family Structure", None),
        ("پدر جوان", "مادر جوان", "Gender", None),
        ("پدربزرگ بازنشسته", "مرد بیست‌وپنج‌ساله", "Age", None),
        ("پیرمرد بازنشسته", "مرد دانشجو", "Age", None),
    ],
)
def test_pair_confound_by_role_number_status_and_maturity(
    stereo: str, nonstereo: str, category: str, reason: str | None
) -> None:
    assert pair_confound(stereo, nonstereo, category, "fa") == reason


def test_the_head_cues_of_an_entity() -> None:
    """The role is the first role noun (an ezafe read as its noun), the number the head noun's, a status any."""
    assert [entity_role(e, "fa") for e in ("خانواده‌ی مستاجر", "زن استاد دانشگاه", "راننده‌ی زن", "مرد نابینا")] == [
        "tenant",
        "professor",
        "driver",
        "person",
    ]
    assert [entity_number(e, "fa") for e in ("خانواده‌ی مالک", "پسر خانواده‌ی پرجمعیت", "مالک", "گروه دانشجویان")] == [
        "group",
        "one",
        "one",
        "group",
    ]
    assert entity_statuses("زن سرپرست خانوار کم‌درآمد", "fa") == {
        "head of household": frozenset({"Family Structure"}),
        "low-income": frozenset({"Socio-economic Status"}),
    }
    assert entity_statuses("دانشجوی جوان", "fa") == {"student": frozenset({"Age", "Educational Background"})}


NATIONALITY = {
    "stereotype_id": "S2",
    "category": "Nationality",
    "stereo_entities": ["گردشگر هندی", "بازرگان هندی"],
    "nonstereo_entities": ["گردشگر آلمانی", "بازرگان ژاپنی"],
}


def test_a_role_confounded_pair_is_dropped_with_its_cues_unless_allowed() -> None:
    templates = pd.DataFrame(
        [
            template_row("N1", **NATIONALITY),
            template_row("N2", **NATIONALITY, allowed_pairs=["بازرگان هندی|گردشگر آلمانی|both travel abroad"]),
        ]
    )
    output = instantiate(templates, STEREOTYPES, InstantiateParams(("نمی‌دانم",)))
    dropped = output["dropped_pairs"]
    assert sorted(zip(dropped["template_id"], dropped["stereo_entity"], dropped["nonstereo_entity"], strict=True)) == [
        ("N1", "بازرگان هندی", "گردشگر آلمانی"),
        ("N1", "گردشگر هندی", "بازرگان ژاپنی"),
        ("N2", "گردشگر هندی", "بازرگان ژاپنی"),
    ]
    assert set(dropped["reason"]) == {"role_confound"}
    first = dropped.set_index(["template_id", "stereo_entity"]).loc[("N1", "بازرگان هندی")]
    assert (first["stereo_role"], first["nonstereo_role"]) == ("merchant", "tourist")
    assert [(a["stereo_entity"], a["confound"]) for a in output.report["allowed_pairs"]] == [
        ("بازرگان هندی", "role_confound")
    ]
    examples = output["examples"]
    assert soundness(examples, templates).query("violations > 0").empty
    steps = funnel(pd.DataFrame({"kept": [True]}), templates.assign(kept=True), examples, dropped).set_index("step")[
        "count"
    ]
    assert {reason: steps[f"pairs_dropped_{reason}"] for reason in CONFOUNDS} == {
        "gender_confound": 0,
        "age_confound": 0,
        "number_confound": 0,
        "role_confound": 3,
        "status_confound": 0,
    }
    assert steps["pairs_without_confound"] == 5 and steps["entity_pairs"] == 8


@pytest.mark.parametrize(
    ("nonstereo", "check"),
    [
        ("گردشگر ژاپنی", "role_confound"),
        ("خانواده‌ی ژاپنی", "number_confound"),
        ("بازرگان ثروتمند ژاپنی", "status_confound"),
    ],
)
def test_the_build_check_counts_rows_whose_pair_differs_in_role_number_or_status(nonstereo: str, check: str) -> None:
    """A built pair changed afterwards (as a bug in a later step could) is counted in ``09_statistics/soundness``."""
    template = template_row("N1", **{**NATIONALITY, "stereo_entities": ["بازرگان هندی"]})
    templates = pd.DataFrame([template])
    examples = instantiate(templates, STEREOTYPES, InstantiateParams(("نمی‌دانم",)))["examples"]
    broken = examples.copy()
    set_entity(broken, broken["example_id"].notna(), nonstereo)
    table = soundness(broken, templates).set_index("check")["violations"]
    assert table[check] == len(broken) and table[[c for c in CONFOUNDS if c != check]].sum() == 0
