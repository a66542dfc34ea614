"""``pbbq evaluate``: score models on a release with lm-evaluation-harness (the evaluate-pbbq flow).

pbbq evaluate --release RUN_OR_REPO --model SPEC [--model SPEC ...] [--config fa,fa-names,en] [--limit N]
              [--eval-id ID] [--outputs DIR] [--survey FILE] [--bootstrap N] [--seed N] [--batch-size N]
              [--unverified]

Prints the evaluation's run folder, then its scores (Table 3's and BBQ's per model and config, and ε_c; every
table is in ``<run>/02_metrics/tables.md``). Keys come from the environment, where lm-eval reads them:
``OPENAI_API_KEY`` (openai-* and local-* backends), ``ANTHROPIC_API_KEY`` (anthropic-*), ``HF_TOKEN`` (a gated Hub
model). A secret argument written in a spec (``api_key=…``) is redacted before the flow sees it, so it reaches
no log, no file and no Prefect parameter, and is not used. Bad arguments fail here, before a Prefect server or
lm-eval starts, with one line naming the argument.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .arguments import integer, run_id

SPEC_HELP = (
    "[NAME=]BACKEND:ARGS, lm-eval's model and model_args, e.g. hf:pretrained=/models/x,dtype=float32 or "
    "local-completions:model=m,base_url=http://host:8000/v1/completions,tokenizer_backend=remote; chat backends "
    "(openai-chat-completions, anthropic-chat-completions, local-chat-completions) run the generation task"
)


def _configs(text: str) -> list[str]:
    configs = [part.strip() for part in text.split(",") if part.strip()]
    if not configs:
        raise argparse.ArgumentTypeError("give at least one config, e.g. fa,fa-names,en")
    return configs


def add_evaluate_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pbbq evaluate`` on the ``pbbq`` parser's subparsers; its handler is ``args.handler``."""
    parser = subparsers.add_parser("evaluate", help="score models on a release with lm-evaluation-harness")
    parser.add_argument("--release", required=True, help="a build's run id or folder, a release folder, or NS/NAME")
    parser.add_argument("--model", action="append", required=True, dest="models", help=SPEC_HELP)
    parser.add_argument("--config", type=_configs, help="configs to score, comma-separated (default: all)")
    parser.add_argument(
        "--limit",
        type=integer(1),
        help="N examples of each config, stratified by category, context and polarity (seeded by --seed); the "
        "fa-names ones are name variants of the fa ones, so that ε_c is computed",
    )
    parser.add_argument(
        "--eval-id", type=run_id, help="name of the evaluation's run folder (default: eval-<time>-<random>)"
    )
    parser.add_argument("--outputs", type=Path, help="where runs are (default: $PBBQ_OUTPUTS or outputs/)")
    parser.add_argument("--survey", type=Path, help="acceptance per stereotype (parquet/CSV) for the KL")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over templates (1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --limit's draw, the bootstrap and lm-eval (0)")
    parser.add_argument("--batch-size", type=int, default=8, help="lm-eval's batch size (8)")
    parser.add_argument(
        "--unverified",
        action="store_true",
        help="score a release whose files are not what its manifest lists (or that has none); its run says so",
    )
    parser.set_defaults(handler=evaluate_command)
    return parser


def _check_outputs(outputs: Path) -> None:
    """``--outputs`` must be a folder, or be creatable as one: its nearest existing ancestor is a folder."""
    from ...tasks.evaluation.evaluate import EvaluateError

    existing = next(path for path in (outputs, *outputs.parents) if path.exists())
    if not existing.is_dir():
        raise EvaluateError(f"--outputs {outputs}: {existing} is a file, not a folder")


def _scores(run: Path) -> str:
    import pandas as pd

    from ...tasks.evaluation.reports import scores_summary

    metrics = run / "02_metrics"
    tables = ("table3", "bbq_scores", "error_retention")
    return scores_summary(*(pd.read_parquet(metrics / f"{name}.parquet") for name in tables))


def evaluate_command(args: argparse.Namespace) -> int:
    """Check the arguments, run the evaluate-pbbq flow, print its run folder and its scores. A run id under
    ``--outputs`` names a build."""
    from ...tasks.evaluation.evaluate import ModelSpec, check_arguments, redact_spec
    from ..audit.runs import outputs_folder
    from ..evaluate_pbbq import evaluate_pbbq
    from ..server import startup_timeout, temporary_server

    models = [redact_spec(model) for model in args.models]
    check_arguments([ModelSpec.parse(model) for model in models], args.limit)
    outputs = outputs_folder(str(args.outputs) if args.outputs else None)
    _check_outputs(outputs)
    release = args.release
    if not Path(release).exists() and (outputs / release).is_dir():
        release = str(outputs / release)
    with temporary_server(startup_timeout()):
        folder = evaluate_pbbq(
            release=release,
            models=models,
            configs=args.config,
            limit=args.limit,
            eval_id=args.eval_id,
            outputs=str(outputs),
            survey=str(args.survey) if args.survey else None,
            bootstrap=args.bootstrap,
            seed=args.seed,
            batch_size=args.batch_size,
            unverified=args.unverified,
        )
    print(folder)
    print()
    print(_scores(Path(folder)))
    return 0
