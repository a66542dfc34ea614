"""``pbbq adapt``: the review sheet for adapting BBQ's templates to a target culture (PakBBQ §3.1, after KoBBQ).

pbbq adapt --templates templates-Nationality.csv templates-Religion.csv --vocabulary vocabulary.csv [--out FILE]
           [--overwrite]

Writes one row per template of BBQ's template files (default ``adapt_sheet.csv``), spreadsheet-safe, its class
(DT / TM / NA / SR) and the experts' columns to fill (:mod:`pbbq.tasks.adapt.sheet`). An existing file is not
overwritten unless ``--overwrite`` says so, and a file given as an input (``--templates``, ``--vocabulary``) never
is; a template file given twice, or templates whose ids repeat (two files of one category), are refused.
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
    parser.add_argument("--overwrite", action="store_true", help="replace an existing file (never an input)")
    parser.set_defaults(handler=adapt_command)
    return parser


def adapt_command(args: argparse.Namespace) -> int:
    """Write the review sheet; a bad template row, a repeated template, or a file in the way (an input, or any
    existing file without ``--overwrite``) raises one clear error before anything is written."""
    import pandas as pd

    from ...tasks.adapt.bbq_format import fills_from_vocabulary, load_bbq_templates, load_bbq_vocabulary
    from ...tasks.adapt.sheet import review_sheet
    from ...tasks.core.artifacts import atomic_write_bytes
    from ...tasks.core.inputs import InputError

    out = args.out.resolve()
    seen: dict[Path, Path] = {}
    for path in (*args.templates, args.vocabulary):
        if path.resolve() == out:
            raise InputError(args.out, None, f"is an input of this command ({path}): choose another --out")
        if path.resolve() in seen:
            raise InputError(path, None, f"given twice (as {seen[path.resolve()]})")
        seen[path.resolve()] = path
    if args.out.exists() and not args.overwrite:
        raise InputError(args.out, None, "exists: --overwrite to replace it")
    vocabulary = load_bbq_vocabulary(args.vocabulary)
    loaded = [load_bbq_templates(path) for path in args.templates]
    templates = pd.concat(loaded, ignore_index=True)
    needing = templates[fills_from_vocabulary(templates)]  # Age, Disability, Physical appearance: names, not groups
    unknown = sorted(set(needing["Category"]) - set(vocabulary["Category"]))
    if unknown:
        raise InputError(args.vocabulary, None, f"no group of category {unknown[0]!r}, which the templates use")
    sheet = review_sheet(templates)
    repeated = sheet["template_id"].duplicated()
    if repeated.any():
        origin = [str(path) for path, frame in zip(args.templates, loaded, strict=True) for _ in range(len(frame))]
        twice = sheet.index[sheet["template_id"] == sheet.at[repeated.idxmax(), "template_id"]]
        again = f"template id {sheet.at[twice[1], 'template_id']!r} repeats one of {origin[twice[0]]}"
        raise InputError(Path(origin[twice[1]]), None, again)
    atomic_write_bytes(args.out, sheet.to_csv(index=False).encode("utf-8"))
    per_category = ", ".join(f"{c} {n}" for c, n in sheet["category"].value_counts(sort=False).items())
    print(f"{len(sheet)} templates ({per_category}) → {args.out}: fill class (DT, TM, NA, SR) and the target_ columns")
    return 0
