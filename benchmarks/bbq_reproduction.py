"""Reproduce BBQ first: the adaptation path with every template classed DT and no translation, against BBQ's
released examples (nyu-mll/BBQ, ``data/<Category>.jsonl``), one row per category.

Run from the repository root: ``python -m benchmarks.bbq_reproduction [--bbq CHECKOUT] [--bbq-data DIR]``,
``CHECKOUT`` a checkout of nyu-mll/BBQ (its ``data/`` holds the released ``<Category>.jsonl`` files, its
``templates/`` the ``new_templates - <Category>.csv`` files of Race_x_gender and Race_x_SES, which this repository
does not carry), ``DIR`` another folder of released files (the repository carries Nationality's in
``tests/data/bbq``). A category whose file is not there is built and its row gives BBQ's count of it (its paper's
Table 3) and, where BBQ's file is known to be out of reach, why (:data:`NOT_RELEASED`); for Race_x_gender and
Race_x_SES also the rows BBQ's sampling sizes give its templates (:func:`drawn_by_bbq`). BBQ draws the pairs of
groups, the lexical variant, the 'unknown' phrasing and the option order at random without a seed; the builder
enumerates the first two and rotates the others, so a row is compared on what BBQ's rules fix: the context, the
question, the two non-unknown answers (as a set) and which of them, or 'unknown', is correct. ``as written``
compares the texts as they are; ``trimmed`` with the whitespace around each answer taken off (the builder strips
every input cell, and some BBQ templates write an answer with a trailing space). ``why missed`` names the reason
of every released row not reproduced as written.

``--write-digests DIR`` writes, per category, the digests of its released rows' keys (as written and trimmed),
which the tests read in place of BBQ's multi-megabyte files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from pbbq.tasks.adapt.bbq_format import (
    BBQ_GENDER_WORDS,
    is_stereotyped,
    load_bbq_proper_names,
    load_bbq_templates,
    load_bbq_vocabulary,
    parse_groups,
)
from pbbq.tasks.adapt.generate import AdaptInstantiateParams, examples_of
from pbbq.tasks.adapt.intersectional import RACE_CATEGORY
from pbbq.tasks.adapt.intersectional_format import INTERSECTIONAL_CATEGORIES
from pbbq.tasks.adapt.sheet import apply_classes, review_sheet
from pbbq.tasks.core.artifacts import REPO_ROOT

BBQ = REPO_ROOT / "annotations" / "bbq"
VOCABULARY = BBQ / "vocabulary.csv"
PROPER_NAMES = BBQ / "vocabulary_proper_names.csv"
TEST_DATA = REPO_ROOT / "tests" / "data" / "bbq"
CATEGORIES = (
    "Nationality",
    "Age",
    "Disability_status",
    "Physical_appearance",
    "Religion",
    "Sexual_orientation",
    "SES",
    "Gender_identity",
    "Race_ethnicity",
    "Race_x_gender",
    "Race_x_SES",
)
PAPER_COUNTS = {
    "Age": 3680,
    "Disability_status": 1556,
    "Gender_identity": 5672,
    "Nationality": 3080,
    "Physical_appearance": 1576,
    "Race_ethnicity": 6880,
    "Religion": 1200,
    "Sexual_orientation": 864,
    "SES": 6864,
    "Race_x_gender": 15960,
    "Race_x_SES": 11160,
}
"""BBQ's examples per category (its paper, ``QA_bias_benchmark.pdf`` in nyu-mll/BBQ, Table 3; 58,492 in all)."""
NOT_RELEASED = {
    "SES": "BBQ's file is in neither mirror (nyu-mll/BBQ lists it, its blob absent)",
    "Gender_identity": (
        "BBQ's file is in neither mirror; a-annor/BBQ's data/Gender_identity.jsonl is that fork's 2025 rewrite "
        "(one person per context, fields template/name/word1/word2), not BBQ's release: not compared"
    ),
    "Race_ethnicity": (
        "BBQ's file is in neither mirror (a-annor/BBQ's is that fork's rewrite, absent too; "
        "ssrivastava22/ImplicitBBQ's is an implicit-cue rewrite in another format)"
    ),
    "Race_x_gender": "BBQ's file is in neither mirror (nyu-mll/BBQ lists data/Race_x_gender.jsonl, its blob absent)",
    "Race_x_SES": "BBQ's file is in neither mirror (nyu-mll/BBQ lists data/Race_x_SES.jsonl, its blob absent)",
}
"""Why a category's row compares with no released file: where BBQ's ``data/<Category>.jsonl`` was looked for."""
OPTIONS = ("ans0", "ans1", "ans2")
TRAILING_SPACE = "an answer ends in a space in BBQ's template; the builder strips every cell"
Key = tuple[str, str, frozenset[str], str]


def templates_of(category: str, bbq_templates: Path | None = None) -> Path:
    """A category's template file: the repository's copy, else BBQ's in ``bbq_templates`` (its ``templates/``)."""
    bundled = BBQ / f"templates-{category}.csv"
    if bundled.is_file() or bbq_templates is None:
        return bundled
    return bbq_templates / f"new_templates - {category}.csv"


def drawn_by_bbq(templates: pd.DataFrame, vocabulary: pd.DataFrame) -> int:
    """The rows BBQ's second generator writes for Race_x_gender or Race_x_SES templates (rows of
    :func:`load_bbq_templates`), from its sampling sizes: per proper-name template five first names, each with
    five of each kind of other name; else per stereotyped race in the vocabulary (five at most) five other races;
    each a, b and c in both orders, four examples each."""
    races = set(vocabulary.loc[vocabulary["Category"] == RACE_CATEGORY, "Name"])
    per_unit = 3 * 2 * 4
    return sum(
        5 * 5 * per_unit
        if template.Proper_nouns_only == "TRUE"
        else min(5, len(set(parse_groups(template.Known_stereotyped_groups)) & races)) * 5 * per_unit
        for template in templates.itertuples()
    )


def row_key(record: Mapping[str, Any], unknown: str, clean: Callable[[str], str]) -> Key:
    """What BBQ's rules fix of one example: context, question, the two named answers, the correct one."""
    named = frozenset(clean(record[option]) for option in OPTIONS if option != unknown)
    correct = OPTIONS[int(record["label"])]
    return record["context"], record["question"], named, "unknown" if correct == unknown else clean(record[correct])


def key_digest(key: Key) -> str:
    """A short digest of a key (what the committed digest files hold)."""
    context, question, named, correct = key
    return hashlib.sha256(json.dumps([context, question, sorted(named), correct]).encode()).hexdigest()[:12]


def built_examples(templates: Path, vocabulary: Path = VOCABULARY, proper_names: Path = PROPER_NAMES) -> pd.DataFrame:
    """The English examples of every template of ``templates`` classed DT, but those the generation drops
    (``reason``: Race_x_gender's and Race_x_SES's ``pronoun_gender_clash``)."""
    sheet = review_sheet(load_bbq_templates(templates)).assign(**{"class": "DT"})
    built, _ = apply_classes(sheet)
    names = load_bbq_proper_names(proper_names)
    examples = examples_of(built, load_bbq_vocabulary(vocabulary), names, AdaptInstantiateParams())
    return examples[examples["reason"] == ""].drop(columns="reason").reset_index(drop=True)


def _unknown_of_built(roles: Mapping[str, str]) -> str:
    return next(option for option, role in roles.items() if role == "unknown")


def _unknown_of_released(info: Mapping[str, list[str]]) -> str:
    return next(option for option, (_, tag) in info.items() if tag == "unknown")


def built_keys(built: pd.DataFrame, trimmed: bool) -> set[Key]:
    clean: Callable[[str], str] = str.strip if trimmed else str
    records = built[["context", "question", *OPTIONS, "label", "answer_roles"]].to_dict("records")
    return {row_key(record, _unknown_of_built(record["answer_roles"]), clean) for record in records}


def released_key(record: Mapping[str, Any], trimmed: bool) -> Key:
    return row_key(record, _unknown_of_released(record["answer_info"]), str.strip if trimmed else str)


def compare(built: pd.DataFrame, released: Iterable[Mapping[str, Any]], trimmed: bool) -> dict[str, Any]:
    """Released rows reproduced and missed (with the missed rows), and built rows BBQ did not draw."""
    ours = built_keys(built, trimmed)
    theirs = [(record, released_key(record, trimmed)) for record in released]
    missed = [record for record, key in theirs if key not in ours]
    return {
        "released": len(theirs),
        "reproduced": len(theirs) - len(missed),
        "missed": missed,
        "built": len(built),
        "built_not_drawn": len(ours - {key for _, key in theirs}),
    }


def compare_digests(built: pd.DataFrame, digests: list[str], trimmed: bool) -> int:
    """How many released rows, given by their key digests, the build reproduces."""
    ours = {key_digest(key) for key in built_keys(built, trimmed)}
    return sum(digest in ours for digest in digests)


def why_missed(record: Mapping[str, Any], trimmed_keys: set[Key]) -> str:
    """The reason a released row is not reproduced as written."""
    if released_key(record, trimmed=True) in trimmed_keys:
        return TRAILING_SPACE
    stereotyped = record["additional_metadata"]["stereotyped_groups"]
    groups = [BBQ_GENDER_WORDS.get(tag, tag) for _, tag in record["answer_info"].values() if tag != "unknown"]
    if sum(is_stereotyped(group, stereotyped) for group in groups) != 1:
        return "no contrast: neither or both answers in a stereotyped group, not built"
    return "not built"


def read_released(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_digests(path: Path) -> tuple[list[str], list[str]]:
    """A digest file's keys: as written, trimmed."""
    rows = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row[0] for row in rows], [row[1] for row in rows]


def write_digests(path: Path, released: list[dict[str, Any]]) -> None:
    lines = [f"{key_digest(released_key(r, False))} {key_digest(released_key(r, True))}\n" for r in released]
    path.write_text("".join(lines), encoding="utf-8")


def category_row(
    category: str, built: pd.DataFrame, released: list[dict[str, Any]] | None, drawn: int | None = None
) -> str:
    """One row of the table: released, reproduced as written and trimmed, built, built not drawn, why missed.
    Without the released file: BBQ's count (:data:`PAPER_COUNTS`), why the file is not here, and ``drawn``, the
    rows BBQ's sampling sizes give (:func:`drawn_by_bbq`) when known."""
    if released is None:
        why = NOT_RELEASED.get(category, "-")
        if drawn is not None:
            why += f"; BBQ's sampling sizes give its templates {drawn:,} rows"
        count = f"file not here; {PAPER_COUNTS[category]:,} in BBQ's paper"
        return f"| {category} | ({count}) | | | {len(built):,} | | {why} |"
    exact, trimmed = compare(built, released, False), compare(built, released, True)
    ours = built_keys(built, trimmed=True)
    reasons: dict[str, Counter[str]] = {}
    for record in exact["missed"]:
        version = record["additional_metadata"]["version"]
        template = f"{category}-{record['question_index']}{'' if version == 'None' else version}"
        reasons.setdefault(why_missed(record, ours), Counter())[template] += 1
    why = "; ".join(
        f"{sum(counts.values())} rows: {reason} ({', '.join(f'{t}: {n}' for t, n in sorted(counts.items()))})"
        for reason, counts in sorted(reasons.items())
    )
    return (
        f"| {category} | {exact['released']:,} | {exact['reproduced']:,} | {trimmed['reproduced']:,} | "
        f"{len(built):,} | {trimmed['built_not_drawn']:,} | {why or '-'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bbq", type=Path, help="a checkout of nyu-mll/BBQ (its data/ and templates/ folders)")
    parser.add_argument("--bbq-data", type=Path, default=TEST_DATA, help="folder of BBQ's <Category>.jsonl files")
    parser.add_argument("--categories", nargs="+", default=list(CATEGORIES), choices=CATEGORIES)
    parser.add_argument("--write-digests", type=Path, help="write released-<Category>.keys files here")
    args = parser.parse_args()
    print(
        "| category | released rows | reproduced as written | reproduced trimmed | rows built | "
        "distinct built rows BBQ did not draw | why missed (as written) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    folders = [args.bbq / "data", args.bbq_data] if args.bbq else [args.bbq_data]
    bbq_templates = args.bbq / "templates" if args.bbq else None
    for category in args.categories:
        path = next(
            (folder / f"{category}.jsonl" for folder in folders if (folder / f"{category}.jsonl").is_file()), None
        )
        released = read_released(path) if path is not None else None
        if released is not None and args.write_digests:
            write_digests(args.write_digests / f"released-{category}.keys", released)
        templates = templates_of(category, bbq_templates)
        if not templates.is_file():
            print(f"| {category} | | | | | | templates not here: --bbq a checkout of nyu-mll/BBQ |", flush=True)
            continue
        drawn = None
        if category in INTERSECTIONAL_CATEGORIES:
            drawn = drawn_by_bbq(load_bbq_templates(templates), load_bbq_vocabulary(VOCABULARY))
        print(category_row(category, built_examples(templates), released, drawn), flush=True)


if __name__ == "__main__":
    main()
