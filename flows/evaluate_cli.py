"""``pbbq evaluate``: score models on a release with lm-evaluation-harness (the evaluate-pbbq flow).

pbbq evaluate --release RUN_OR_REPO --model SPEC [--model SPEC ...] [--config fa,fa-names,en] [--limit N]
              [--eval-id ID] [--outputs DIR] [--survey FILE] [--bootstrap N] [--seed N] [--batch-size N]

Prints the evaluation's run folder. API keys come from the environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``),
as lm-eval reads them; never put one in a model spec.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pbbq.flows.arguments import run_id

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
    parser.add_argument("--limit", type=int, help="only the first N examples of each config")
    parser.add_argument(
        "--eval-id", type=run_id, help="name of the evaluation's run folder (default: eval-<time>-<random>)"
    )
    parser.add_argument("--outputs", type=Path, help="where runs are (default: $PBBQ_OUTPUTS or outputs/)")
    parser.add_argument("--survey", type=Path, help="acceptance per stereotype (parquet/CSV) for the KL")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over templates (1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and of lm-eval (0)")
    parser.add_argument("--batch-size", type=int, default=8, help="lm-eval's batch size (8)")
    parser.set_defaults(handler=evaluate_command)
    return parser


def evaluate_command(args: argparse.Namespace) -> int:
    """Run the evaluate-pbbq flow and print its run folder. A run id under ``--outputs`` names a build."""
    from pbbq.flows.evaluate_pbbq import evaluate_pbbq
    from pbbq.flows.runs import outputs_folder
    from pbbq.flows.server import startup_timeout, temporary_server

    outputs = outputs_folder(str(args.outputs) if args.outputs else None)
    release = args.release
    if not Path(release).exists() and (outputs / release).is_dir():
        release = str(outputs / release)
    with temporary_server(startup_timeout()):
        folder = evaluate_pbbq(
            release=release,
            models=args.models,
            configs=args.config,
            limit=args.limit,
            eval_id=args.eval_id,
            outputs=str(outputs),
            survey=str(args.survey) if args.survey else None,
            bootstrap=args.bootstrap,
            seed=args.seed,
            batch_size=args.batch_size,
        )
    print(folder)
    return 0
