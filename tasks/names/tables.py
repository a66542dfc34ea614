"""The name tables (``annotations/names/``): per language and group, first names with their gender and the birth
years they are common for (Obscured but Not Erased §4.1: 10 names per group, 5 female and 5 male).

Columns: ``lang`` (en | fa), ``group`` (the word by which an entity names the group: 'ترک' in 'مرد ترک'),
``aliases`` (other words for the same group, ``;``-separated, the same on every row of the group: ترک and آذری
are one group, Iranian Azerbaijanis), ``gender`` (female | male), ``era`` (the birth years the name is common
for: ``pre1970``, ``1970-1995``, ``post1995``, several ``;``-separated, or ``all``), ``name``,
``transliteration`` and ``note`` (free text; where the name's gender was checked against another list, the
decision, see ``tests/test_name_tables.py``). ``aliases`` and ``note`` may be left out.

**The validator** (:func:`validate_name_table`) raises one :class:`~pbbq.tasks.core.inputs.InputError` naming the file,
the row and the problem: an empty cell; a language, gender or era not allowed; aliases that differ within a group or
name another group; a name twice in one group; fewer than :data:`NAMES_PER_GENDER` names of a gender in a group;
fewer than :data:`NAMES_PER_ERA` names of a gender and era in a group (a pair's two names come from one era, and
an example's three variants must differ, so every era needs at least two names of each gender: two names of each
of two groups give four pairs, more than the three variants); a name given to two groups that can meet in one
example (the proxy could not tell them apart).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path

import pandas as pd

from ..core.inputs import (
    LIST_SEPARATOR,
    InputError,
    read_csv_checked,
    require_filled,
    require_none,
    spreadsheet_row,
)
from ..text.languages.fa import normalize_fa

REQUIRED_COLUMNS = ["lang", "group", "gender", "era", "name", "transliteration"]
OPTIONAL_COLUMNS = ["aliases", "note"]
NAME_COLUMNS = ["lang", "group", "aliases", "gender", "era", "name", "transliteration", "note"]
"""The columns of a loaded name table, in this order."""
GENDERS = ("female", "male")
LANGUAGES = ("en", "fa")
"""The languages with reference patterns."""
ERAS = ("pre1970", "1970-1995", "post1995")
"""Birth-year spans a name can be common for: before 1970, 1970–1995, after 1995."""
ALL_ERAS = "all"
"""Shorthand for a name common in every span."""
NAMES_PER_GENDER = 5
"""The paper's 10 names per group: 5 female and 5 male (§4.1)."""
NAMES_PER_ERA = 2
"""Names of each gender a group needs in each era, so that era-matched pairs can differ three times."""


def _items(cell: str) -> list[str]:
    return [item.strip() for item in cell.split(LIST_SEPARATOR) if item.strip()]


def parse_eras(cell: str) -> tuple[str, ...] | None:
    """The eras of an ``era`` cell in :data:`ERAS` order (``all`` is every era); None if the cell is not valid."""
    items = _items(cell)
    if items == [ALL_ERAS]:
        return ERAS
    if not items or len(set(items)) != len(items) or not set(items) <= set(ERAS):
        return None
    return tuple(era for era in ERAS if era in items)


def table_eras(table: pd.DataFrame) -> pd.Series:
    """The eras of every row of a loaded table, as tuples."""
    return table["era"].map(lambda cell: tuple(cell.split(LIST_SEPARATOR)))


def _check_eras(table: pd.DataFrame, path: Path) -> None:
    require_none(
        path,
        table["era"].map(parse_eras).isna(),
        lambda i: f"era {table.at[i, 'era']!r} is not one or more of {', '.join(ERAS)} (';'-separated) or {ALL_ERAS}",
    )


def _check_aliases(table: pd.DataFrame, path: Path) -> None:
    """Aliases are one value per group, and every word (group or alias) names one group of its language."""
    for (_, group), rows in table.groupby(["lang", "group"], sort=False):
        first = rows.index[0]
        differs = rows["aliases"] != rows.at[first, "aliases"]
        require_none(
            path,
            differs.reindex(table.index, fill_value=False),
            lambda i, group=group, first=first: (
                f"aliases {table.at[i, 'aliases']!r} of group {group!r} differ from its row "
                f"{spreadsheet_row(first)} ({table.at[first, 'aliases']!r}): a group has one set of aliases"
            ),
        )
    for lang, rows in table.groupby("lang", sort=False):
        firsts = rows.drop_duplicates("group")
        owner = {row.group: (row.group, index) for index, row in firsts.iterrows()}
        for index, row in firsts.iterrows():
            for alias in _items(row.aliases):
                if alias in owner:
                    other, where = owner[alias]
                    raise InputError(
                        path,
                        spreadsheet_row(index),
                        f"alias {alias!r} of group {row.group!r} ({lang}) already names group {other!r} "
                        f"(row {spreadsheet_row(where)})",
                    )
                owner[alias] = (row.group, index)


def _check_counts(table: pd.DataFrame, path: Path) -> None:
    """At least :data:`NAMES_PER_GENDER` names per gender and :data:`NAMES_PER_ERA` per gender and era."""
    eras = table_eras(table)
    for (lang, group), rows in table.groupby(["lang", "group"], sort=True):
        counts = rows["gender"].value_counts()
        for gender in GENDERS:
            if counts.get(gender, 0) < NAMES_PER_GENDER:
                raise InputError(
                    path,
                    spreadsheet_row(rows.index[0]),
                    f"group {group!r} ({lang}) has {counts.get(gender, 0)} {gender} names; "
                    f"at least {NAMES_PER_GENDER} are needed",
                )
        for gender in GENDERS:
            of_gender = eras[rows.index[rows["gender"] == gender]]
            for era in ERAS:
                n = sum(era in row_eras for row_eras in of_gender)
                if n < NAMES_PER_ERA:
                    raise InputError(
                        path,
                        spreadsheet_row(rows.index[0]),
                        f"group {group!r} ({lang}) has {n} {gender} name(s) of era {era}; at least {NAMES_PER_ERA} "
                        "are needed, as a pair's names come from one era and an example's variants differ",
                    )


def _check_shared(table: pd.DataFrame, path: Path, facing: Iterable[tuple[str, str, str]] | None) -> None:
    meets = None if facing is None else {frozenset((a, b)): where for a, b, where in facing}
    for (lang, name), rows in table.groupby(["lang", "name"], sort=True):
        owners = list(dict.fromkeys(rows["group"]))
        for i, a in enumerate(owners):
            for b in owners[i + 1 :]:
                where = "" if meets is None else meets.get(frozenset((a, b)))
                if where is None:
                    continue
                second = rows.index[rows["group"] == b][0]
                context = f" in template {where}" if where else ""
                raise InputError(
                    path,
                    spreadsheet_row(second),
                    f"name {name!r} ({lang}) is given to group {a!r} (row {spreadsheet_row(rows.index[0])}) and to "
                    f"group {b!r}, which meet in one example{context}: the proxy could not tell them apart",
                )


def validate_name_table(
    table: pd.DataFrame, path: Path, facing: Iterable[tuple[str, str, str]] | None = None
) -> pd.DataFrame:
    """Check a name table (module docstring); raise :class:`InputError` naming the file, the row and the problem.

    ``facing`` lists the pairs of groups that can meet in one example, as (group, group, where); ``None`` means
    any two groups of one language."""
    require_filled(table, REQUIRED_COLUMNS, path)
    for column, allowed in (("lang", LANGUAGES), ("gender", GENDERS)):
        require_none(
            path,
            ~table[column].isin(allowed),
            lambda i, column=column, allowed=allowed: (
                f"{column} {table.at[i, column]!r} is not one of {', '.join(allowed)}"
            ),
        )
    _check_eras(table, path)
    _check_aliases(table, path)
    repeated = table.duplicated(["lang", "group", "name"])
    if repeated.any():
        index = repeated.idxmax()
        row = table.loc[index]
        same = (table["lang"] == row.lang) & (table["group"] == row.group) & (table["name"] == row["name"])
        raise InputError(
            path,
            spreadsheet_row(index),
            f"name {row['name']!r} appears twice in group {row.group!r} "
            f"(first in row {spreadsheet_row(table.index[same][0])})",
        )
    canonical = table.assign(era=table["era"].map(lambda cell: LIST_SEPARATOR.join(parse_eras(cell) or ())))
    _check_counts(canonical, path)
    _check_shared(canonical, path, facing)
    return canonical


@cache
def _group_regex(words: tuple[str, ...]) -> re.Pattern[str]:
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![\w\u200c-])(?:{alternation})(?![\w\u200c-])")


def group_words(table: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Per language, every word that names a group (the group itself and its aliases) → the group."""
    words: dict[str, dict[str, str]] = {}
    for row in table.drop_duplicates(["lang", "group"]).itertuples():
        for word in [row.group, *_items(row.aliases)]:
            words.setdefault(row.lang, {})[word] = row.group
    return words


def entity_mentions(entity: str, words: Mapping[str, str]) -> dict[str, str]:
    """The groups ``entity`` names as a whole word, each with the first word that names it ('مرد ترک' →
    {'آذری': 'ترک'} when ترک is an alias of آذری)."""
    found: dict[str, str] = {}
    for word in _group_regex(tuple(words)).findall(entity):
        found.setdefault(words[word], word)
    return dict(sorted(found.items()))


def entity_groups(entity: str, words: Mapping[str, str] | Sequence[str]) -> list[str]:
    """The groups that ``entity`` names ('مرد ترک' → ['آذری'] when ترک is an alias of آذری); ``words`` maps each
    word to its group, or is a list of groups without aliases."""
    mapping = words if isinstance(words, Mapping) else {w: w for w in words}
    return list(entity_mentions(entity, mapping))


def facing_groups(templates: pd.DataFrame, table: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(group, group, template_id) for every two groups that meet in an example of a Persian template: one among
    its stereotyped entities, the other among its non-stereotyped ones."""
    words = group_words(table).get("fa", {})
    pairs = []
    for template in templates.itertuples():
        stereo = {g for e in template.stereo_entities for g in entity_groups(e, words)}
        other = {g for e in template.nonstereo_entities for g in entity_groups(e, words)}
        pairs += [(a, b, template.template_id) for a in sorted(stereo) for b in sorted(other) if a != b]
    return pairs


def load_name_table(path: Path, templates: pd.DataFrame | None = None) -> pd.DataFrame:
    """A name table (:data:`NAME_COLUMNS`; other columns ignored), Persian normalised, eras and aliases in one
    canonical spelling (``all`` becomes the three eras), validated. With ``templates`` (Persian), a name may be
    shared only by groups that never meet in one example; without, by no two groups of one language."""
    table = read_csv_checked(path, REQUIRED_COLUMNS)
    for column in OPTIONAL_COLUMNS:
        if column not in table.columns:
            table[column] = ""
    table = table[NAME_COLUMNS].copy()
    persian = table["lang"] == "fa"
    for column in ("group", "name"):
        table.loc[persian, column] = table.loc[persian, column].map(normalize_fa)
    table.loc[persian, "aliases"] = table.loc[persian, "aliases"].map(
        lambda cell: LIST_SEPARATOR.join(normalize_fa(item) for item in _items(cell))
    )
    table.loc[~persian, "aliases"] = table.loc[~persian, "aliases"].map(lambda cell: LIST_SEPARATOR.join(_items(cell)))
    facing = None if templates is None else facing_groups(templates, table)
    return validate_name_table(table, path, facing).reset_index(drop=True)
