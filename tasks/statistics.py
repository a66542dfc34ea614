"""Statistics of a build: the PBBQ paper's Table 1 (templates and samples per category, §3.5), the funnel
from surveyed stereotypes to examples, and how examples spread over conditions, polarities, assignments and
answer positions."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from tasks.artifacts import StageOutput
from tasks.caching import stage_task
from tasks.schemas import CATEGORIES, example_configs

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


def table1(examples: pd.DataFrame) -> pd.DataFrame:
    """Templates and samples per category of every config (Table 1): all 16 categories in the paper's order
    and a Total row per config. A template counts when it yields examples of the config."""
    parts = []
    frame = examples.assign(config=example_configs(examples))
    for config in dict.fromkeys(frame["config"]):
        part = frame[frame["config"] == config]
        table = pd.DataFrame({"config": config, "category": list(CATEGORIES)})
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
    return pd.concat(parts, ignore_index=True)


def funnel(
    stereotypes: pd.DataFrame, templates: pd.DataFrame, examples: pd.DataFrame, candidates: int | None = None
) -> pd.DataFrame:
    """Counts at every step: candidates → surveyed → accepted → templates → gated → instantiated templates →
    examples. ``candidates`` is the crawl's count when a crawl ran; otherwise the surveyed count stands in."""
    steps = [
        ("candidates", candidates if candidates is not None else len(stereotypes)),
        ("surveyed", len(stereotypes)),
        ("accepted", int(stereotypes["kept"].sum())),
        ("templates", len(templates)),
        ("gated", int(templates["kept"].sum())),
        ("instantiated_templates", int(examples["template_id"].nunique())),
        ("examples", len(examples)),
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


def statistics(stereotypes: pd.DataFrame, templates: pd.DataFrame, examples: pd.DataFrame) -> StageOutput:
    original = examples.query("lang == 'fa' and variant == 'original'")
    tables = {
        "table1": table1(examples),
        "funnel": funnel(stereotypes, templates, original),
        "distribution": distribution(examples),
    }
    report = {
        "stage": "statistics",
        "counts": {"in": len(examples), "out": len(examples)},
        "dropped": {"total": 0, "by_reason": {}},
        "table1": tables["table1"].to_dict(orient="records"),
        "funnel": tables["funnel"].to_dict(orient="records"),
    }
    return StageOutput(
        tables=tables, schemas={"table1": TABLE1, "funnel": FUNNEL, "distribution": DISTRIBUTION}, report=report
    )


statistics_task = stage_task(statistics)
