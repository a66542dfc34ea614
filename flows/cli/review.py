"""``pbbq review``: review rounds (docs/review.md).

pbbq review export RUN --items contexts,translations:en,names,adapt [--sample N --seed S]
                   [--reviewers a,b,c --overlap 2] --out DIR
pbbq review import DIR [--sheets FILE ...] [--label-studio URL --project ID] [--out DECISIONS.csv]
                   [--min-alpha 0.667]
pbbq review label-studio DIR --url URL [--title TITLE]      # a Label Studio project for the round

``export`` makes a round from a run's tables: its items (what is judged, the hash of what is judged and what a
reviewer needs), each assigned to ``--overlap`` reviewers, and one spreadsheet-safe sheet per reviewer.
``import`` reads the answered sheets (or the round's Label Studio project) into the decisions table a build names in
``[review] decisions``, and prints the agreement per question; a round under ``--min-alpha`` is reported so.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .arguments import integer

TOKEN_ENV = "LABEL_STUDIO_API_KEY"
"""The environment variable holding the Label Studio token (never an argument: it would show in the process list)."""


def add_review_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pbbq review`` and its subcommands; the handler is ``args.handler``."""
    parser = subparsers.add_parser("review", help="review rounds: export items to judge, import the decisions")
    commands = parser.add_subparsers(dest="review_command", required=True)
    export = commands.add_parser("export", help="make a review round from a run")
    export.add_argument("run", help="a run id (under --outputs) or folder")
    export.add_argument("--outputs", help="where runs are (default: $PBBQ_OUTPUTS or outputs/)")
    export.add_argument(
        "--items",
        required=True,
        action="append",
        help="what to judge, comma-separated or the flag repeated: contexts, translations:<lang>, names, adapt",
    )
    export.add_argument(
        "--sample", type=integer(1), help="a seeded sample of N items of each kind, stratified (default: all)"
    )
    export.add_argument("--seed", type=int, default=0, help="seed of the sample and the assignment (default 0)")
    export.add_argument("--reviewers", default="reviewer-1,reviewer-2", help="reviewer names, comma-separated")
    export.add_argument("--overlap", type=integer(2), default=2, help="reviewers per item (default 2)")
    export.add_argument("--out", type=Path, required=True, help="the round's folder")
    export.set_defaults(handler=export_command)
    imported = commands.add_parser("import", help="read a round's answers into its decisions table")
    imported.add_argument("round", type=Path, help="the round's folder (pbbq review export --out)")
    imported.add_argument("--sheets", type=Path, nargs="*", default=None, help="answered sheets (default: DIR/sheets)")
    imported.add_argument("--label-studio", metavar="URL", help="pull the annotations of the round's project")
    imported.add_argument("--out", type=Path, help="the decisions file (default: DIR/decisions.csv)")
    imported.add_argument("--min-alpha", type=float, default=0.667, help="the agreement a round must reach")
    imported.set_defaults(handler=import_command)
    studio = commands.add_parser("label-studio", help="create the round's Label Studio project and import its tasks")
    studio.add_argument("round", type=Path, help="the round's folder")
    studio.add_argument("--url", required=True, help=f"Label Studio's address; the token is ${TOKEN_ENV}")
    studio.add_argument("--title", help="the project's title (default: the round's id)")
    studio.set_defaults(handler=label_studio_command)
    return parser


EXAMPLE_COLUMNS = ["category", "stereotype_id", "additional_metadata", "context", "question"]
EXAMPLE_COLUMNS += ["stereo_entity", "nonstereo_entity", "lexical_variant", "context_condition", "assignment"]
"""What a translation item needs of the source examples: its category, stereotype, sentence and condition."""


def _run_items(run: Path, kinds: list[str]) -> Any:
    """The items of ``kinds`` from a run's tables."""
    import pandas as pd

    from ...tasks.core.artifacts import REPO_ROOT
    from ...tasks.names import load_name_table
    from ...tasks.review.items import (
        KINDS,
        adapt_items,
        base_kind,
        context_items,
        kind_lang,
        name_items,
        translation_items,
    )
    from ..audit.runs import AuditError, manifest, read_table

    frames = []
    for kind in kinds:
        base = base_kind(kind)
        if base not in KINDS or (base == "translations") != bool(kind_lang(kind)):
            raise AuditError(f"--items {kind}: use contexts, translations:<lang>, names or adapt")
        if base == "contexts":
            templates = read_table(run, "disambiguate/templates")
            if templates.empty:
                raise AuditError(f"run {run.name} has no disambiguated contexts (an adaptation run: --items adapt)")
            frames.append(context_items(templates, read_table(run, "survey_filter/stereotypes")))
        elif base == "translations":
            lang = kind_lang(kind)
            segments = next(
                (
                    table
                    for name in (f"translate_{lang}/segments", "translate/segments")
                    if f"text_{lang}" in (table := read_table(run, name)).columns
                ),
                None,
            )
            if segments is None:
                raise AuditError(f"run {run.name} has no translation into {lang!r}")
            source = next(c.removeprefix("text_") for c in segments.columns if c.startswith("text_"))
            examples = read_table(run, "instantiate/examples", EXAMPLE_COLUMNS)
            stereotypes = read_table(run, "survey_filter/stereotypes")
            frames.append(translation_items(segments, lang, source, examples, stereotypes))
        elif base == "names":
            listed = manifest(run).get("inputs", {}).get("names")
            if not listed:
                raise AuditError(f"run {run.name} used no name table")
            path = Path(listed["path"]) if Path(listed["path"]).is_absolute() else REPO_ROOT / listed["path"]
            frames.append(name_items(load_name_table(path), read_table(run, "names/proxy_strength")))
        else:
            templates = read_table(run, "adapt/templates")
            if templates.empty:
                raise AuditError(f"run {run.name} has no adapted templates (not an adaptation run)")
            frames.append(adapt_items(templates))
    return pd.concat(frames, ignore_index=True)


def export_command(args: argparse.Namespace) -> int:
    from ...tasks.review.rounds import assign, stratified_sample
    from ...tasks.review.sheets import write_round
    from ..audit.runs import outputs_folder, run_folder

    run = run_folder(args.run, outputs_folder(args.outputs))
    kinds = list(dict.fromkeys(k.strip() for items in args.items for k in items.split(",") if k.strip()))
    items = stratified_sample(_run_items(run, kinds), args.sample, args.seed)
    if items.empty:
        raise ValueError(f"run {run.name} has no items of {', '.join(kinds)} to review")
    reviewers = [r.strip() for r in args.reviewers.split(",")]
    assignment = assign(items, reviewers, args.overlap, args.seed)
    meta = {
        "round_id": str(assignment["round_id"].iloc[0]),
        "run": run.name,
        "items": kinds,
        "sample": args.sample,
        "seed": args.seed,
        "reviewers": reviewers,
        "overlap": args.overlap,
        "n_items": len(items),
    }
    write_round(args.out, items, assignment, meta, kinds)
    print(
        f"round {meta['round_id']}: {len(items)} items × {args.overlap} reviewers of {len(reviewers)} → {args.out} "
        f"(sheets/ per reviewer; HOW_TO_REVIEW.md)"
    )
    return 0


def _summary(table: Any, min_alpha: float) -> list[str]:
    from ...tasks.review.agreement import below

    lines = []
    for row in table.itertuples(index=False):
        alpha = "n/a" if row.alpha is None or row.alpha != row.alpha else f"{row.alpha:.3f}"
        lines.append(
            f"  {row.kind} {row.question}: alpha {alpha} over {row.n_items} items, {row.n_reviewers} reviewers"
            + (f" ({row.note})" if row.note else "")
        )
    low = below(table, min_alpha)
    if len(low):
        lines.append(
            f"  BELOW the agreement asked (alpha {min_alpha}): "
            + ", ".join(f"{r.kind} {r.question}" for r in low.itertuples())
            + " — adjudicate or review again before a build uses these"
        )
    return lines


def import_command(args: argparse.Namespace) -> int:
    import pandas as pd

    from ...tasks.review.agreement import agreement
    from ...tasks.review.decisions import adjudicate, empty_decisions
    from ...tasks.review.sheets import people_csv, read_round, sheet_decisions, write_decisions

    meta, _, assignment = read_round(args.round, with_items=False)
    parts = []
    if args.label_studio:
        from ...tasks.review.label_studio import pull_decisions

        parts.append(pull_decisions(args.label_studio, _token(), meta, assignment))
    if args.sheets is not None or not args.label_studio:
        sheets = args.sheets if args.sheets is not None else sorted((args.round / "sheets").glob("*.csv"))
        parts += [sheet_decisions(path, assignment) for path in sheets]
    decisions = pd.concat(parts, ignore_index=True) if parts else empty_decisions()
    out = args.out or args.round / "decisions.csv"
    write_decisions(out, decisions)
    table = agreement(decisions)
    (args.round / "agreement.csv").write_bytes(people_csv(table))
    decided = adjudicate(decisions)
    counts = decided["verdict"].value_counts().to_dict() if len(decided) else {}
    print(
        f"round {meta['round_id']}: {len(decisions)} decisions on {len(decided)} items "
        f"({', '.join(f'{v} {n}' for v, n in sorted(counts.items())) or 'none'}) → {out}"
    )
    print("\n".join(_summary(table, args.min_alpha)))
    return 0


def _token() -> str:
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        raise ValueError(f"set {TOKEN_ENV} to your Label Studio access token (Account & Settings)")
    return token


def label_studio_command(args: argparse.Namespace) -> int:
    from ...tasks.review.label_studio import create_project
    from ...tasks.review.sheets import read_round

    meta, items, assignment = read_round(args.round)
    projects = create_project(args.url.rstrip("/"), _token(), meta, items, assignment, args.title)
    print(f"round {meta['round_id']}: Label Studio projects {projects}")
    return 0
