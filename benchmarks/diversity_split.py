"""Benchmark: the diversity stage (``08_diversity``) split by category against the whole-table stage, in a build in
which one template lost a lexical variant (case (e) of ``benchmarks/build_paper_scale.py``), on a run folder's tables.

Run from the repository root: ``python -m benchmarks.diversity_split RUN_FOLDER [--repeat 3]``, RUN_FOLDER a build's
run folder. Every category's parts are kept first (a build of the unchanged tables); then the changed tables are
measured whole, split with every other category kept, and the parts of that: hashing the split tables' rows by
category, the changed category's part, and the whole (the Average and Overall rows, the charts). Each figure is the
best of ``--repeat`` runs (the split stage's, of one), in seconds; the split output is checked to equal the
whole-table stage's.
"""

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.diversity_stage import best
from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks import diversity
from pbbq.tasks.core.artifacts import ArtifactStore
from pbbq.tasks.core.caching import _row_hashes, separated


def changed(examples: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The examples with the last lexical variant of the last template that has several dropped, and its category."""
    lexical = examples.groupby("template_id")["lexical_variant"].nunique()
    template_id = lexical[lexical > 1].index.max()
    own = examples["template_id"] == template_id
    variant = examples.loc[own, "lexical_variant"].iloc[-1]
    return examples[~(own & (examples["lexical_variant"] == variant))], str(examples.loc[own, "category"].iloc[0])


def main() -> None:
    """Print the table of parts."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path, help="a build's run folder")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    examples = pd.concat(
        [pd.read_parquet(args.run / table.folder / f"{table.name}.parquet") for table in PIPELINE.configs.values()],
        ignore_index=True,
    )
    templates = pd.read_parquet(args.run / "04_disambiguate" / "templates.parquet")
    params = diversity.DiversityParams()
    per = diversity.STAGE.per
    assert per is not None
    fewer, category = changed(examples)
    arguments = {"examples": fewer, "templates": templates, "params": params}
    with tempfile.TemporaryDirectory() as scratch:
        store = ArtifactStore(Path(scratch))
        rows = [
            (
                "keep every category (the unchanged tables)",
                best(1, separated, per, arguments | {"examples": examples}, store)[0],
            )
        ]
        seconds, whole = best(args.repeat, diversity.diversity, fewer, templates, params)
        rows.append(("the whole-table stage", seconds))
        seconds, (split, parts) = best(1, separated, per, arguments, store)  # once: a second run computes nothing
        assert parts["computed"] == 1 and split.files == whole.files
        for name, frame in whole.tables.items():
            pd.testing.assert_frame_equal(split.tables[name], frame, check_exact=True)
        rows.append((f"split, {parts['computed']} of {parts['of']} categories computed", seconds))
    rows.append(
        (
            "  rows hashed by category",
            best(args.repeat, lambda: [_row_hashes(f, "category") for f in (fewer, templates)])[0],
        )
    )
    own = {"examples": fewer[fewer["category"] == category], "templates": templates[templates["category"] == category]}
    seconds = best(args.repeat, diversity.diversity_part, *own.values(), params)[0]
    rows.append((f"  the part of {category}", seconds))
    every = diversity.diversity_part(fewer, templates, params)
    rows.append(("  the whole", best(args.repeat, diversity.diversity_whole, every, fewer, templates, params)[0]))
    tables = whole.tables
    rows.append(("    its charts", best(args.repeat, lambda: [diversity.metric_charts(t) for t in tables.values()])[0]))
    width = max(len(name) for name, _ in rows)
    print(f"{'part'.ljust(width)}  seconds")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds:7.3f}")


if __name__ == "__main__":
    main()
