"""Print the distinct English segments that translating the adaptation sample's examples asks for, one
``kind<TAB>text`` line each (kinds: ``tests/fakes/stand_in_adapt.py`` :func:`distinct_segments`), so that
``phrases.ur.csv`` and ``translations.ur.csv`` can be checked against them.

Run from anywhere: ``.venv/bin/python prompts/transcripts/stand_ins/adapt/list_segments.py [--all] [--kind KIND]``;
``--all`` lists the examples of every template the sheet builds, not only those through the annotation gate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from tests.fakes.stand_in_adapt import distinct_segments, sample_examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every template the sheet builds, not only the gated")
    parser.add_argument("--kind", help="only segments of this kind (entity, group, lex, unknown, question, context)")
    args = parser.parse_args()
    examples = sample_examples(gated=not args.all)
    segments = distinct_segments(examples)
    if args.kind:
        segments = segments[segments["kind"] == args.kind]
    print(f"# {len(examples)} examples, {len(segments)} distinct segments", file=sys.stderr)
    for kind, text in zip(segments["kind"], segments["en"], strict=True):
        print(f"{kind}\t{text}")


if __name__ == "__main__":
    main()
