"""``pbbq adapt``: the review sheet for adapting BBQ's templates to a target culture (PakBBQ §3.1, after KoBBQ).

pbbq adapt --templates templates-Nationality.csv templates-Religion.csv --vocabulary vocabulary.csv [--out FILE]
           [--overwrite]

Writes one row per template of BBQ's template files (default ``adapt_sheet.csv``), spreadsheet-safe, its class
(DT / TM / NA / SR) and the experts' columns to fill (:mod:`pbbq.tasks.adapt.sheet`). A sheet that already holds
a class or an edit is not overwritten unless ``--overwrite`` says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_adapt_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pbbq adapt`` on the ``pbbq`` parser's subparsers; its handler is ``args.handler``."""
    parser = subparsers.add_parser("adapt", help="a review sheet to class BBQ's templates DT / TM / NA / SR")
    parser.add_argument(
        "--templates", type=Path, nargs="+", required=True, help="BBQ template files (templates-<Category>.csv)"
    )
    parser.add_argument("--vocabulary", type=Path, required=True, help="BBQ's vocabulary.csv")
    parser.add_argument("--out", type=Path, default=Path("adapt_sheet.csv"), help="the sheet (default: %(default)s)")
    parser.add_argument("--overwrite", action="store_true", help="replace a sheet that has been reviewed already")
    parser.set_defaults(handler=adapt_command)
    return parser


def adapt_command(args: argparse.Namespace) -> int:
    """Write the review sheet; a bad template row or a reviewed sheet in the way raises one clear error."""
    import pandas as pd

    from ...tasks.adapt.bbq_format import fills_from_vocabulary, load_bbq_templates, load_bbq_vocabulary
    from ...tasks.adapt.sheet import is_reviewed, review_sheet
    from ...tasks.core.artifacts import atomic_write_bytes
    from ...tasks.core.inputs import InputError, read_csv_checked

    vocabulary = load_bbq_vocabulary(args.vocabulary)
    templates = pd.concat([load_bbq_templates(path) for path in args.templates], ignore_index=True)
    needing = templates[fills_from_vocabulary(templates)]  # Age, Disability, Physical appearance: names, not groups
    unknown = sorted(set(needing["Category"]) - set(vocabulary["Category"]))
    if unknown:
        raise InputError(args.vocabulary, None, f"no group of category {unknown[0]!r}, which the templates use")
    if args.out.is_file() and not args.overwrite:
        existing = read_csv_checked(args.out, [], allow_empty=True)
        if is_reviewed(existing):
            raise InputError(args.out, None, "already reviewed (a class or an edit is filled): --overwrite to replace")
    sheet = review_sheet(templates)
    atomic_write_bytes(args.out, sheet.to_csv(index=False).encode("utf-8"))
    per_category = ", ".join(f"{c} {n}" for c, n in sheet["category"].value_counts(sort=False).items())
    print(f"{len(sheet)} templates ({per_category}) → {args.out}: fill class (DT, TM, NA, SR) and the target_ columns")
    return 0
