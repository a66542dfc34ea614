"""The template files of BBQ's second generator (nyu-mll/BBQ, ``generate_from_template_intersectional_cats.py``):
Race_x_gender and Race_x_SES, where each slot has a race and a second attribute (a gender, an SES).

Their files differ from the first generator's: ``Known_stereotyped_race`` holds the stereotyped races,
``Known_stereotyped_var2`` the stereotyped value of the second attribute (``M``/``F``, ``lowSES``/``highSES``),
``Names`` the second attribute's words (``["man", "woman"]``; for SES two lists, ``[["poor"], ["rich"]]``) in the
order of ``Var2_info`` (``["M", "F"]``), and ``Stated_gender_info`` the gender a Race_x_SES template's proper names
must have. :func:`from_second_generator` reads them into the first generator's columns, so one review sheet holds
both: the races become ``Known_stereotyped_groups`` and the second attribute's rule becomes one JSON cell in
``Names`` (:class:`SecondAttribute`, e.g. ``{"target": "F", "words": {"M": ["man"], "F": ["woman"]}}``), which
the sheet carries in ``bbq_names`` and :mod:`pbbq.tasks.adapt.intersectional` reads back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..core.inputs import InputError, spreadsheet_row

SECOND_VALUES = {"Race_x_gender": ("M", "F"), "Race_x_SES": ("lowSES", "highSES")}
"""Each category of the second generator → the two values of its second attribute."""
INTERSECTIONAL_CATEGORIES = tuple(SECOND_VALUES)
SECOND_ATTRIBUTE_SLOTS = ("{{GEN1}}", "{{GEN2}}", "{{OCC1}}", "{{OCC2}}")
"""The placeholders of the second attribute's words in these categories' texts (NAME1's and NAME2's)."""
SPELLINGS = {"Gender_x_race": "Race_x_gender"}
"""How BBQ's Race_x_gender file spells its ``Category`` → the category its generator gives the examples."""
RACE_COLUMN = "Known_stereotyped_race"
REQUIRED_COLUMNS = [RACE_COLUMN, "Known_stereotyped_var2"]
OPTIONAL_COLUMNS = ["Names", "Var2_info", "Stated_gender_info"]
GENDERS = ("M", "F")


@dataclass(frozen=True)
class SecondAttribute:
    """A template's rule for its second attribute: the stereotyped value (``target``), the words of each value
    (empty: BBQ's SES vocabulary, or for Race_x_gender proper names their own gender) and the gender every proper
    name must have (``gender``, empty for any)."""

    target: str
    words: dict[str, list[str]] = field(default_factory=dict)
    gender: str = ""

    def cell(self) -> str:
        """The rule as the JSON cell the sheet carries."""
        rule: dict[str, object] = {"target": self.target}
        if self.words:
            rule["words"] = self.words
        if self.gender:
            rule["gender"] = self.gender
        return json.dumps(rule, ensure_ascii=False)


def other_value(category: str, value: str) -> str:
    """The second attribute's value that is not ``value``."""
    first, second = SECOND_VALUES[category]
    return second if value == first else first


def _string_list(value: object) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(word, str) and word.strip() for word in value):
        raise ValueError(f"{json.dumps(value)} is not a list of words")
    return [word.strip() for word in value]


def second_attribute(cell: str, category: str) -> SecondAttribute:
    """The rule of a ``Names`` cell written by :func:`from_second_generator`. Raises ValueError naming what is
    wrong: not a JSON object, a target that is not one of the category's values, words not given for both values,
    a gender that is not M or F."""
    try:
        rule = json.loads(cell)
    except json.JSONDecodeError:
        rule = None
    if not isinstance(rule, dict) or set(rule) - {"target", "words", "gender"}:
        raise ValueError(f'not the second attribute\'s rule ({{"target": …, "words": …, "gender": …}}): {cell!r}')
    values = SECOND_VALUES[category]
    if rule.get("target") not in values:
        raise ValueError(f"target {rule.get('target')!r} is not one of {', '.join(values)}")
    words = rule.get("words", {})
    if words and (not isinstance(words, dict) or set(words) != set(values)):
        raise ValueError(f"words must give the words of each of {', '.join(values)}")
    if rule.get("gender", "") not in ("", *GENDERS):
        raise ValueError(f"gender {rule['gender']!r} is not M or F")
    return SecondAttribute(rule["target"], {v: _string_list(words[v]) for v in values if words}, rule.get("gender", ""))


def _rule(row: pd.Series, category: str) -> SecondAttribute:
    """The rule of one template row of BBQ's second-generator format. Raises ValueError."""
    values = SECOND_VALUES[category]
    target = row["Known_stereotyped_var2"]
    if target not in values:
        raise ValueError(f"Known_stereotyped_var2 {target!r} is not one of {', '.join(values)}")
    if bool(row["Names"]) != bool(row["Var2_info"]):
        raise ValueError("Names and Var2_info go together: both or neither")
    words: dict[str, list[str]] = {}
    if row["Names"]:
        try:
            names, infos = json.loads(row["Names"]), json.loads(row["Var2_info"])
        except json.JSONDecodeError as exc:
            raise ValueError(f"Names or Var2_info is not a JSON list ({exc.msg})") from None
        if not isinstance(infos, list) or sorted(infos) != sorted(values) or not isinstance(names, list):
            raise ValueError(f"Var2_info {row['Var2_info']!r} must list {', '.join(values)}, each once")
        if len(names) != len(infos):
            raise ValueError(f"Names {row['Names']!r} must give one entry per Var2_info value")
        words = {
            info: _string_list(name if isinstance(name, list) else [name])
            for info, name in zip(infos, names, strict=True)
        }
    elif category == "Race_x_gender" and row["Proper_nouns_only"] != "TRUE":
        raise ValueError("a Race_x_gender template without proper names needs its gender words in Names")
    gender = row["Stated_gender_info"]
    if gender not in ("", *GENDERS):
        raise ValueError(f"Stated_gender_info {gender!r} is not M or F")
    return SecondAttribute(target, {value: words[value] for value in values} if words else {}, gender)


def from_second_generator(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """Template rows of BBQ's second-generator format (category already spelled as the generator names it) in
    the first generator's columns: ``Known_stereotyped_groups`` the races, ``Names`` the rule's JSON cell,
    ``NAME1_info``/``NAME2_info`` empty. One :class:`InputError` naming the file and the row for a missing column,
    a category of the first generator in the file, or a bad rule."""
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise InputError(path, 1, f"missing column(s) {', '.join(missing)}")
    frame = frame.reindex(columns=[*frame.columns, *(c for c in OPTIONAL_COLUMNS if c not in frame)], fill_value="")
    cells = []
    for index, row in frame.iterrows():
        if row["Category"] not in SECOND_VALUES:
            problem = f"category {row['Category']!r} is not one of {', '.join(INTERSECTIONAL_CATEGORIES)}"
            raise InputError(path, spreadsheet_row(index), f"{problem}, the categories of a {RACE_COLUMN} file")
        try:
            cells.append(_rule(row, row["Category"]).cell())
        except ValueError as exc:
            raise InputError(path, spreadsheet_row(index), str(exc)) from None
    return frame.assign(Known_stereotyped_groups=frame[RACE_COLUMN], Names=cells, NAME1_info="", NAME2_info="")
