"""``pbbq names``: name-proxy variants of any BBQ-format JSONL file (Obscured but Not Erased §4.1, Appendix C).

pbbq names --input FILE.jsonl --names TABLE.csv --lang en --out DIR [--seed 42 --n-seeds 3] [--proxy-gate]

Writes ``DIR/<input stem>.names.jsonl`` (one BBQ record per variant, plus ``variant`` and ``source_example_id``;
BBQ's ``answer_info`` and ``additional_metadata`` as the source record has them, so lm-evaluation-harness's BBQ
code still finds the stereotyped answer by its label) and ``DIR/report.json`` (counts per sub-seed and per
category, every unmapped record with its reason). The names are drawn as the build's names stage draws them
(:mod:`pbbq.tasks.names.draw`): one era per pair, one gender where the entities share one, three different variants.
By default as the paper's protocol does (003 §4.1: all 3,080 Nationality records → 9,240 variants), without the
build's proxy-strength gate; ``--proxy-gate`` applies it (the build's ``[names] drop_weak_proxies``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .arguments import integer

LANGUAGES = ("en", "fa")
"""The languages with reference patterns (``pbbq.tasks.names.tables.LANGUAGES``, not imported: ``pbbq --help``
stays fast)."""


def add_names_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pbbq names`` on the ``pbbq`` parser's subparsers; its handler is ``args.handler``."""
    parser = subparsers.add_parser("names", help="name-proxy variants of a BBQ-format JSONL file")
    parser.add_argument("--input", type=Path, required=True, help="BBQ-format JSONL (e.g. BBQ's Nationality.jsonl)")
    parser.add_argument("--names", type=Path, required=True, help="name table CSV (annotations/names/)")
    parser.add_argument("--lang", choices=LANGUAGES, default="en", help="language of the records (default: en)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the variants and report.json")
    parser.add_argument("--seed", type=int, help="global seed of the sub-seeds (default: the [names] stage's)")
    parser.add_argument("--n-seeds", type=integer(1), help="sub-seeds, i.e. variants per record (default: the stage's)")
    parser.add_argument(
        "--proxy-gate",
        action="store_true",
        help="leave out records naming a group whose names do not tell it apart (the build's weak_proxy gate); "
        "default off: the name-proxy paper's protocol, every mappable record gets its variants",
    )
    parser.set_defaults(handler=names_command)
    return parser


def names_command(args: argparse.Namespace) -> int:
    """Run the name proxy over ``args.input``; 0 when the files are written, 1 with a message on a bad input."""
    from ...tasks.core.artifacts import atomic_write_bytes, write_json
    from ...tasks.core.inputs import InputError
    from ...tasks.names import NamesParams, load_name_table, names
    from ...tasks.names.bbq_records import bbq_examples, bbq_variants, read_bbq_jsonl, with_rejected

    try:
        records = read_bbq_jsonl(args.input)
        table = load_name_table(args.names)
    except InputError as exc:
        print(f"pbbq names: error: {exc}", file=sys.stderr)
        return 1
    examples, rejected = bbq_examples(records, args.lang)
    given = {"seed": args.seed, "n_seeds": args.n_seeds, "drop_weak_proxies": args.proxy_gate}
    params = NamesParams(**{name: value for name, value in given.items() if value is not None})
    output = names(examples, table, params)
    variants = bbq_variants(records, output["examples"])
    target = args.out / f"{args.input.stem}.names.jsonl"
    atomic_write_bytes(target, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in variants).encode("utf-8"))
    report = with_rejected(output.report, output["unmapped"], rejected, len(records))
    write_json(args.out / "report.json", {**report, "input": str(args.input), "names": str(args.names)})
    counts = report["counts"]
    print(
        f"{counts['in']} records → {counts['mapped']} mapped × {params.n_seeds} = {len(variants)} variants, "
        f"{report['not_covered']['total']} unmapped → {target}"
    )
    return 0
