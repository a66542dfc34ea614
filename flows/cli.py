"""The ``pbbq`` command.

pbbq build --sample | --config FILE [--run-id ID] [--outputs DIR]
pbbq serve            # serve the build-pbbq deployment (prefect.yaml) for `prefect deployment run`
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from flows.names_cli import add_names_command
from tasks.artifacts import REPO_ROOT


def _prefect_defaults() -> None:
    """Settings Prefect needs here, unless the user set them: a home in the repository (as prefect.toml says,
    whatever the working folder), no telemetry, and time for a temporary server to start."""
    os.environ.setdefault("PREFECT_HOME", str(REPO_ROOT / ".prefect"))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pbbq", description="Build PBBQ, the Persian bias benchmark for QA.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a run and print its folder")
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--sample", action="store_true", help="the bundled sample (offline)")
    source.add_argument("--config", type=Path, help="a build configuration (TOML)")
    build.add_argument("--run-id", help="name of the run folder (default: time + random suffix)")
    build.add_argument("--outputs", type=Path, help="where runs go (default: $PBBQ_OUTPUTS or outputs/)")
    build.add_argument("--repo-id", help="Hub dataset repository to publish to (overrides [publish] repo_id)")
    build.add_argument(
        "--upload", action="store_true", help="upload the release (default: a dry run that writes the folder only)"
    )
    commands.add_parser("serve", help="serve the build-pbbq deployment with its weekly schedule")
    audit = commands.add_parser("audit", help="a run's funnel, stages and drops; writes <run>/audit.html")
    audit.add_argument("run", help="run id (under --outputs) or run folder")
    audit.add_argument("--outputs", type=Path, help="where runs are (default: $PBBQ_OUTPUTS or outputs/)")
    trace = commands.add_parser("trace", help="one example back through its run, as JSON")
    trace.add_argument("example_id")
    trace.add_argument("--run", required=True, help="run id (under --outputs) or run folder")
    trace.add_argument("--outputs", type=Path, help="where runs are (default: $PBBQ_OUTPUTS or outputs/)")
    add_names_command(commands)
    return parser


def _build(args: argparse.Namespace) -> int:
    from flows.build_pbbq import build_pbbq

    folder = build_pbbq(
        config=str(args.config) if args.config else None,
        run_id=args.run_id,
        outputs=str(args.outputs) if args.outputs else None,
        repo_id=args.repo_id,
        dry_run=False if args.upload else None,
    )
    print(folder)
    return 0


def _audit(args: argparse.Namespace) -> int:
    from flows.audit import audit_text, run_folder, trace, write_audit_html
    from flows.build_pbbq import outputs_folder

    outputs = outputs_folder(str(args.outputs) if args.outputs else None)
    if args.command == "audit":
        run = run_folder(args.run, outputs)
        print(audit_text(run))
        print(f"report: {write_audit_html(run)}")
    else:
        print(json.dumps(trace(run_folder(args.run, outputs), args.example_id), ensure_ascii=False, indent=2))
    return 0


def _serve() -> int:
    from flows.deployment import serve_build

    serve_build()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _prefect_defaults()
    try:
        if args.command == "names":
            return args.handler(args)
        if args.command in ("audit", "trace"):
            return _audit(args)
        return _build(args) if args.command == "build" else _serve()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the one place that turns any failure into a message and an exit code
        print(f"pbbq: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
