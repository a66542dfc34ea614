"""Synthetic inputs at the PBBQ paper's scale (``pbbq synth``): a build that runs offline at paper scale.

:func:`synthesize` writes into one folder every input a build reads, each in exactly the format its loader
accepts, and a build configuration (``build.toml``) that ``pbbq build --config`` builds offline:

- ``survey/questionnaire.csv``: 307 stereotypes over the 16 categories (PBBQ §3.2), one trait each;
- ``survey/responses.csv``: 250 respondents with the Appendix E demographic counts, so that 233 stereotypes pass
  the survey filter (> 60 %, PBBQ §3.2);
- ``annotations/templates.csv`` and ``ratings.csv``: about 300 templates, of which the kappa gate (PakBBQ §3.2)
  keeps Table 1's 276 per category; the others fail it on kappa, on relevance, or belong to a stereotype the
  survey rejected;
- entity lists and lexical variants sized so that the ``fa`` examples of each category come to Table 1's
  count, rounded to a multiple of 12 (the examples of one entity pair and variant: :mod:`pbbq.tasks.instantiate`);
- ``annotations/glossary.csv``, ``annotations/names/names_fa.csv`` (the bundled name table's rows of the groups
  the entities name), ``annotations/unknown_phrases.csv``, ``annotations/disambiguation_overrides.csv``;
- ``transcript.jsonl.gz``: an answer to every LLM request the build makes, recorded by running the build's own
  stage functions (survey filter, kappa gate, disambiguate, instantiate, translate) against the real
  :class:`~pbbq.tasks.llm.LLMClient` whose transport is a deterministic stand-in (:class:`.model.StandInModel`): it
  computes each answer from the request, so every answer passes the stage's validators (a few first answers
  break a rule on purpose, so the retries are exercised too).

**Everything here is synthetic and says so**: every id starts with ``SYNTH-`` (so every example id of the
build does), English statements with ``[SYNTHETIC]``, Persian ones with ``[ساختگی]``, notes say it, the
transcript's header and ``synth.json`` carry ``"synthetic": true``, and ``build.toml`` sets
``[publish] synthetic = true``: the publish stage writes a SYNTHETIC note into the dataset card and refuses to
upload (:mod:`pbbq.tasks.publish`). The texts are placeholders built from a small bilingual phrase book; they
state no finding about any group.

The same scale and seed give the same bytes in every file. One job per module, each importing only those above
it in this list: :mod:`.phrases` (the phrase book), :mod:`.scale` (the paper's counts and the plan of a scale),
:mod:`.generate` (stereotypes, templates, ratings, responses), :mod:`.model` (the stand-in model),
:mod:`.languages` (the target languages), :mod:`.files` (the files' bytes), :mod:`.record` (the stages' run and
the transcript), and here :func:`synthesize`, which writes the folder, and :func:`summary`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .files import NOTE, input_files
from .generate import draw_stereotypes, draw_templates
from .languages import target_codes
from .record import ReadConfig, check_counts, record_transcript
from .scale import SynthError, plan


@dataclass(frozen=True)
class SynthResult:
    """A written synthetic build: its folder, counts per category (planned and as the build's stages found them)
    and the seconds each step took."""

    folder: Path
    scale: str
    seed: int
    counts: pd.DataFrame
    requests: int
    seconds: dict[str, float]


def synthesize(
    out: Path,
    scale: str = "paper",
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    *,
    read_config: ReadConfig,
    targets: int = 1,
) -> SynthResult:
    """Write a synthetic build into ``out`` (which must not exist or be empty): inputs, build.toml, README.md,
    synth.json and the transcript; translated into ``targets`` languages (:func:`target_codes`). The folder
    appears complete or not at all. ``read_config`` reads the build.toml written, whose stages run to record the
    transcript."""
    say = log or (lambda _: None)
    plans = plan(scale)
    codes = target_codes(targets)
    if seed < 0:
        raise SynthError(f"seed {seed} must be >= 0")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SynthError(f"{out} exists and is not an empty folder: choose a new --out")
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    stereotypes = draw_stereotypes(plans, rng)
    templates = draw_templates(plans, stereotypes, rng)
    files = input_files(scale, seed, codes, plans, stereotypes, templates, rng)
    generated = time.perf_counter() - started
    say(f"generated {len(stereotypes)} stereotypes and {len(templates)} templates in {generated:.1f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}-synth-{os.getpid()}-{time.monotonic_ns()}"
    staging.mkdir()  # not mkdtemp: the folder takes the user's umask, as a build's files do
    try:
        for name, data in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(data)
        counts, requests, seconds = record_transcript(staging, templates, seed, codes, say, read_config)
        check_counts(counts, plans)
        written = sorted(p for p in staging.rglob("*") if p.is_file())
        meta = {
            "synthetic": True,
            "generator": "pbbq synth",
            "note": NOTE,
            "scale": scale,
            "seed": seed,
            "targets": list(codes),
            "requests": requests,
            "counts": {c: {k: int(v) for k, v in row.items()} for c, row in counts.iterrows()},
            "files": {p.relative_to(staging).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in written},
        }
        (staging / "synth.json").write_text(
            json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = {"generate": generated, **seconds, "total": time.perf_counter() - started}
    return SynthResult(out, scale, seed, counts, requests, seconds)


def summary(result: SynthResult) -> list[str]:
    """The counts per category and in all (the examples per language: ``fa`` and each target), for the terminal."""
    c = result.counts
    widths = {"stereotypes": 12, "accepted": 10, "templates": 10, "gated": 7} | {
        column: 8 for column in c.columns[c.columns.get_loc("fa") :]
    }

    def line(name: str, row: pd.Series) -> str:
        return f"{name:<24}" + "".join(f"{row[column]:>{width},}" for column, width in widths.items())

    header = f"{'category':<24}" + "".join(f"{column:>{width}}" for column, width in widths.items())
    return [header, *(line(str(category), row) for category, row in c.iterrows()), line("total", c.sum())]
