"""``pbbq synth``: SYNTHETIC inputs for a build at the PBBQ paper's scale, offline (the scale benchmark's inputs).

pbbq synth --scale paper|half|quarter --out DIR [--seed N] [--targets N]

Writes into ``DIR`` (new or empty) every input a build reads, a transcript answering every LLM request the build
makes, and ``DIR/build.toml``; with ``--targets N`` the examples are translated into English and N - 1 synthetic
languages (``xa``, ``xb``, …: English under other codes, their modules in ``DIR/languages``), each answered in the
transcript; ``pbbq build --config DIR/build.toml`` then builds offline (replay mode, no crawl
sources, BERTScore homogenization off). Every file is marked synthetic, and the build's publish stage refuses to
upload it (:mod:`pbbq.tasks.synth`, :mod:`pbbq.tasks.publish`). The same scale and seed give the same bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

SCALES = ("paper", "half", "quarter")
"""The scales offered (``pbbq.tasks.synth.scale.SCALES`` also has ``tiny``, one template per category, for tests; not
imported here, so that ``pbbq --help`` stays fast)."""
HIDDEN_SCALES = ("tiny",)


def _scale(value: str) -> str:
    if value not in (*SCALES, *HIDDEN_SCALES):
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(SCALES)}")
    return value


def add_synth_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pbbq synth`` on the ``pbbq`` parser's subparsers; its handler is ``args.handler``."""
    parser = subparsers.add_parser(
        "synth", help="write SYNTHETIC paper-scale inputs and a build configuration that builds offline"
    )
    parser.add_argument(
        "--scale",
        type=_scale,
        default="paper",
        metavar="{" + ",".join(SCALES) + "}",
        help="share of the paper's Table 1 (default: paper)",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write (must not exist, or be empty)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every draw (default: 0)")
    parser.add_argument(
        "--targets",
        type=int,
        default=1,
        help="target languages: English and N - 1 SYNTHETIC ones (xa, xb, …; default: 1, English only)",
    )
    parser.set_defaults(handler=synth_command)
    return parser


def synth_command(args: argparse.Namespace) -> int:
    """Write the synthetic build and print its counts per category, the time taken and its build.toml."""
    from ...tasks.synth import summary, synthesize
    from ..config import load_config

    result = synthesize(
        args.out,
        args.scale,
        args.seed,
        lambda line: print(f"synth: {line}"),
        read_config=load_config,
        targets=args.targets,
    )
    print("\n".join(summary(result)))
    print(f"{result.requests:,} LLM answers in the transcript; {result.seconds['total']:.1f} s")
    print(
        f"SYNTHETIC build (publish refuses to upload it); build it with: pbbq build --config {args.out / 'build.toml'}"
    )
    return 0
