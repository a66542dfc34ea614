"""Statistics of a build: the PBBQ paper's Table 1 (templates and samples per category, §3.5), the funnel
from crawled posts to examples, and how examples spread over conditions, polarities, assignments and
answer positions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from .core.artifacts import StageOutput
from .core.schemas import empty_frame, example_configs
from .core.soundness import PBBQ_SOURCE, SOUNDNESS, refuse_unsound, soundness, source_entities
from .core.stage import Configs, ReleaseConfig, Report, RunValue, Stage, Table
from .crawl import crawl_counts
from .text.categories import CATEGORIES
from .text.cues import CONFOUNDS

TABLE1 = pa.schema(
    [("config", pa.string()), ("category", pa.string()), ("templates", pa.int64()), ("samples", pa.int64())]
)
FUNNEL = pa.schema([("step", pa.string()), ("count", pa.int64())])
DISTRIBUTION = pa.schema(
    [
        ("config", pa.string()),
        ("dimension", pa.string()),
        ("value", pa.string()),
        ("examples", pa.int64()),
        ("share", pa.float64()),
    ]
)
DIMENSIONS = ("context_condition", "question_polarity", "assignment", "label", "target_loc", "entity_order")


def listed_categories(examples: pd.DataFrame, categories: Sequence[str] = CATEGORIES) -> list[str]:
    """Table 1's categories: ``categories`` (all 16 of the paper, in its order), then any other category of the
    examples, sorted."""
    return [*categories, *sorted(set(examples["category"].unique()) - set(categories))]


def table1(examples: pd.DataFrame, categories: Sequence[str] = CATEGORIES) -> pd.DataFrame:
    """Templates and samples per category of every config (Table 1): :func:`listed_categories` and a Total row
    per config. A template counts when it yields examples of the config. No examples: no rows."""
    parts = []
    frame = examples.assign(config=example_configs(examples))
    listed = listed_categories(frame, categories)
    for config in dict.fromkeys(frame["config"]):
        part = frame[frame["config"] == config]
        table = pd.DataFrame({"config": config, "category": listed})
        table["templates"] = table["category"].map(part.groupby("category")["template_id"].nunique())
        table["samples"] = table["category"].map(part.groupby("category").size())
        table = table.fillna({"templates": 0, "samples": 0}).astype({"templates": "int64", "samples": "int64"})
        total = {
            "config": config,
            "category": "Total",
            "templates": part["template_id"].nunique(),
            "samples": len(part),
        }
        parts += [table, pd.DataFrame([total])]
    return pd.concat(parts, ignore_index=True) if parts else empty_frame(TABLE1)


def funnel(
    stereotypes: pd.DataFrame | None,
    templates: pd.DataFrame,
    examples: pd.DataFrame,
    dropped_pairs: pd.DataFrame | None,
    crawl: Mapping[str, int] | None = None,
    extra: Sequence[tuple[str, int]] = (),
) -> pd.DataFrame:
    """Counts at every step: crawled posts (``posts``) → candidates → candidate clusters (what the experts review) →
    surveyed → accepted → templates → gated → instantiated templates → entity pairs → the pairs each confound gate
    drops (every gate of :data:`pbbq.tasks.text.cues.CONFOUNDS`, 0 included) → pairs without a confound →
    examples (fa) → examples of every other config → ``extra``, the steps of stages that count their own
    (``Stage.counts``). ``crawl`` holds the crawl's counts (``crawled_posts``,
    ``candidates``, ``clusters``: ``pbbq.tasks.crawl.crawl_counts``); when no crawl ran, the surveyed count stands in
    for the candidates.

    A pipeline without the survey (the adaptation path, PakBBQ §3.1) counts its own steps up to the source
    examples (``extra``), followed by the examples of every config translated from them."""
    names = example_configs(examples)
    configs = names.value_counts()
    if stereotypes is None or dropped_pairs is None:
        sources = set(names[examples["source_example_id"].isna().to_numpy()])  # their names, never their rows
        return pd.DataFrame(
            [
                *extra,
                *((f"examples_{config}", int(configs[config])) for config in configs.index if config not in sources),
            ],
            columns=["step", "count"],
        )
    original = examples.query("lang == 'fa' and variant == 'original'")
    built_pairs = len(original[["template_id", "stereo_entity", "nonstereo_entity"]].drop_duplicates())
    dropped = dropped_pairs["reason"].value_counts()
    steps = [
        *(
            [
                ("posts", crawl["crawled_posts"]),
                ("candidates", crawl["candidates"]),
                ("candidate_clusters", crawl["clusters"]),
            ]
            if crawl is not None
            else [("candidates", len(stereotypes))]
        ),
        ("surveyed", len(stereotypes)),
        ("accepted", int(stereotypes["kept"].sum())),
        ("templates", len(templates)),
        ("gated", int(templates["kept"].sum())),
        ("instantiated_templates", int(original["template_id"].nunique())),
        ("entity_pairs", built_pairs + len(dropped_pairs)),
        *(
            (f"pairs_dropped_{reason}", int(dropped.get(reason, 0)))
            for reason in dict.fromkeys([*CONFOUNDS, *dropped.index])
        ),
        ("pairs_without_confound", built_pairs),
        ("examples", len(original)),
        *((f"examples_{config}", int(configs[config])) for config in configs.index if config != "fa"),
        *extra,
    ]
    return pd.DataFrame(steps, columns=["step", "count"])


def distribution(examples: pd.DataFrame) -> pd.DataFrame:
    """Examples per config and value of each dimension, with the share within the config."""
    frame = examples.assign(config=example_configs(examples))
    parts = []
    for dimension in DIMENSIONS:
        counts = frame.groupby(["config", dimension]).size().rename("examples").reset_index()
        counts["share"] = counts["examples"] / counts.groupby("config")["examples"].transform("sum")
        parts.append(
            counts.rename(columns={dimension: "value"}).assign(
                dimension=dimension, value=lambda d: d["value"].astype(str)
            )
        )
    return pd.concat(parts, ignore_index=True)[DISTRIBUTION.names]


def by_dimension(distributions: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The :func:`distribution` tables of some configs as one, in the order the whole table has: dimension by
    dimension (:data:`DIMENSIONS`), configs sorted within each (each config's values in their own order)."""
    frame = pd.concat(distributions, ignore_index=True)
    rank = frame["dimension"].map(DIMENSIONS.index)
    return frame.assign(rank=rank).sort_values(["rank", "config"], kind="stable").drop(columns="rank")


def _rows_where(frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """The rows of ``frame`` where ``mask`` holds: a slice when they are one block (a config's rows of the stacked
    examples are), taken otherwise; their labels either way."""
    positions = np.flatnonzero(mask)
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        return frame.iloc[positions[0] : positions[-1] + 1]
    return frame[mask]


def source_language(configs: Mapping[str, ReleaseConfig]) -> str:
    """The language of the config the others are made from (:attr:`ReleaseConfig.made_from` None), PBBQ's Persian
    when no config is declared."""
    return next((config.language for config in configs.values() if config.made_from is None), PBBQ_SOURCE)


def statistics(
    templates: pd.DataFrame,
    examples: pd.DataFrame,
    stereotypes: pd.DataFrame | None = None,
    dropped_pairs: pd.DataFrame | None = None,
    crawl: Mapping[str, int] | None = None,
    extra_funnel: Sequence[tuple[str, int]] = (),
    categories: Sequence[str] = CATEGORIES,
    release_configs: Mapping[str, ReleaseConfig] | None = None,
) -> StageOutput:
    """Table 1 over ``categories`` (:func:`table1`), the funnel, the distribution and the soundness checks; the gate
    before the release: a config holding a row that fails a check of
    :data:`~pbbq.tasks.core.soundness.RELEASE_BLOCKERS` fails the build
    (:func:`~pbbq.tasks.core.soundness.refuse_unsound`).

    Each config is counted and checked on its own rows, one config at a time: the stage holds one config's rows
    beside the stacked examples, not a copy of all of them. The text columns stay as they come (Arrow-backed
    strings from a stage's parquet): every count and check is a vectorised one, none reads a value as a Python
    string. The soundness checks read the examples as written in the source config's language (the config
    ``release_configs`` declares made from no other; PBBQ's Persian when none is given)."""
    configs = example_configs(examples)
    listed = listed_categories(examples, categories)
    source = source_language(release_configs or {})
    sources = source_entities(examples, source)
    for config in dict.fromkeys(configs):  # the gate first: nothing is counted for a build that must fail
        refuse_unsound(config, _rows_where(examples, (configs == config).to_numpy()))
    parts: dict[str, list[pd.DataFrame]] = {"table1": [], "distribution": [], "soundness": []}
    for config in dict.fromkeys(configs) or [None]:  # None: no examples, the tables of an empty one
        part = examples if config is None else _rows_where(examples, (configs == config).to_numpy())
        parts["table1"].append(table1(part, listed))
        parts["distribution"].append(distribution(part))
        parts["soundness"].append(soundness(part, templates, sources, source))
    tables = {
        "table1": pd.concat(parts["table1"], ignore_index=True),
        "funnel": funnel(stereotypes, templates, examples, dropped_pairs, crawl, extra_funnel),
        "distribution": by_dimension(parts["distribution"]).reset_index(drop=True),
        "soundness": pd.concat(parts["soundness"], ignore_index=True),
    }
    broken = tables["soundness"].query("violations > 0")
    report = {
        "stage": "statistics",
        "counts": {"in": len(examples), "out": len(examples)},
        "dropped": {"total": 0, "by_reason": {}},
        "table1": tables["table1"].to_dict(orient="records"),
        "funnel": tables["funnel"].to_dict(orient="records"),
        "soundness": {f"{r.config}/{r.check}": r.violations for r in tables["soundness"].itertuples()},
        "warnings": [f"{r.violations} of {r.examples} {r.config} examples fail {r.check}" for r in broken.itertuples()],
    }
    return StageOutput(
        tables=tables,
        schemas={"table1": TABLE1, "funnel": FUNNEL, "distribution": DISTRIBUTION, "soundness": SOUNDNESS},
        report=report,
    )


STAGE = Stage(
    "09_statistics",
    "statistics",
    statistics,
    inputs={
        "stereotypes": Table("02_survey", "stereotypes"),
        "templates": Table("03_kappa_gate", "templates"),
        "examples": Configs(),
        "dropped_pairs": Table("05_instantiate", "dropped_pairs"),
        "crawl": Report("01_crawl", crawl_counts),
        "extra_funnel": RunValue("extra_funnel", describes=lambda stage: stage.counts is not None),
        "release_configs": Configs(declared=True),
    },
    outputs={"table1": TABLE1, "funnel": FUNNEL, "distribution": DISTRIBUTION, "soundness": SOUNDNESS},
    words=("examples", "examples counted", "not counted"),
    artifacts={
        "funnel": ("funnel", None, "From surveyed stereotypes to examples, this build"),
        "table-1": ("table1", None, "Templates and samples per category and config (Table 1)"),
    },
)
