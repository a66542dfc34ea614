"""``pbbq audit``, ``trace``, ``diff`` and ``browse``: reading runs afterwards (docs/architecture.md §5).

pbbq audit RUN                      # the run in words; writes RUN/audit.html
pbbq trace EXAMPLE_ID --run RUN     # one example back to its stereotype, as JSON
pbbq diff [RUN_A RUN_B] [--margin M] # what changed (default: the last two completed runs)
pbbq browse RUN [--port 8001]       # the run's tables in Datasette (the browse extra)

Nothing here imports Prefect or the stages: these commands read a finished run folder.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .arguments import integer

AUDIT_COMMANDS = ("audit", "trace", "diff", "browse")
"""Commands that only read run folders (the CLI starts no Prefect logging for them)."""
OUTPUTS_HELP = "where runs are (default: $PBBQ_OUTPUTS or outputs/)"


def add_audit_commands(subparsers: Any) -> None:
    """Register the four commands on the ``pbbq`` parser's subparsers; each handler is ``args.handler``."""
    audit = subparsers.add_parser("audit", help="a run's funnel, stages and drops; writes <run>/audit.html")
    audit.add_argument("run", help="run id (under --outputs) or run folder")
    audit.set_defaults(handler=audit_command)
    trace = subparsers.add_parser("trace", help="one example back through its run, as JSON")
    trace.add_argument("example_id")
    trace.add_argument("--run", required=True, help="run id (under --outputs) or run folder")
    trace.set_defaults(handler=trace_command)
    diff = subparsers.add_parser("diff", help="what changed between two runs (default: the last two completed)")
    diff.add_argument(
        "runs", nargs="*", metavar="RUN", help="RUN_A RUN_B, or one run (against the previous run of its configuration)"
    )
    diff.add_argument(
        "--all",
        action="store_true",
        help="list every id and every changed field, whole (default: the first 20 ids "
        "of each list, 4 fields of each, values cut at 40 characters)",
    )
    diff.add_argument(
        "--margin",
        type=_margin,
        metavar="M",
        help="list decisions whose figure changed within M of their threshold (acceptance, kappa, relevance; "
        "default: 0.02)",
    )
    diff.add_argument("--markdown", action="store_true", help="print Markdown instead of text")
    diff.set_defaults(handler=diff_command)
    browse = subparsers.add_parser("browse", help="serve a run's tables with Datasette on 127.0.0.1")
    browse.add_argument("run", help="run id (under --outputs) or run folder")
    browse.add_argument("--port", type=integer(1, 65535), default=8001, help="port on 127.0.0.1 (default: 8001)")
    browse.set_defaults(handler=browse_command)
    for parser in (audit, trace, diff, browse):
        parser.add_argument("--outputs", type=Path, help=OUTPUTS_HELP)


def _margin(text: str) -> float:
    """``--margin``: a number at least 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number at least 0")
    return value


def _run(args: argparse.Namespace, name: str) -> Path:
    from ..audit.runs import outputs_folder, run_folder

    return run_folder(name, outputs_folder(str(args.outputs) if args.outputs else None))


def audit_command(args: argparse.Namespace) -> int:
    from ..audit.audit import audit_text
    from ..audit.report import write_audit_html

    run = _run(args, args.run)
    print(audit_text(run))
    print(f"report: {write_audit_html(run)}")
    return 0


def trace_command(args: argparse.Namespace) -> int:
    from ..audit.audit import trace

    print(json.dumps(trace(_run(args, args.run), args.example_id), ensure_ascii=False, indent=2))
    return 0


def diff_command(args: argparse.Namespace) -> int:
    from ..audit.diff import MARGIN, SHOWN, default_pair, diff_runs
    from ..audit.runs import AuditError, manifest, outputs_folder, previous_completed, run_kind

    if len(args.runs) > 2:
        raise AuditError(f"pbbq diff takes at most two runs, not {len(args.runs)}")
    if len(args.runs) == 2:
        a, b = (_run(args, name) for name in args.runs)
    elif len(args.runs) == 1:
        b = _run(args, args.runs[0])
        previous = previous_completed(b)
        if previous is None:
            raise AuditError(f"no completed run before {b.name} of its configuration in {b.parent}")
        a = previous
    else:
        a, b = default_pair(outputs_folder(str(args.outputs) if args.outputs else None))
    kinds = run_kind(manifest(a)), run_kind(manifest(b))
    if kinds[0] != kinds[1]:
        raise AuditError(
            f"run {a.name} is a {kinds[0]} and run {b.name} a {kinds[1]}: pbbq diff compares two runs of one kind"
        )
    found = diff_runs(a, b, margin=MARGIN if args.margin is None else args.margin)
    limit = None if args.all else SHOWN
    print(found.markdown(limit) if args.markdown else found.text(limit))
    return 0


def browse_command(args: argparse.Namespace) -> int:
    from ..audit.browse import serve

    serve(_run(args, args.run), port=args.port)
    return 0
