"""Benchmark: a review round over every context and translation of the paper-scale synthetic build.

Run from the repository root: ``python -m benchmarks.review_round [--run RUN] [--work DIR]``. Without ``--run`` it
writes the paper-scale synthetic inputs (``pbbq synth --scale paper``) and builds them (not timed). Then it times,
each as a user meets it,

- **export**: ``pbbq review export RUN --items contexts,translations:en --reviewers ana,bob`` (a process: every item,
  each to both reviewers, a sheet each);
- **import**: ``pbbq review import ROUND`` (a process) of both sheets answered (every item: accept, one in 50 a fix,
  one in 50 a reject; answered here, not timed), agreement included;
- **apply**: what the build does with the decisions, on the run's tables: the contexts' decisions resolved against
  disambiguate's answers, the translations' applied to the segment table
  (:func:`pbbq.tasks.translate.reviewed_segments`) and the review stage (statuses, agreement, disagreements).

The goal (issue 37): each ≤ 10 s on this machine. Each step is given in wall seconds and in CPU seconds (user and
system, of the process that ran it): on the shared 2-core machine the wall time follows how many other builds run
(the load average, printed), the CPU time what the step costs.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
GOAL = 10.0


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _pbbq(*args: str) -> tuple[float, float]:
    """Wall and CPU seconds of ``pbbq ARGS`` in a process of its own."""
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "pbbq.flows.cli", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"pbbq {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, _children_cpu() - cpu


def _paper_run(work: Path) -> Path:
    inputs = work / "inputs"
    _pbbq("synth", "--scale", "paper", "--out", str(inputs))
    _pbbq("build", "--config", str(inputs / "build.toml"), "--outputs", str(work / "outputs"), "--run-id", "paper")
    return work / "outputs" / "paper"


def _answer(sheet: Path) -> int:
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    contexts = frame["kind"] == "contexts"
    frame["verdict"] = "accept"
    frame.loc[contexts, ["disambiguates", "natural"]] = "yes"
    frame.loc[~contexts, ["faithful", "natural", "same_entities"]] = "yes"
    every = frame.index % 50
    frame.loc[(every == 7) & ~contexts, ["verdict", "fix_text"]] = ["fix", "A reviewer's translation."]
    frame.loc[every == 13, ["verdict", "reason"]] = ["reject", "not what a native reader writes"]
    frame.to_csv(sheet, index=False, encoding="utf-8-sig")
    return len(frame)


def _apply(run: Path, decisions_path: Path) -> tuple[tuple[float, float], dict]:
    from pbbq.tasks.review.apply import resolve
    from pbbq.tasks.review.decisions import load_decisions
    from pbbq.tasks.review.stage import ReviewParams, ReviewRules, current_hashes, review
    from pbbq.tasks.translate import reviewed_segments
    from pbbq.tasks.translate.pair import Pair

    attempts = pd.read_parquet(run / "04_disambiguate" / "attempts.parquet")
    segments = pd.read_parquet(run / "07_translate" / "segments.parquet")
    translate_attempts = pd.read_parquet(run / "07_translate" / "attempts.parquet")
    start, cpu = time.perf_counter(), time.process_time()
    decisions = load_decisions(decisions_path)
    hashes = current_hashes(attempts, {"en": (segments, translate_attempts)})
    contexts = resolve(decisions, "contexts", hashes["contexts"])
    fixed = reviewed_segments(segments, decisions, ReviewRules(require=True), Pair("fa", "en", "translate"))
    out = review(
        decisions,
        ReviewParams(decisions=str(decisions_path)),
        contexts=attempts,
        segments__en=segments,
        attempts__en=translate_attempts,
    )
    seconds = time.perf_counter() - start, time.process_time() - cpu
    return seconds, {
        "decisions": len(decisions),
        "context fixes/rejects": f"{len(contexts.fixes)}/{len(contexts.rejects)}",
        "segments failed by review": int(fixed["failures"].str.startswith("review_").sum()),
        "applied": out.report["counts"]["applied"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a paper-scale synthetic build's run folder (default: build one)")
    parser.add_argument("--work", type=Path, help="where to build it and write the round (default: a temp folder)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="review-round-"))
    run = args.run or _paper_run(work)
    folder = work / "round"
    export = _pbbq("review", "export", str(run), "--items", "contexts,translations:en", "--reviewers", "ana,bob",
                   "--out", str(folder))  # fmt: skip
    rows = sum(_answer(sheet) for sheet in sorted((folder / "sheets").glob("*.csv")))
    imported = _pbbq("review", "import", str(folder))
    applied, counts = _apply(run, folder / "decisions.csv")
    print(f"run {run}: {rows} sheet rows (every context and translation, 2 reviewers each)")
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    print("| step | wall seconds | CPU seconds | goal |\n| --- | --- | --- | --- |")
    for step, (wall, cpu) in (("export", export), ("import", imported), ("apply", applied)):
        print(f"| {step} | {wall:.1f} | {cpu:.1f} | ≤ {GOAL:g} {'✓' if wall <= GOAL else '✗'} |")
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
