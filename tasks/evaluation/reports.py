"""The evaluation's reports: PBBQ's Table 3 and Table 4, BBQ's bias scores, ε_c and the KL, as
tables, Markdown laid out like the papers' and plots.

- Table 3 (PBBQ §4.2.1): per model and config, averaged over the categories: ambiguous accuracy, bias score
  (β_amb, Eq. 2, bounded; the log-ratio as written beside it) and uncertainty; disambiguated accuracy, bias score
  (Δbias, Eq. 3) and uncertainty.
- Table 4 (PBBQ §4.2.2): the same per config and category, averaged over the models.
- BBQ scores (the name-proxy paper's Tables 3–5): s_AMB, its unscaled form and s_DIS per model and config.

Every figure carries its 95 % bootstrap interval over templates (:mod:`pbbq.tasks.evaluation.metrics`). Plots: the bias
by category per model with its intervals, and accuracy ambiguous against disambiguated per model; Agg backend, no
timestamp in the file, so the same table gives the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..core.markdown import markdown_table
from ..core.schemas import NAMES_SUFFIX
from ..imports import one_import_at_a_time
from ..text.categories import CATEGORIES
from .metrics import AVERAGE

TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("acc_amb", "Amb. Acc"),
    ("beta_amb_bounded", "Amb. Bias-Score (Eq. 2, bounded)"),
    ("beta_amb", "Amb. Bias (Eq. 2 as written, log-ratio)"),
    ("uncertainty_amb", "Amb. Uncertainty"),
    ("acc_dis", "Dis. Acc"),
    ("delta_bias", "Dis. Bias-Score (Δbias, Eq. 3)"),
    ("uncertainty_dis", "Dis. Uncertainty"),
)
"""The columns of Tables 3 and 4, in the paper's order, with the bias variant the paper's figures resemble first."""
BBQ_COLUMNS: tuple[tuple[str, str], ...] = (
    ("acc_amb", "Amb. Acc"),
    ("s_amb", "s_AMB (scaled)"),
    ("s_amb_unscaled", "s_AMB unscaled"),
    ("acc_dis", "Dis. Acc"),
    ("s_dis", "s_DIS"),
    ("unparseable", "Unparseable share"),
)


def _with_intervals(metrics: Sequence[str]) -> list[str]:
    return [f"{metric}{suffix}" for metric in metrics for suffix in ("", "_low", "_high")]


def _schema(keys: Sequence[str], metrics: Sequence[str]) -> pa.Schema:
    fields = [(key, pa.string()) for key in keys] + [("n_examples", pa.int64()), ("n_templates", pa.int64())]
    return pa.schema(fields + [(column, pa.float64()) for column in _with_intervals(metrics)])


TABLE3 = _schema(("model", "config"), [metric for metric, _ in TABLE_COLUMNS])
TABLE4 = _schema(("config", "category", "model"), [metric for metric, _ in TABLE_COLUMNS])
BBQ_TABLE = _schema(("model", "config"), [metric for metric, _ in BBQ_COLUMNS])


def table3(scores: pd.DataFrame) -> pd.DataFrame:
    """PBBQ Table 3 from :func:`pbbq.tasks.evaluation.metrics.score_table`: its per-model rows averaged over the
    categories."""
    rows = scores[scores["category"] == AVERAGE]
    return rows[TABLE3.names].sort_values(["config", "model"], kind="stable").reset_index(drop=True)


def table4(categories: pd.DataFrame) -> pd.DataFrame:
    """PBBQ Table 4 from :func:`pbbq.tasks.evaluation.metrics.category_table`: per config and category, over the
    models."""
    ranked = categories.assign(_order=categories["category"].map(_category_order))
    return ranked.sort_values(["config", "_order"], kind="stable")[TABLE4.names].reset_index(drop=True)


def _category_order(category: str) -> tuple[int, str]:
    """The paper's order of the 16 categories (§3.1), any other after them, the average last."""
    if category == AVERAGE:
        return (len(CATEGORIES) + 1, category)
    return (CATEGORIES.index(category) if category in CATEGORIES else len(CATEGORIES), category)


def bbq_table(scores: pd.DataFrame) -> pd.DataFrame:
    """BBQ's bias scores per model and config (over all categories, each weighing the same)."""
    rows = scores[scores["category"] == AVERAGE]
    return rows[BBQ_TABLE.names].sort_values(["config", "model"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------- Markdown


def _cell(value: float, low: float, high: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = "∞" if value == math.inf else _number(value)
    if not (math.isnan(low) or math.isnan(high)):
        text += f" [{_number(low)}, {_number(high)}]"
    return text


def _number(value: float) -> str:
    """Four decimals, without the sign of a value that rounds to zero."""
    text = f"{value:.4f}"
    return text[1:] if text == "-0.0000" else text


def _markdown(frame: pd.DataFrame, keys: Sequence[tuple[str, str]], columns: Sequence[tuple[str, str]]) -> str:
    """The table's keys, then each metric with its interval; the average over categories (Table 4) in bold."""
    rows = [
        [*(row[key] for key, _ in keys), *(_cell(row[m], row[f"{m}_low"], row[f"{m}_high"]) for m, _ in columns)]
        for row in frame.to_dict("records")
    ]
    names = [key for key, _ in keys]
    return markdown_table(
        [label for _, label in (*keys, *columns)],
        rows,
        bold=(AVERAGE,) if "category" in names else (),
        label=names.index("category") if "category" in names else 0,
    )


INTERVAL_NOTE = (
    "Each figure: value [95 % bootstrap interval over templates]. The bias score the paper's figures resemble is "
    "Eq. 2 on normalised probabilities (bounded); Eq. 2 as written, a log-ratio, is beside it. 'n/a': nothing to "
    "compute it on (no disambiguated row, no log-likelihoods for a generation task)."
)


EPSILON_NEEDS = "it needs a config and its name-proxy variant (`en` and `en-names`, say) of the same model"
"""What ε_c is computed on (:func:`pbbq.tasks.evaluation.metrics.names_pairs`), said when it is not."""
EPSILON_TITLE = "Error Retention Ratio ε_c (each `-names` config against the config it was made from"


def epsilon_markdown(epsilon: pd.DataFrame) -> str:
    """ε_c per model and context condition (from :func:`pbbq.tasks.evaluation.metrics.error_retention`), or why not."""
    if epsilon.empty:
        return f"Not computed: {EPSILON_NEEDS}."
    headers = ["Model", "Configs", "Context", "ε_c (mean over sub-seeds)", "std", "per sub-seed", "acc names"]
    headers.append("acc explicit")
    rows = [
        [
            row["model"],
            f"{row['config']} against {row['config'].removesuffix(NAMES_SUFFIX)}",
            row["context_condition"],
            _cell(row["epsilon"], row["epsilon_low"], row["epsilon_high"]),
            "n/a" if math.isnan(row["epsilon_std"]) else f"{row['epsilon_std']:.4f}",
            row["per_seed"],
            f"{row['acc_names']:.4f}",
            f"{row['acc_explicit']:.4f}",
        ]
        for row in epsilon.to_dict("records")
    ]
    return markdown_table(headers, rows)


SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("acc_amb", "Amb. Acc"),
    ("beta_amb_bounded", "Amb. Bias (Eq. 2, bounded)"),
    ("s_amb", "s_AMB"),
    ("acc_dis", "Dis. Acc"),
    ("delta_bias", "Δbias (Eq. 3)"),
    ("s_dis", "s_DIS"),
)
"""What ``pbbq evaluate`` prints per model and config: PBBQ's and BBQ's headline scores."""


def scores_summary(t3: pd.DataFrame, bbq: pd.DataFrame, epsilon: pd.DataFrame) -> str:
    """The scores ``pbbq evaluate`` ends with: per model and config, accuracy and bias (Table 3 and BBQ's
    scores, over the categories) with their intervals, then ε_c."""
    merged = t3.merge(bbq[["model", "config", *_with_intervals(("s_amb", "s_dis"))]], on=["model", "config"])
    keys = (("model", "Model"), ("config", "Config"), ("n_examples", "Examples"))
    return "\n\n".join(
        [
            "Scores (value [95 % bootstrap interval over templates], averaged over categories):",
            _markdown(merged, keys, SUMMARY_COLUMNS),
            f"{EPSILON_TITLE}):",
            epsilon_markdown(epsilon),
        ]
    )


def reports_markdown(
    t3: pd.DataFrame,
    t4: pd.DataFrame,
    bbq: pd.DataFrame,
    epsilon: pd.DataFrame,
    kl: pd.DataFrame,
    notes: Sequence[str] = (),
) -> str:
    """Tables 3 and 4, BBQ's scores, ε_c and the KL in one Markdown document."""
    parts = [
        "# PBBQ evaluation",
        INTERVAL_NOTE,
        "## Table 3: accuracy, bias score and uncertainty per model (averaged over categories)",
        _markdown(t3, (("model", "Model"), ("config", "Config")), TABLE_COLUMNS),
        "## Table 4: accuracy, bias score and uncertainty per category (averaged over models)",
        _markdown(t4, (("config", "Config"), ("category", "Category")), TABLE_COLUMNS),
        "## BBQ bias scores (Parrish et al.; the name-proxy paper's Eq. 1–2)",
        _markdown(bbq, (("model", "Model"), ("config", "Config")), BBQ_COLUMNS),
        f"## {EPSILON_TITLE}; the name-proxy paper §4.3.3)",
    ]
    parts.append(epsilon_markdown(epsilon))
    parts.append("## KL divergence to the survey (PBBQ §5)")
    if kl.empty:
        parts.append("Not computed: no survey table, or no ambiguous multiple-choice result (see the notes).")
    else:
        parts.append(f"Direction: {kl['direction'].iloc[0]}; mean over stereotypes.")
        rows = [
            [r["model"], r["config"], _cell(r["kl"], r["kl_low"], r["kl_high"]), r["n_stereotypes"]]
            for r in kl.to_dict("records")
        ]
        parts.append(markdown_table(["Model", "Config", "KL", "stereotypes"], rows))
    if notes:
        parts += ["## Notes", "\n".join(f"- {note}" for note in notes)]
    return "\n\n".join(parts) + "\n"


# ------------------------------------------------------------------------------------------------- plots


def _png(figure: object) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})  # type: ignore[attr-defined]
    return buffer.getvalue()


def _errors(part: pd.DataFrame, metric: str) -> np.ndarray:
    value = part[metric].to_numpy(dtype=float)
    low = np.nan_to_num(value - part[f"{metric}_low"].to_numpy(dtype=float), nan=0.0)
    high = np.nan_to_num(part[f"{metric}_high"].to_numpy(dtype=float) - value, nan=0.0)
    return np.vstack([np.clip(low, 0, None), np.clip(high, 0, None)])


def plot_bias_by_category(scores: pd.DataFrame, config: str) -> bytes:
    """Bias by category per model with intervals: β_amb (bounded) and Δbias, one bar per model."""
    with one_import_at_a_time():
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    part = scores[(scores["config"] == config) & (scores["category"] != AVERAGE)]
    categories = sorted(part["category"].unique(), key=_category_order)
    models = sorted(part["model"].unique())
    figure = Figure(figsize=(11, max(3.5, 0.35 * len(categories) * max(len(models), 1) + 1.5)))
    FigureCanvasAgg(figure)
    height = 0.8 / max(len(models), 1)
    for panel, (metric, title) in enumerate(
        (("beta_amb_bounded", "Ambiguous: β_amb (Eq. 2, bounded)"), ("delta_bias", "Disambiguated: Δbias (Eq. 3)"))
    ):
        axes = figure.add_subplot(1, 2, panel + 1)
        for k, model in enumerate(models):
            rows = part[part["model"] == model].set_index("category").reindex(categories).reset_index()
            positions = np.arange(len(categories)) + k * height
            values = np.nan_to_num(rows[metric].to_numpy(dtype=float), nan=0.0)
            axes.barh(positions, values, height, xerr=_errors(rows, metric), label=model, capsize=2)
        axes.set_yticks(np.arange(len(categories)) + 0.4 - height / 2, categories if panel == 0 else [])
        axes.axvline(0, color="black", linewidth=0.8)
        axes.set_title(title)
        axes.invert_yaxis()
    figure.axes[-1].legend(loc="lower right", fontsize="small")
    figure.suptitle(f"Bias by category, config {config} (95 % intervals over templates)")
    figure.tight_layout()
    return _png(figure)


def plot_accuracy(t3: pd.DataFrame, config: str) -> bytes:
    """Accuracy in ambiguous against disambiguated contexts per model, with intervals."""
    with one_import_at_a_time():
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    part = t3[t3["config"] == config].reset_index(drop=True)
    figure = Figure(figsize=(max(5.0, 1.2 * len(part) + 2), 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    positions = np.arange(len(part))
    for offset, (metric, label) in enumerate((("acc_amb", "ambiguous"), ("acc_dis", "disambiguated"))):
        values = np.nan_to_num(part[metric].to_numpy(dtype=float), nan=0.0)
        axes.bar(positions + offset * 0.4, values, 0.4, yerr=_errors(part, metric), label=label, capsize=3)
    axes.set_xticks(positions + 0.2, part["model"].tolist(), rotation=30, ha="right")
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("accuracy (Eq. 1)")
    axes.set_title(f"Accuracy, config {config}")
    axes.legend()
    figure.tight_layout()
    return _png(figure)
