"""Reproduce BBQ first: the adaptation path with every template classed DT and no translation, against BBQ's
released Nationality examples (nyu-mll/BBQ, ``data/Nationality.jsonl``, 3,080 rows).

Run from the repository root: ``python -m benchmarks.bbq_reproduction``. BBQ draws the pairs of groups, the
lexical variant, the 'unknown' phrasing and the option order at random without a seed; the builder enumerates
the first two and rotates the others, so a row is compared on what BBQ's rules fix: the context, the question,
the two non-unknown answers (as a set) and which of them, or 'unknown', is correct. ``exact`` compares the texts as
they are; ``trimmed`` with the whitespace around each answer taken off (the builder strips every input cell, and
one BBQ template, Nationality 7, writes ``the {{NAME2}} friend `` with a trailing space).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from pbbq.tasks.adapt.bbq_format import load_bbq_templates, load_bbq_vocabulary
from pbbq.tasks.adapt.generate import AdaptInstantiateParams, examples_of
from pbbq.tasks.adapt.sheet import apply_classes, review_sheet
from pbbq.tasks.core.artifacts import REPO_ROOT

TEMPLATES = REPO_ROOT / "annotations" / "bbq" / "templates-Nationality.csv"
VOCABULARY = REPO_ROOT / "annotations" / "bbq" / "vocabulary.csv"
RELEASED = REPO_ROOT / "tests" / "data" / "bbq" / "Nationality.jsonl"
OPTIONS = ("ans0", "ans1", "ans2")
Key = tuple[str, str, frozenset[str], str]


def row_key(record: Mapping[str, Any], unknown: str, clean: Callable[[str], str]) -> Key:
    """What BBQ's rules fix of one example: context, question, the two named answers, the correct one."""
    named = frozenset(clean(record[option]) for option in OPTIONS if option != unknown)
    correct = OPTIONS[int(record["label"])]
    return record["context"], record["question"], named, "unknown" if correct == unknown else clean(record[correct])


def built_examples(templates: Path = TEMPLATES, vocabulary: Path = VOCABULARY) -> pd.DataFrame:
    """The English examples of every template of ``templates`` classed DT."""
    sheet = review_sheet(load_bbq_templates(templates)).assign(**{"class": "DT"})
    built, _ = apply_classes(sheet)
    return examples_of(built, load_bbq_vocabulary(vocabulary), AdaptInstantiateParams())


def _unknown_of_built(roles: Mapping[str, str]) -> str:
    return next(option for option, role in roles.items() if role == "unknown")


def _unknown_of_released(info: Mapping[str, list[str]]) -> str:
    return next(option for option, (_, tag) in info.items() if tag == "unknown")


def compare(built: pd.DataFrame, released: Iterable[Mapping[str, Any]], trimmed: bool) -> dict[str, Any]:
    """Released rows reproduced and missed (with the missed rows), and built rows BBQ did not draw."""
    clean: Callable[[str], str] = str.strip if trimmed else str
    ours = {
        row_key(record, _unknown_of_built(record["answer_roles"]), clean)
        for record in built[["context", "question", *OPTIONS, "label", "answer_roles"]].to_dict("records")
    }
    theirs = [(record, row_key(record, _unknown_of_released(record["answer_info"]), clean)) for record in released]
    missed = [record for record, key in theirs if key not in ours]
    return {
        "released": len(theirs),
        "reproduced": len(theirs) - len(missed),
        "missed": missed,
        "built": len(built),
        "built_not_drawn": len(ours - {key for _, key in theirs}),
    }


def read_released(path: Path = RELEASED) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--templates", type=Path, default=TEMPLATES)
    parser.add_argument("--vocabulary", type=Path, default=VOCABULARY)
    parser.add_argument("--released", type=Path, default=RELEASED)
    args = parser.parse_args()
    built, released = built_examples(args.templates, args.vocabulary), read_released(args.released)
    print("| comparison | released rows | reproduced | missed | rows built | distinct built rows BBQ did not draw |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    results = {name: compare(built, released, trimmed) for name, trimmed in (("exact", False), ("trimmed", True))}
    for name, result in results.items():
        print(
            f"| {name} | {result['released']:,} | {result['reproduced']:,} | {len(result['missed']):,} | "
            f"{result['built']:,} | {result['built_not_drawn']:,} |"
        )
    for name, result in results.items():
        per_template = pd.Series([record["question_index"] for record in result["missed"]]).value_counts()
        for q_id, count in per_template.items():
            example = next(r for r in result["missed"] if r["question_index"] == q_id)
            answers = " / ".join(repr(example[option]) for option in OPTIONS)
            print(f"{name}: missed {count} rows of template Nationality-{q_id}, e.g. options {answers}")


if __name__ == "__main__":
    main()
