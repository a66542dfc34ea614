"""The ``pbbq`` command.

pbbq build --sample [adapt] | --config FILE [--run-id ID] [--outputs DIR] [--verbose]
           [--task-runner threads|dask [--dask-address ADDR | --dask-workers N]]
pbbq serve            # serve the build-pbbq deployment (prefect.yaml) for `prefect deployment run`
pbbq evaluate --release RUN_OR_REPO --model SPEC [--config fa,fa-names,en] [--limit N]   # score models
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from pathlib import Path

from .adapt import add_adapt_command
from .arguments import OneLineParser, run_id
from .audit import AUDIT_COMMANDS, add_audit_commands
from .crawl import add_crawl_commands
from .evaluate import add_evaluate_command
from .names import add_names_command
from .review import add_review_command
from .synth import add_synth_command
from .verify import add_verify_command

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository (``pbbq.tasks.core.artifacts.REPO_ROOT``; not imported here: ``pbbq --help`` answers at once)."""
SAMPLES = {"pbbq": REPO_ROOT / "configs" / "sample.toml", "adapt": REPO_ROOT / "configs" / "adapt-sample.toml"}
"""The bundled samples, each built offline: PBBQ's (``--sample``) and the adaptation path's (``--sample adapt``)."""


def _prefect_defaults() -> None:
    """Settings Prefect needs here, unless the user set them: a home in the repository (as prefect.toml says,
    whatever the working folder), no telemetry, and time for a temporary server to start. Without a configured
    server (``PREFECT_API_URL``) a command runs against a temporary one that is gone when it exits: no UI link
    to it (Prefect's "View at http://127.0.0.1:<port>/…")."""
    os.environ.setdefault("PREFECT_HOME", str(REPO_ROOT / ".prefect"))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    if not os.environ.get("PREFECT_API_URL"):
        os.environ.setdefault("PREFECT_UI_URL", "")


class _OneLineErrors(logging.Filter):
    """Log records on the terminal without their traceback (it is in the run's ``error.log``)."""

    def filter(self, record: logging.LogRecord) -> logging.LogRecord:
        if not record.exc_info:
            return record
        copy = logging.makeLogRecord(record.__dict__)
        copy.exc_info = copy.exc_text = None
        return copy


class _NoTaskRunLines(logging.Filter):
    """Prefect's task-run lines below warnings ("Task run 'x' - Finished in state Completed()"): off the terminal,
    since the flow's line per stage says what each did (its API handler still sends them to the server)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.name.startswith("prefect.task_runs")


def _quiet_prefect(tracebacks: bool, task_runs: bool) -> None:
    """Keep tracebacks (the user sees one line per failure; ``--debug`` shows them) and, unless asked for,
    task-run lines (``pbbq build --verbose``) off the terminal."""
    import prefect.main  # noqa: F401  (Prefect sets up its log handlers when its main module is imported)

    filters: list[logging.Filter] = [
        *([] if tracebacks else [_OneLineErrors()]),
        *([] if task_runs else [_NoTaskRunLines()]),
    ]
    for logger in (logging.getLogger(), logging.getLogger("prefect")):
        for handler in logger.handlers:
            for one in filters:
                handler.addFilter(one)


def _message(exc: BaseException) -> str:
    """One line: the error (a system error as its file and what went wrong: ``FILE: No space left on device``)
    and, when the run kept it, where its traceback is."""
    notes = [note for note in getattr(exc, "__notes__", []) if note.startswith("traceback: ")]
    traceback = f" ({notes[0]})" if notes else ""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}{traceback}"
    return f"{exc}{traceback}"


def _exit_called(exc: SystemExit) -> str:
    """One line for a ``sys.exit`` that code a build ran called (a configuration's language module, say): where."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}, line {frames[-1].lineno}" if frames else "code the build ran"
    return f"{where}: called sys.exit({exc.code!r}) during pbbq build; code a build runs must raise an error instead"


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="pbbq", description="Build PBBQ, the Persian bias benchmark for QA.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on the terminal")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a run and print its folder")
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--sample",
        nargs="?",
        const="pbbq",
        choices=tuple(SAMPLES),
        help="a bundled sample, built offline: pbbq (the default) or adapt (BBQ's templates adapted for Pakistan)",
    )
    source.add_argument("--config", type=Path, help="a build configuration (TOML)")
    build.add_argument("--run-id", type=run_id, help="name of the run folder (default: time + random suffix)")
    build.add_argument("--outputs", type=Path, help="where runs go (default: $PBBQ_OUTPUTS or outputs/)")
    build.add_argument("--repo-id", help="Hub dataset repository to publish to (overrides [publish] repo_id)")
    build.add_argument(
        "--upload", action="store_true", help="upload the release (default: a dry run that writes the folder only)"
    )
    build.add_argument(
        "--force-synthetic",
        action="store_true",
        help="upload a synthetic build (pbbq synth) all the same; its card says SYNTHETIC",
    )
    build.add_argument(
        "--stand-in",
        action="store_true",
        help="answer every LLM request offline with labelled placeholder text, to try a change of the inputs "
        '([llm] mode = "stand-in"); its card says STAND-IN and it is never uploaded',
    )
    build.add_argument(
        "--task-runner",
        choices=("threads", "dask"),
        default="threads",
        help="where stages run: Prefect's thread pool (default) or Dask (the dask extra)",
    )
    build.add_argument("--dask-address", help="a running Dask scheduler (default: a local cluster)")
    build.add_argument(
        "--dask-workers",
        type=int,
        metavar="N",
        help="a local Dask cluster of N worker processes (default: two thread workers in this process)",
    )
    build.add_argument("--verbose", action="store_true", help="show Prefect's own line for every task run too")
    commands.add_parser("serve", help="serve the build-pbbq deployment with its weekly schedule")
    add_audit_commands(commands)
    add_names_command(commands)
    add_synth_command(commands)
    add_evaluate_command(commands)
    add_verify_command(commands)
    add_crawl_commands(commands)
    add_adapt_command(commands)
    add_review_command(commands)
    return parser


def _build(args: argparse.Namespace) -> int:
    from ..config import load_config

    config = args.config or SAMPLES[args.sample]
    build = load_config(config)  # a bad configuration fails here, before a Prefect server starts
    from ..build_inputs import check_build_inputs
    from ..build_pbbq import build_pbbq
    from ..task_runners import task_runner

    check_build_inputs(build, str(args.outputs) if args.outputs else None, args.run_id)  # and so does a bad input
    from ..server import startup_timeout, temporary_server

    flow = build_pbbq.with_options(task_runner=task_runner(args.task_runner, args.dask_address, args.dask_workers))
    with temporary_server(startup_timeout()):
        folder = flow(
            config=str(config),
            run_id=args.run_id,
            outputs=str(args.outputs) if args.outputs else None,
            repo_id=args.repo_id,
            dry_run=False if args.upload else None,
            force_synthetic=True if args.force_synthetic else None,
            stand_in=True if args.stand_in else None,
        )
    print(folder)
    return 0


def _serve() -> int:
    from ..deployment import serve_build
    from ..server import startup_timeout, temporary_server

    with temporary_server(startup_timeout()):
        serve_build()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _prefect_defaults()
    if args.command not in (*AUDIT_COMMANDS, "verify", "review"):  # these read runs: no Prefect to quieten
        _quiet_prefect(tracebacks=args.debug, task_runs=args.command != "build" or args.verbose)
    try:
        if args.command in (
            "adapt",
            "names",
            "evaluate",
            "verify",
            "crawl",
            "questionnaire",
            "responses",
            "synth",
            "review",
            *AUDIT_COMMANDS,
        ):
            return args.handler(args)
        return _build(args) if args.command == "build" else _serve()
    except KeyboardInterrupt:
        if args.command == "build":  # its run is marked incomplete; a stage's thread would hold the exit (docs/runs.md)
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(130)
        return 130
    except SystemExit as exc:  # argparse's exits are behind: this one comes from code the build ran
        if args.command != "build" or args.debug:
            raise
        print(f"pbbq: error: {_exit_called(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # the one place that turns any failure into a message and an exit code
        if args.debug:
            raise
        print(f"pbbq: error: {_message(exc)}", file=sys.stderr)
        return 1
