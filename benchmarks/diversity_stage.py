"""Benchmark: what each part of the diversity stage (``08_diversity``) costs on a run folder's tables, and its charts
drawn on one figure per table against a new figure per chart (the same PNG bytes, checked here).

Run from the repository root: ``python -m benchmarks.diversity_stage RUN_FOLDER [--repeat 3]``, RUN_FOLDER a build's
run folder (its ``04_disambiguate`` templates and every config's examples, as :data:`pbbq.flows.pipeline.PIPELINE`
names them). Each figure is the best of ``--repeat`` runs, in seconds; tokenising is timed on a fresh tokenizer
cache the first time (sacrebleu keeps 13a's results), as a build meets it.
"""

import argparse
import importlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks import diversity
from pbbq.tasks.core.schemas import example_configs
from pbbq.tasks.core.stage import examples_of
from pbbq.tasks.diversity.ngrams import CodedTexts, code_texts, ngram_diversity_of_units, type_token_ratio_of_units
from pbbq.tasks.diversity.self_bleu import self_bleu_of_units
from pbbq.tasks.text.languages import language


def best(repeat: int, work: Callable[..., Any], *arguments: Any) -> tuple[float, Any]:
    """The least wall time of ``repeat`` calls of ``work(*arguments)``, and its result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work(*arguments)
        times.append(time.perf_counter() - start)
    return min(times), result


def figure_per_chart(table: pd.DataFrame, out_dir: Path) -> list[Path]:
    """The charts as the stage drew them before sharing one figure: a new figure for every metric."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir.mkdir(parents=True, exist_ok=True)
    series = table if "config" in table.columns else table.assign(config="templates")
    categories = list(dict.fromkeys(series["category"]))
    configs = list(dict.fromkeys(series["config"]))
    level = "instances" if "config" in table.columns else "templates"
    paths = []
    for metric in diversity.METRICS:
        wide = series.pivot(index="category", columns="config", values=metric).reindex(categories)
        figure = Figure(figsize=(max(6.0, 0.25 * len(categories) * len(configs) + 2.5), 4.5))
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        width = 0.8 / max(len(configs), 1)
        for k, config in enumerate(configs):
            axes.bar(np.arange(len(categories)) + k * width, wide[config].to_numpy(dtype=float), width, label=config)
        axes.set_xticks(np.arange(len(categories)) + 0.4 - width / 2, categories, rotation=60, ha="right")
        axes.set_ylabel(diversity._HEADERS[metric])
        axes.set_title(f"{diversity._HEADERS[metric]} per category ({level})")
        if configs:
            axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        figure.tight_layout()
        path = out_dir / f"diversity_{metric}.png"
        figure.savefig(path, format="png", metadata={"Software": None})
        paths.append(path)
    return paths


def metrics(groups: list[np.ndarray], coded: CodedTexts) -> None:
    """NGD, TTR and Self-BLEU of each group of units (their positions among the coded texts), as the stage's rows."""
    for ids in groups:
        ngram_diversity_of_units(coded, ids)
        type_token_ratio_of_units(coded, ids)
        self_bleu_of_units(coded, ids)


def instance_parts(examples: pd.DataFrame, repeat: int) -> list[tuple[str, float]]:
    """Per config: tokenising its distinct contexts, then the four lexical metrics of its category rows and of its
    Overall row."""
    configs = example_configs(examples)
    rows = []
    for config in dict.fromkeys(configs):
        part = examples.loc[(configs == config).to_numpy(), ["category", "lang", "context"]]
        lang = language(part["lang"].iloc[0])
        distinct = sorted(set(part["context"]))
        seconds, coded = best(1, code_texts, distinct, lang.tokenize, lang.words, lang.stop_words)
        rows.append((f"{config}: tokenise {len(distinct)} contexts", seconds))
        position = pd.Series(np.arange(len(distinct)), index=distinct)
        groups = [np.unique(position[group].to_numpy()) for _, group in part.groupby("category")["context"]]
        rows.append((f"{config}: {len(groups)} category rows", best(repeat, metrics, groups, coded)[0]))
        rows.append((f"{config}: Overall row", best(repeat, metrics, [np.arange(len(distinct))], coded)[0]))
    return rows


def main() -> None:
    """Print the table of parts and the charts' comparison."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path, help="a build's run folder")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    examples = pd.concat(
        [pd.read_parquet(args.run / t.folder / f"{t.name}.parquet") for t in examples_of(PIPELINE.configs).values()],
        ignore_index=True,
    )
    templates = pd.read_parquet(args.run / "04_disambiguate" / "templates.parquet")
    rows = [("import matplotlib", best(1, importlib.import_module, "matplotlib.figure")[0])]
    rows += instance_parts(examples, args.repeat)
    rows.append(("template table", best(args.repeat, diversity.template_diversity_table, templates)[0]))
    seconds, output = best(1, diversity.diversity, examples, templates, diversity.DiversityParams())
    rows.append(("the stage function, whole", seconds))
    with tempfile.TemporaryDirectory() as scratch:
        for name, table in output.tables.items():
            ours, new = best(args.repeat, diversity.metric_charts, table)
            theirs, old = best(args.repeat, figure_per_chart, table, Path(scratch))
            same = list(new.values()) == [path.read_bytes() for path in old]
            rows.append((f"charts of {name}: one figure (same bytes: {same})", ours))
            rows.append((f"charts of {name}: a figure per chart", theirs))
    width = max(len(name) for name, _ in rows)
    print(f"{'part'.ljust(width)}  seconds")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds:7.3f}")


if __name__ == "__main__":
    main()
