"""Benchmark: the diversity stage's (``08_diversity``) own peak memory over its input, and its time, on a run folder's
tables.

Run from the repository root, with memray installed (``pip install memray``):
``ARROW_DEFAULT_MEMORY_POOL=system python -m benchmarks.diversity_memory RUN_FOLDER [--adapt] [--trace FILE]``.
RUN_FOLDER is a build's run folder; ``--adapt`` reads the adaptation pipeline's tables (:func:`adapt_pipeline`: the
``en`` and ``en-names`` examples, ``03_adapt/texts``), else PBBQ's. The examples are loaded and stacked first, as the
build hands them to the stage; then the stage function runs once under memray's tracker (every allocation of the
Python heap, numpy's included; Arrow's too with the system pool), and its peak above what was alive before is printed
with its wall and CPU time. The same call is then timed once more untraced.
"""

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from pbbq.flows.pipeline import PIPELINE, adapt_pipeline
from pbbq.tasks import diversity
from pbbq.tasks.core.stage import examples_of


def timed(examples: pd.DataFrame, templates: pd.DataFrame, configs: list[str]) -> tuple[float, float]:
    """The stage function's wall and CPU seconds on the tables."""
    wall, cpu = time.perf_counter(), time.process_time()
    diversity.diversity(examples, templates, diversity.DiversityParams(), configs)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    """Print the stage's peak above its input and its times."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path, help="a build's run folder")
    parser.add_argument("--adapt", action="store_true", help="the adaptation pipeline's tables")
    parser.add_argument("--trace", type=Path, help="keep memray's trace here (default: a temporary file)")
    args = parser.parse_args()
    from memray import FileReader, Tracker

    pipeline = adapt_pipeline() if args.adapt else PIPELINE
    tables = examples_of(pipeline.configs)
    examples = pd.concat(
        [pd.read_parquet(args.run / t.folder / f"{t.name}.parquet") for t in tables.values()], ignore_index=True
    )
    templates_table = next(stage for stage in pipeline.stages if stage.folder == "08_diversity").inputs["templates"]
    templates = pd.read_parquet(args.run / templates_table.folder / f"{templates_table.name}.parquet")
    configs = list(tables)
    with tempfile.TemporaryDirectory() as scratch:
        trace = args.trace or Path(scratch) / "diversity.bin"
        trace.unlink(missing_ok=True)
        with Tracker(trace):
            traced_wall, traced_cpu = timed(examples, templates, configs)
        peak = FileReader(trace).metadata.peak_memory
    wall, cpu = timed(examples, templates, configs)
    print(f"{len(examples):,} examples of {', '.join(configs)}")
    print(f"diversity's peak above its input (memray): {peak / 1e6:,.0f} MB")
    print(f"untraced: {wall:.2f} s wall, {cpu:.2f} s CPU (traced: {traced_wall:.2f} s, {traced_cpu:.2f} s CPU)")


if __name__ == "__main__":
    main()
