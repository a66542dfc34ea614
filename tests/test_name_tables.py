"""The name tables (tasks/names/tables.py, annotations/names/): the validator names file, row and problem for every
rule (eras, aliases, names per gender and era, duplicates, shared names); the shipped tables hold first names in
use, one Turk/Azeri group, the added groups, and every Persian name's gender agrees with the independent list of
the persian-gender-detection package or the table records the decision."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from persian_gender_detection import get_gender

from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import InputError, load_questionnaire, load_templates
from pbbq.tasks.names.tables import (
    ERAS,
    NAME_COLUMNS,
    REQUIRED_COLUMNS,
    entity_groups,
    group_words,
    load_name_table,
)
from tests.helpers import NAMES_FA

DECISION = re.compile(r"gender checked: (female|male)\b")


def write_table(
    path: Path,
    groups: dict[str, tuple[list[str], list[str]]],
    lang: str = "fa",
    eras: Callable[[int], str] = lambda i: "all",
    aliases: dict[str, str] | None = None,
) -> Path:
    """A name table with ``groups`` (female names, male names); the i-th name of a gender gets era ``eras(i)``."""
    rows = [
        (lang, group, (aliases or {}).get(group, ""), gender, eras(i), name, name, "")
        for group, (female, male) in groups.items()
        for gender, names_ in (("female", female), ("male", male))
        for i, name in enumerate(names_)
    ]
    pd.DataFrame(rows, columns=NAME_COLUMNS).to_csv(path, index=False)
    return path


def five(prefix: str) -> tuple[list[str], list[str]]:
    return [f"{prefix}f{i}" for i in range(5)], [f"{prefix}m{i}" for i in range(5)]


def _by_era(i: int) -> str:
    """Two names of each era among five, one of them in two eras written out of order."""
    return ["pre1970", "pre1970", "1970-1995", "1970-1995;post1995", "post1995;pre1970"][i]


# --- the validator --------------------------------------------------------------------------------------------


def test_validator_accepts_a_good_table_and_spells_eras_one_way(tmp_path: Path) -> None:
    table = load_name_table(write_table(tmp_path / "n.csv", {"ترک": five("a"), "فارس": five("b")}, eras=_by_era))
    assert len(table) == 20 and list(table.columns) == NAME_COLUMNS
    assert table["era"].tolist()[:5] == ["pre1970", "pre1970", "1970-1995", "1970-1995;post1995", "pre1970;post1995"]
    everywhere = load_name_table(write_table(tmp_path / "all.csv", {"ترک": five("a")}))
    assert set(everywhere["era"]) == {";".join(ERAS)}


def test_aliases_and_note_may_be_left_out(tmp_path: Path) -> None:
    path = write_table(tmp_path / "n.csv", {"ترک": five("a")})
    pd.read_csv(path, dtype=str, keep_default_na=False)[REQUIRED_COLUMNS].to_csv(path, index=False)
    table = load_name_table(path)
    assert set(table["aliases"]) == {""} and set(table["note"]) == {""}


def test_validator_rejects_fewer_than_five_names_of_a_gender(tmp_path: Path) -> None:
    female, male = five("b")
    path = write_table(tmp_path / "n.csv", {"ترک": five("a"), "فارس": (female[:4], male)})
    with pytest.raises(InputError) as error:
        load_name_table(path)
    assert error.value.path == path and error.value.row == 12
    assert "group 'فارس' (fa) has 4 female names; at least 5" in str(error.value)


def test_validator_rejects_an_era_with_fewer_than_two_names_of_a_gender(tmp_path: Path) -> None:
    path = write_table(tmp_path / "n.csv", {"ترک": five("a"), "فارس": five("b")})
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[10:13, "era"] = "pre1970;1970-1995"  # فارس's female names: only the fifth (all) is of post1995
    frame.to_csv(path, index=False)
    with pytest.raises(InputError) as error:
        load_name_table(path)
    assert error.value.row == 12
    assert "group 'فارس' (fa) has 1 female name(s) of era post1995; at least 2 are needed" in str(error.value)
    frame.loc[13, "era"] = "post1995"
    frame.to_csv(path, index=False)
    assert len(load_name_table(path)) == 20


def test_validator_rejects_a_duplicate_name_in_a_group(tmp_path: Path) -> None:
    female, male = five("a")
    path = write_table(tmp_path / "n.csv", {"ترک": ([*female[:4], female[0]], male)})
    with pytest.raises(InputError) as error:
        load_name_table(path)
    assert error.value.row == 6 and "appears twice in group 'ترک' (first in row 2)" in str(error.value)


def test_validator_rejects_a_name_shared_by_groups_that_meet(tmp_path: Path) -> None:
    female, male = five("b")
    path = write_table(tmp_path / "n.csv", {"ترک": five("a"), "آذری": (female, male), "فارس": five("c")})
    shared = write_table(
        tmp_path / "shared.csv", {"ترک": five("a"), "آذری": (["af0", *female[1:]], male), "فارس": five("c")}
    )
    templates = pd.DataFrame(
        {
            "template_id": ["ETH-01-T1"],
            "stereo_entities": [["مرد ترک", "زن آذری"]],
            "nonstereo_entities": [["مرد فارس"]],
        }
    )
    assert len(load_name_table(path, templates)) == 30
    # ترک and آذری are both stereotyped in the template: they never meet, so they may share a name...
    assert len(load_name_table(shared, templates)) == 30
    # ... but without templates any two groups of a language may meet
    with pytest.raises(
        InputError, match=r"row 12: name 'af0' \(fa\) is given to group 'ترک' \(row 2\) and to group 'آذری'"
    ):
        load_name_table(shared)
    meets = write_table(
        tmp_path / "meets.csv", {"ترک": five("a"), "آذری": five("b"), "فارس": (["af0", *female[1:]], male)}
    )
    with pytest.raises(InputError) as error:
        load_name_table(meets, templates)
    assert error.value.row == 22
    assert "meet in one example in template ETH-01-T1: the proxy could not tell them apart" in str(error.value)


@pytest.mark.parametrize(
    ("edit", "row", "problem"),
    [
        (lambda t: t.assign(gender=t["gender"].replace("male", "m")), 7, "gender 'm' is not one of female, male"),
        (lambda t: t.assign(lang="de"), 2, "lang 'de' is not one of en, fa"),
        (lambda t: t.assign(transliteration=[*t["transliteration"][:-1], ""]), 11, "empty transliteration"),
        (lambda t: t.assign(era=[*t["era"][:-1], ""]), 11, "empty era"),
        (lambda t: t.drop(columns="transliteration"), 1, "missing column(s) transliteration"),
        (lambda t: t.drop(columns="era"), 1, "missing column(s) era"),
        (
            lambda t: t.assign(era=[*t["era"][:2], "1980s", *t["era"][3:]]),
            4,
            "era '1980s' is not one or more of pre1970, 1970-1995, post1995 (';'-separated) or all",
        ),
        (
            lambda t: t.assign(era=[*t["era"][:2], "pre1970;pre1970", *t["era"][3:]]),
            4,
            "era 'pre1970;pre1970' is not one or more of pre1970, 1970-1995, post1995 (';'-separated) or all",
        ),
        (
            lambda t: t.assign(era=[*t["era"][:2], "all;post1995", *t["era"][3:]]),
            4,
            "era 'all;post1995' is not one or more of pre1970, 1970-1995, post1995 (';'-separated) or all",
        ),
    ],
)
def test_validator_names_file_row_and_problem(
    tmp_path: Path, edit: Callable[[pd.DataFrame], pd.DataFrame], row: int, problem: str
) -> None:
    path = write_table(tmp_path / "n.csv", {"ترک": five("a")})
    edit(pd.read_csv(path, dtype=str, keep_default_na=False)).to_csv(path, index=False)
    with pytest.raises(InputError) as error:
        load_name_table(path)
    assert str(error.value) == f"{path}, row {row}: {problem}"


# --- aliases --------------------------------------------------------------------------------------------------


def test_an_alias_names_the_same_group(tmp_path: Path) -> None:
    path = write_table(tmp_path / "n.csv", {"آذری": five("a"), "فارس": five("b")}, aliases={"آذری": "ترک"})
    table = load_name_table(path)
    words = group_words(table)["fa"]
    assert words == {"آذری": "آذری", "ترک": "آذری", "فارس": "فارس"}
    assert entity_groups("مرد ترک", words) == entity_groups("زن آذری", words) == ["آذری"]
    assert entity_groups("مرد ترکیه‌ای", words) == []  # a whole word only


@pytest.mark.parametrize(
    ("aliases", "row", "problem"),
    [
        ({"آذری": "فارس"}, 2, "alias 'فارس' of group 'آذری' (fa) already names group 'فارس' (row 12)"),
        ({"آذری": "آذری"}, 2, "alias 'آذری' of group 'آذری' (fa) already names group 'آذری' (row 2)"),
        ({"آذری": "ترک", "فارس": "ترک"}, 12, "alias 'ترک' of group 'فارس' (fa) already names group 'آذری' (row 2)"),
    ],
)
def test_an_alias_may_name_no_other_group(tmp_path: Path, aliases: dict[str, str], row: int, problem: str) -> None:
    path = write_table(tmp_path / "n.csv", {"آذری": five("a"), "فارس": five("b")}, aliases=aliases)
    with pytest.raises(InputError) as error:
        load_name_table(path)
    assert str(error.value) == f"{path}, row {row}: {problem}"


def test_a_group_has_one_set_of_aliases(tmp_path: Path) -> None:
    path = write_table(tmp_path / "n.csv", {"آذری": five("a")}, aliases={"آذری": "ترک"})
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[4, "aliases"] = ""
    frame.to_csv(path, index=False)
    with pytest.raises(InputError) as error:
        load_name_table(path)
    assert str(error.value) == (
        f"{path}, row 6: aliases '' of group 'آذری' differ from its row 2 ('ترک'): a group has one set of aliases"
    )


# --- the shipped tables ---------------------------------------------------------------------------------------


def test_shipped_tables_cover_every_group_the_sample_names(fa_table: pd.DataFrame, en_table: pd.DataFrame) -> None:
    questionnaire = load_questionnaire(REPO_ROOT / "survey" / "questionnaire.csv")
    templates = load_templates(REPO_ROOT / "annotations" / "templates.csv", questionnaire["stereotype_id"])
    assert len(load_name_table(NAMES_FA, templates)) == len(fa_table)
    words = group_words(fa_table)["fa"]
    categories = questionnaire.set_index("stereotype_id")["category"]
    nameable = templates[templates["stereotype_id"].map(categories).isin(["Ethnicity", "Nationality", "Domestic Area"])]
    entities = {e for column in ("stereo_entities", "nonstereo_entities") for es in nameable[column] for e in es}
    assert entities and all(len(entity_groups(e, words)) == 1 for e in entities)
    for table, n_groups in ((fa_table, 30), (en_table, 68)):
        assert table["group"].nunique() == n_groups
        assert (table.groupby(["group", "gender"]).size() == 5).all()


def test_turk_and_azeri_are_one_group_and_the_new_groups_are_there(fa_table: pd.DataFrame) -> None:
    words = group_words(fa_table)["fa"]
    assert words["ترک"] == words["آذری"] == "آذری"
    assert "ترکیه‌ای" in words and words["ترکیه‌ای"] != words["ترک"]
    for group in ("بلوچ", "ترکمن", "ارمنی", "عرب", "اهوازی"):
        assert fa_table.loc[fa_table["group"] == group, "gender"].value_counts().to_dict() == {"female": 5, "male": 5}


def test_shipped_tables_hold_first_names_in_use(fa_table: pd.DataFrame, en_table: pd.DataFrame) -> None:
    not_first_names = {
        *("بی‌بی‌جان", "بی‌بی‌مریم", "بی‌بی‌زهرا", "بی‌بی‌خانم", "خانم"),  # honorifics and titles
        *("حافظ", "سعدی", "محتشم", "خواجو", "بوعلی"),  # poets, pen names, a scholar's by-name
        *("دیلمان", "دالاهو"),  # places
        *("طهماسب", "صفی", "مرداویج", "وشمگیر", "گیلانشاه", "گنجعلی", "صمصام"),  # rulers and a ruler's title
    }
    assert not_first_names.isdisjoint(fa_table["name"])
    assert not fa_table["name"].str.startswith("بی‌بی").any()
    famous = {"Muammar", "Samora", "Graça", "Eusébio", "Shakib", "Tamim", "Mashrafe", "Mominul", "Bashar", "Yasser"}
    assert famous.isdisjoint(en_table["name"])


def test_no_city_list_encodes_a_religion(fa_table: pd.DataFrame) -> None:
    """Yazd's list was all Zoroastrian names, Hamadan's had the Jewish Ester: each city list now holds at least
    two Islamic names of each gender, like the civil registry of every Iranian province."""
    islamic = {"زینب", "نازنین‌زهرا", "طاهره", "محمدعلی", "هادی", "امیرمحمد", "سکینه", "اکرم", "طاهر", "یاسین"}
    for city in ("یزدی", "همدانی"):
        names = fa_table.loc[fa_table["group"] == city]
        assert names["name"].isin(islamic).groupby(names["gender"]).sum().min() >= 2
    assert "استر" not in set(fa_table["name"])


def test_every_group_can_draw_an_era_matched_pair(fa_table: pd.DataFrame, en_table: pd.DataFrame) -> None:
    for table in (fa_table, en_table):
        for (group, gender), rows in table.groupby(["group", "gender"]):
            for era in ERAS:
                assert rows["era"].str.contains(era, regex=False).sum() >= 2, (group, gender, era)


# --- the gender cross-check -----------------------------------------------------------------------------------


def gender_disagreements(table: pd.DataFrame) -> tuple[int, list[dict[str, str]]]:
    """Every Persian name that persian-gender-detection knows, and those whose gender there differs from the
    table's, each with the table's decision (``gender checked: female|male`` in its note) or None."""
    found, disagreements = 0, []
    for row in table[table["lang"] == "fa"].itertuples():
        listed = get_gender(row.name).lower()
        if listed == "unknown":
            continue
        found += 1
        if listed != row.gender:
            decision = DECISION.search(row.note)
            disagreements.append(
                {
                    "group": row.group,
                    "name": row.name,
                    "table": row.gender,
                    "list": listed,
                    "decided": decision.group(1) if decision else None,
                }
            )
    return found, disagreements


def test_every_gender_disagreement_with_the_independent_list_is_decided(fa_table: pd.DataFrame) -> None:
    found, disagreements = gender_disagreements(fa_table)
    assert found >= 200  # the list knows most names of the table; 213 of 300 when the table was curated
    undecided = [d for d in disagreements if d["decided"] != d["table"]]
    assert undecided == [], "decide each in the table's note: 'gender checked: <gender> ...'"
    assert len(disagreements) == 16


def test_the_cross_check_catches_an_undecided_or_contradicting_name(tmp_path: Path) -> None:
    female, male = five("a")
    path = write_table(tmp_path / "n.csv", {"ترک": (["مهدی", "علی", *female[2:]], ["زهرا", "مریم", *male[2:]])})
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    notes = {"علی": "gender checked: female (decided)", "زهرا": "gender checked: female (contradicts the row)"}
    frame["note"] = frame["name"].map(notes).fillna("")
    frame.to_csv(path, index=False)
    found, disagreements = gender_disagreements(load_name_table(path))
    assert found == 4
    assert [(d["name"], d["table"], d["list"], d["decided"]) for d in disagreements] == [
        ("مهدی", "female", "male", None),
        ("علی", "female", "male", "female"),
        ("زهرا", "male", "female", "female"),
        ("مریم", "male", "female", None),
    ]
    assert [d["name"] for d in disagreements if d["decided"] != d["table"]] == ["مهدی", "زهرا", "مریم"]


def test_no_indian_or_japanese_name_reads_as_an_iranian_given_name(fa_table: pd.DataFrame) -> None:
    """A proxy for a foreign nationality must not read as the Iranian name it shares a spelling with («پریا», Pariya,
    stood for Indian Priya): none of these groups' names is in the independent list of Iranian given names."""
    foreign = fa_table[fa_table["group"].isin(["هندی", "ژاپنی"])]
    assert len(foreign) == 20
    assert [name for name in foreign["name"] if get_gender(name) != "UNKNOWN"] == []
