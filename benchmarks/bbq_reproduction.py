"""Reproduce BBQ first: the adaptation path with every template classed DT and no translation, against BBQ's
released examples (nyu-mll/BBQ, ``data/<Category>.jsonl``), one row per category.

Run from the repository root: ``python -m benchmarks.bbq_reproduction [--bbq-data DIR]``, ``DIR`` holding BBQ's
released ``<Category>.jsonl`` files (the repository carries Nationality's in ``tests/data/bbq``; a category whose
file is not in ``DIR`` is built and its row says so, and where BBQ's file is known to be out of reach, why:
:data:`NOT_RELEASED`). BBQ draws the pairs of groups, the lexical variant, the
'unknown' phrasing and the option order at random without a seed; the builder enumerates the first two and rotates
the others, so a row is compared on what BBQ's rules fix: the context, the question, the two non-unknown answers
(as a set) and which of them, or 'unknown', is correct. ``as written`` compares the texts as they are; ``trimmed``
with the whitespace around each answer taken off (the builder strips every input cell, and some BBQ templates write
an answer with a trailing space). ``why missed`` names the reason of every released row not reproduced as written.

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
)
from pbbq.tasks.adapt.generate import AdaptInstantiateParams, examples_of
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
)
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
}
"""Why a category's row compares with no released file: where BBQ's ``data/<Category>.jsonl`` was looked for."""
OPTIONS = ("ans0", "ans1", "ans2")
TRAILING_SPACE = "an answer ends in a space in BBQ's template; the builder strips every cell"
Key = tuple[str, str, frozenset[str], str]


def templates_of(category: str) -> Path:
    return BBQ / f"templates-{category}.csv"


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
    """The English examples of every template of ``templates`` classed DT."""
    sheet = review_sheet(load_bbq_templates(templates)).assign(**{"class": "DT"})
    built, _ = apply_classes(sheet)
    names = load_bbq_proper_names(proper_names)
    return examples_of(built, load_bbq_vocabulary(vocabulary), names, AdaptInstantiateParams())


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


def category_row(category: str, built: pd.DataFrame, released: list[dict[str, Any]] | None) -> str:
    """One row of the table: released, reproduced as written and trimmed, built, built not drawn, why missed."""
    if released is None:
        return f"| {category} | (released file not here) | | | {len(built):,} | | {NOT_RELEASED.get(category, '-')} |"
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
    parser.add_argument("--bbq-data", type=Path, default=TEST_DATA, help="folder of BBQ's <Category>.jsonl files")
    parser.add_argument("--categories", nargs="+", default=list(CATEGORIES), choices=CATEGORIES)
    parser.add_argument("--write-digests", type=Path, help="write released-<Category>.keys files here")
    args = parser.parse_args()
    print(
        "| category | released rows | reproduced as written | reproduced trimmed | rows built | "
        "distinct built rows BBQ did not draw | why missed (as written) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for category in args.categories:
        path = args.bbq_data / f"{category}.jsonl"
        released = read_released(path) if path.is_file() else None
        if released is not None and args.write_digests:
            write_digests(args.write_digests / f"released-{category}.keys", released)
        print(category_row(category, built_examples(templates_of(category)), released), flush=True)


if __name__ == "__main__":
    main()
