"""Text diversity of the benchmark: the four metrics of the PBBQ paper (§3.5, Table 2, Appendix C), on two levels.

The stage: its text units, the tables, their Markdown and plots. Each metric family is a module of its own:
:mod:`pbbq.tasks.diversity.ngrams` (n-gram diversity, C.3, and the type-token ratio, C.2),
:mod:`pbbq.tasks.diversity.self_bleu` (Self-BLEU, C.1) and :mod:`pbbq.tasks.diversity.homogenization`
(BERTScore homogenization, C.4).

Text units.
- Template level, ``table2``, the paper's Table 2: each category's template texts, each written once. For every
  template of the dataset its ambiguous context and its two disambiguating continuations (biased and counter-
  biased), with ``{stereo}``, ``{nonstereo}`` and ``{lex}`` each replaced by the one neutral word
  :data:`NEUTRAL_TOKEN`; a counter-biased continuation that mirrors the biased one is then the same text and
  counts once. Table 2's TTR (0.62-0.85) and Self-BLEU (0.11-0.44) can only come from texts like these.
- Instance level, ``table2_instances``, per config (fa, fa-names, en): the distinct instantiated contexts. They
  repeat their template's words for every entity pair and lexical variant, so Self-BLEU is near 1 and TTR near
  0.02; a figure to compare builds with each other, not with the paper.
Every metric runs on the DISTINCT units of a group (a category, or all of them): Appendix C speaks of the texts
of the dataset, not of its question-answer rows. Units are sorted, so a result does not depend on row order.

What Table 2 can and cannot confirm (checked against its numbers):
- its Average row is the unweighted mean of the 16 category rows for NGD (0.754 → 0.75) and TTR (0.735 →
  0.74), which the tables follow; its Self-BLEU (0.27) and BERTScore (0.5188) averages match neither the
  unweighted (0.26, 0.5205) nor the sample-weighted (0.28, 0.5157) mean of its rows, so the paper's average
  for those two columns cannot be reproduced; the 'Overall' row (all units together) is reported besides.
- its NGD values (0.68-0.80) are below what the C.3 formula, a sum of four ratios (as in Shaib et al.'s
  ``diversity`` package, whose wording C.3 takes), gives on text whose stop-word-free TTR is 0.62-0.85 (the
  unigram ratio alone is then about 0.4 and the longer n-gram ratios are larger), so the paper's table likely
  shows the mean of the four ratios. ``ngd`` is the formula as written; ``ngd_mean`` (ngd / 4) is on the
  table's scale.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import overload

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api.extensions import ExtensionArray
from pandas.arrays import ArrowExtensionArray

from ..core.artifacts import StageOutput
from ..core.inputs import PLACEHOLDER
from ..core.markdown import markdown_table
from ..core.schemas import example_configs
from ..core.stage import SEED, Configs, Stage, Table, rows_of
from ..evaluation.lm_eval_task import config_key
from ..imports import one_import_at_a_time
from ..review.apply import REJECTED, UNREVIEWED
from ..text.languages import language
from .homogenization import (
    DEFAULT_HOMOGENIZATION_LAYERS,
    HomogenizationResult,
    homogenization_with_scorer,
    load_scorer,
)
from .ngrams import NGRAM_ORDER, CodedTexts, code_texts, ngram_diversity_of_units, type_token_ratio_of_units
from .self_bleu import self_bleu_of_units

METRICS = ("ngd", "ttr", "self_bleu", "homogenization")
NEUTRAL_TOKEN = "فلانی"
"""What each placeholder of a template text becomes at the template level: 'so-and-so', one Persian word that
holds the entity's (or the lexical variant's) place, so no n-gram runs across it."""
TEMPLATE_SLOTS = frozenset({"stereo", "nonstereo", "lex"})
TEMPLATE_TEXTS = ("ambiguous", "disambiguated", "disambiguated_counter_biased")
"""The template texts of Table 2, each the column ``<text>_<lang>`` in the template table's language: ``fa`` for
PBBQ's (``04_disambiguate/templates``), ``en`` for BBQ's adapted templates (``03_adapt/texts``)."""
REVIEW_SOURCE = "review"
"""The source of a continuation that failed validation: its template yields no example."""
TEMPLATE_TITLE = "Table 2: diversity of the template texts (the paper's Table 2)"
INSTANCE_TITLE = "Diversity of the instantiated contexts, per config (not the paper's Table 2)"

_METRIC_FIELDS = [
    ("n_units", pa.int64()),
    ("ngd", pa.float64()),
    ("ngd_mean", pa.float64()),
    ("ttr", pa.float64()),
    ("self_bleu", pa.float64()),
    ("homogenization", pa.float64()),
    ("homogenization_note", pa.string()),
]
TABLE2 = pa.schema([("category", pa.string()), ("n_templates", pa.int64()), *_METRIC_FIELDS])
"""The paper's Table 2, on template texts."""
TABLE2_INSTANCES = pa.schema([("config", pa.string()), ("category", pa.string()), *_METRIC_FIELDS])
"""The same metrics on the instantiated contexts, per config."""


@dataclass(frozen=True)
class DiversityParams:
    homogenization_model: str | None = None
    """FaBERT (``sbunlp/fabert``) or any local model path for the Persian texts; None: not computed."""
    homogenization_model_en: str | None = None
    """A model for the English config (FaBERT is Persian); None: not computed."""
    homogenization_num_layers: int = DEFAULT_HOMOGENIZATION_LAYERS
    homogenization_max_pairs: int = 5_000
    """Above this many pairs per group, a seeded sample of pairs is scored (size and seed in the notes)."""
    homogenization_batch_size: int = 64
    seed: int = 0


Homogenizer = Callable[[Sequence[str]], HomogenizationResult]
"""The homogenization of one group of units, its language's model already loaded."""


# ------------------------------------------------------------------------------------------ template texts


def mask_placeholders(text: str, *, where: str) -> str:
    """``text`` with each of ``{stereo}``, ``{nonstereo}`` and ``{lex}`` replaced by :data:`NEUTRAL_TOKEN`.

    Any other brace token is an error naming ``where`` (the table, the template and the column)."""

    def neutral(match: re.Match[str]) -> str:
        if match.group(1) not in TEMPLATE_SLOTS:
            raise ValueError(
                f"{where}: unknown placeholder {match.group(0)!r}; a template text may hold only "
                "{stereo}, {nonstereo} and {lex}"
            )
        return NEUTRAL_TOKEN

    masked = PLACEHOLDER.sub(neutral, text)
    if re.search(r"[{}]", masked):
        raise ValueError(f"{where}: an unmatched brace in {text!r}")
    return masked


def template_language(templates: pd.DataFrame) -> str:
    """The language of a template table: the ``<lang>`` of its one ``ambiguous_<lang>`` column."""
    langs = [column.removeprefix("ambiguous_") for column in templates.columns if column.startswith("ambiguous_")]
    if len(langs) != 1:
        raise ValueError(f"diversity: the templates table has {len(langs)} ambiguous_<lang> columns, not one")
    return langs[0]


def template_units(templates: pd.DataFrame) -> pd.DataFrame:
    """The template-level units of Table 2: for every template of the dataset, its ambiguous context and its two
    disambiguating continuations, placeholders masked (:func:`mask_placeholders`).

    ``templates`` is the ``04_disambiguate/templates`` table. A template is of the dataset when neither of its
    continuations is in review (``disambiguated_source`` and ``counter_biased_source`` not ``review``: a template
    with a continuation in review, or left out by a review round, yields no example). Columns: template_id,
    category, column, text; one row per template and text column, in the table's order. A used template with an
    empty text is an error.
    """
    columns = [f"{text}_{template_language(templates)}" for text in TEMPLATE_TEXTS]
    missing = {"template_id", "category", "disambiguated_source", "counter_biased_source", *columns}
    missing -= set(templates.columns)
    if missing:
        raise ValueError(f"diversity: the 04_disambiguate templates table lacks the columns {sorted(missing)}")
    left_out = {REVIEW_SOURCE, REJECTED, UNREVIEWED}  # and those a review round left out (tasks/review)
    used = templates[
        ~templates["disambiguated_source"].isin(left_out) & ~templates["counter_biased_source"].isin(left_out)
    ]
    rows = []
    for template in used.itertuples(index=False):
        for column in columns:
            where = f"diversity: 04_disambiguate templates, template {template.template_id!r}, column {column!r}"
            text = getattr(template, column)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{where}: empty, yet the template is not in review")
            rows.append(
                {
                    "template_id": template.template_id,
                    "category": template.category,
                    "column": column,
                    "text": mask_placeholders(text, where=where),
                }
            )
    return pd.DataFrame(rows, columns=["template_id", "category", "column", "text"])


# ----------------------------------------------------------------------------------------------- the tables


def _texts_at(column: ExtensionArray, rows: np.ndarray) -> list[str]:
    """The texts of ``rows`` of a column as Python strings; an Arrow column's taken from each of its chunks (Arrow's
    take on a chunked array first joins the chunks: a copy of the whole column for every few thousand texts)."""
    if not isinstance(column, ArrowExtensionArray):
        return np.asarray(column.take(rows), dtype=object).tolist()
    chunks = column.__arrow_array__().chunks
    starts = np.cumsum([0, *(len(chunk) for chunk in chunks)])
    chunk_of = np.searchsorted(starts, rows, side="right") - 1
    texts = np.empty(len(rows), dtype=object)
    for number in np.unique(chunk_of).tolist():
        picked = chunk_of == number
        texts[picked] = chunks[number].take(rows[picked] - starts[number]).to_pylist()
    return texts.tolist()


class UnitTexts(Sequence[str]):
    """The texts of a group's units, each one row of a column (Arrow strings, or Python objects) made a Python string
    only when it is read: tokenised a few thousand at a time, sampled by homogenization."""

    def __init__(self, column: ExtensionArray, rows: np.ndarray) -> None:
        self._column = column
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return _texts_at(self._column, self._rows[index])
        return str(self._column[int(self._rows[index])])

    def of(self, ids: np.ndarray) -> UnitTexts:
        """The texts of the units ``ids``."""
        return UnitTexts(self._column, self._rows[ids])


def _metric_row(
    units: Sequence[str], coded: CodedTexts, ids: np.ndarray, homogenization: Homogenizer
) -> dict[str, object]:
    """The four metrics of one group of distinct, sorted units (and NGD on Table 2's scale, ``ngd_mean``), from
    the units ``ids`` (ascending: in the same order) of the texts ``coded``; each metric's arrays freed before the
    next."""
    hom = homogenization(units)
    ngd = ngram_diversity_of_units(coded, ids)
    return {
        "n_units": len(units),
        "ngd": ngd,
        "ngd_mean": ngd / NGRAM_ORDER,
        "ttr": type_token_ratio_of_units(coded, ids),
        "self_bleu": self_bleu_of_units(coded, ids),
        "homogenization": hom.value,
        "homogenization_note": hom.note,
    }


def _average_row(rows: list[dict[str, object]], counts: Sequence[str]) -> dict[str, object]:
    """Table 2's Average: the unweighted mean of the category rows (NaN rows skipped); its ``counts`` columns
    are the categories' totals."""
    frame = pd.DataFrame(rows)
    computed = int(frame["homogenization"].notna().sum())
    note = (
        f"mean of {computed} of {len(frame)} categories"
        if computed
        else "; ".join(sorted(set(frame["homogenization_note"])))  # each says 'not computed: <why>'
    )
    return {
        **{count: int(frame[count].sum()) for count in counts},
        **{metric: float(frame[metric].mean()) for metric in (*METRICS, "ngd_mean")},
        "homogenization_note": note,
    }


def _group_rows(
    groups: pd.DataFrame,
    text: str,
    lang: str,
    ttr_stop_words: frozenset[str],
    homogenization: Homogenizer,
    counts: Mapping[str, Callable[[pd.DataFrame], int]],
) -> list[dict[str, object]]:
    """One row per category of ``groups`` (sorted by name), the Average row and the Overall row (all distinct
    units of ``groups`` together). Units are the distinct values of its ``text`` column, sorted; ``counts``
    gives extra count columns computed from each category's rows."""
    if groups.empty:
        return []
    unit_language = language(lang)
    # the distinct texts, sorted (Arrow strings sort by code point, as Python's do), each read from a row of the
    # column as it holds them: a config's hundreds of thousands of contexts are never all Python strings, nor copied
    column = groups[text].array
    codes, distinct = pd.factorize(column)
    order = distinct.argsort()
    del distinct
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    unit_ids = rank[codes]  # each row's unit, numbered in sorted order
    row_of = np.empty(len(order), dtype=np.int64)  # a row of each unit's text
    row_of[unit_ids[codes >= 0]] = np.flatnonzero(codes >= 0)
    units = UnitTexts(column, row_of)
    coded = code_texts(units, unit_language.tokenize, unit_language.words, ttr_stop_words)  # Overall reuses them

    def row(positions: np.ndarray) -> dict[str, object]:
        ids = np.unique(unit_ids[positions])  # ascending: the group's units, sorted
        part = groups.iloc[positions] if counts else groups  # the rows are taken only for a count of them
        metrics = _metric_row(units.of(ids), coded, ids, homogenization)
        return {**{name: count(part) for name, count in counts.items()}, **metrics}

    categories = [
        {"category": str(category), **row(positions)}
        for category, positions in sorted(groups.groupby("category").indices.items(), key=lambda item: str(item[0]))
    ]
    average = {"category": "Average", **_average_row(categories, [*counts, "n_units"])}
    return [*categories, average, {"category": "Overall", **row(np.arange(len(groups)))}]


def _homogenizers(params: DiversityParams, langs: Iterable[str], device: str) -> dict[str, Homogenizer]:
    """Per language, the homogenization with its model (``homogenization_model`` for fa, ``_en`` for en; none for
    another language), each loaded once here; without a model, or when it cannot be loaded, every group is not
    computed, with the reason."""
    models = {"fa": params.homogenization_model, "en": params.homogenization_model_en}
    layers = params.homogenization_num_layers
    homogenizers: dict[str, Homogenizer] = {}
    for lang in langs:
        model = models.get(lang)
        scorer = (
            "no homogenization model given for this language"
            if model is None
            else load_scorer(model, layers, params.homogenization_batch_size, device)
        )
        homogenizers[lang] = partial(
            homogenization_with_scorer,
            scorer=scorer,
            model=model or "",
            num_layers=layers,
            max_pairs=params.homogenization_max_pairs,
            seed=params.seed,
        )
    return homogenizers


def _template_table(templates: pd.DataFrame, homogenizers: Mapping[str, Homogenizer]) -> pd.DataFrame:
    units = template_units(templates)
    lang = template_language(templates)
    rows = _group_rows(
        units,
        "text",
        lang,
        language(lang).stop_words | {NEUTRAL_TOKEN},
        homogenizers[lang],
        {"n_templates": lambda part: int(part["template_id"].nunique())},
    )
    return pd.DataFrame(rows, columns=TABLE2.names).astype({"n_templates": "int64", "n_units": "int64"})


def template_diversity_table(
    templates: pd.DataFrame, params: DiversityParams | None = None, *, device: str = "cpu"
) -> pd.DataFrame:
    """The paper's Table 2 (§3.5, Appendix C) on template texts: one row per category, an 'Average' row (the
    unweighted mean of the category rows) and an 'Overall' row (all distinct template texts).

    Units are :func:`template_units`' distinct masked texts of the category, tokenised with hazm; TTR leaves out
    hazm's stop words and :data:`NEUTRAL_TOKEN` (a slot marker, not a word of the template), NGD and Self-BLEU
    keep both. BERTScore uses ``params.homogenization_model`` (FaBERT in the paper; None, the default: not
    computed) and the other homogenization parameters. Columns: those of :data:`TABLE2`: category, n_templates,
    n_units, ngd (C.3's sum, 0-4), ngd_mean (ngd / 4, the scale of Table 2's column), ttr, self_bleu,
    homogenization, homogenization_note.
    """
    return _template_table(
        templates, _homogenizers(params or DiversityParams(), [template_language(templates)], device)
    )


def _instance_table(
    examples: pd.DataFrame, homogenizers: Mapping[str, Homogenizer], order: Sequence[str] = ()
) -> pd.DataFrame:
    missing = {"category", "lang", "variant", "context"} - set(examples.columns)
    if missing:
        raise ValueError(f"diversity: the example table lacks the columns {sorted(missing)}")
    configs = example_configs(examples)
    rows = []
    present = set(configs.unique())  # in ``order`` (the pipeline's), any other as a release orders it
    for config in [*(name for name in order if name in present), *sorted(present - set(order), key=config_key)]:
        part = rows_of(examples[["category", "lang", "context"]], np.flatnonzero(configs == config))  # its units
        lang = part["lang"].iloc[0]
        rows += [
            {"config": config, **row}
            for row in _group_rows(part, "context", lang, language(lang).stop_words, homogenizers[lang], {})
        ]
    return pd.DataFrame(rows, columns=TABLE2_INSTANCES.names).astype({"n_units": "int64"})


# ----------------------------------------------------------------------------------------------- reporting

_HEADERS = {
    "ngd": "NGD ↑",
    "ngd_mean": "NGD ÷ 4 ↑",
    "ttr": "TTR ↑",
    "self_bleu": "Self-BLEU ↓",
    "homogenization": "BERTScore ↓",
}
"""Table 2's metric columns with their headers, in the paper's order (plus NGD on the table's scale)."""
_COUNT_HEADERS = {"n_templates": "# templates", "n_units": "# units"}


def _sections(table: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """The table per config (instance level), or whole (template level: no config column)."""
    if "config" in table.columns:
        return [(str(config), part) for config, part in table.groupby("config", sort=False)]
    return [(None, table)]


def table2_markdown(table: pd.DataFrame, title: str) -> str:
    """Markdown laid out like the paper's Table 2, under ``title``: one table (template level) or one per config
    (instance level): Category, the counts, NGD ↑, NGD ÷ 4 ↑, TTR ↑, Self-BLEU ↓, BERTScore ↓ (4 decimals; 'not
    computed' for NaN), Average and Overall in bold, then each distinct BERTScore note with its rows."""
    counts = [column for column in _COUNT_HEADERS if column in table.columns]
    headers = ["Category", *(_COUNT_HEADERS[column] for column in counts), *_HEADERS.values()]
    sections = [f"## {title}"]
    for config, part in _sections(table):
        lines = [f"### {config}", ""] if config is not None else []
        rows = part[["category", *counts, *_HEADERS]].itertuples(index=False)
        lines.append(markdown_table(headers, rows, bold=("Average", "Overall"), right_from=1))
        notes = part.groupby("homogenization_note", sort=False)["category"].agg(", ".join)
        lines += ["", "BERTScore:"] + [f"- {categories}: {note}" for note, categories in notes.items()]
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def metric_charts(table: pd.DataFrame, prefix: str = "diversity") -> dict[str, bytes]:
    """One PNG per metric, by its file name ``<prefix>_<metric>.png``: a bar per category (and per config, for the
    instance-level table), the Average and Overall rows last; a NaN draws no bar. Agg backend, drawn in memory, no
    timestamp or version in the file, so the same table gives the same bytes.

    The charts of a table differ only in their bar heights and labels, so one figure is drawn for the first and
    changed for each next one (its bars' heights, the y-axis' limits, labels and title, the subplot parameters
    set back before the layout is fitted again): the same bytes as a figure of its own per metric, without
    making the axes, bars and category ticks again for every chart."""
    with one_import_at_a_time():
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure, SubplotParams

    series = table if "config" in table.columns else table.assign(config="templates")
    categories = list(dict.fromkeys(series["category"]))
    configs = list(dict.fromkeys(series["config"]))
    level = "instances" if "config" in table.columns else "templates"
    figure = Figure(figsize=(max(6.0, 0.25 * len(categories) * len(configs) + 2.5), 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    width = 0.8 / max(len(configs), 1)  # an empty table draws empty axes
    bars = {
        config: axes.bar(np.arange(len(categories)) + k * width, np.zeros(len(categories)), width, label=config)
        for k, config in enumerate(configs)
    }
    ticks = np.arange(len(categories)) + 0.4 - width / 2
    axes.set_xticks(ticks, categories, rotation=60, ha="right")
    if configs:  # an empty table (no example was kept) has nothing to name
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    charts = {}
    for metric in METRICS:
        wide = series.pivot(index="category", columns="config", values=metric).reindex(categories)
        for config, container in bars.items():
            for bar, height in zip(container, wide[config].to_numpy(dtype=float), strict=True):
                bar.set_height(height)
        # the limits a new axes would take: its unit box, autoscaled to the bars (if any), widened to the ticks
        axes.set_xlim(0.0, 1.0, auto=None)
        axes.set_ylim(0.0, 1.0, auto=None)
        axes.relim()
        if configs:
            axes.autoscale()
        if categories:
            axes.xaxis.set_view_interval(ticks[0], ticks[-1])
        axes.set_ylabel(_HEADERS[metric])
        axes.set_title(f"{_HEADERS[metric]} per category ({level})")
        figure.subplots_adjust(**vars(SubplotParams()))  # a new figure's layout, for tight_layout to fit anew
        figure.tight_layout()
        png = io.BytesIO()
        figure.savefig(png, format="png", metadata={"Software": None})
        charts[f"{prefix}_{metric}.png"] = png.getvalue()
    return charts


# ----------------------------------------------------------------------------------------------- the stage


def _records(table: pd.DataFrame) -> list[dict[str, object]]:
    return table.astype(object).where(table.notna(), None).to_dict(orient="records")


def diversity(
    examples: pd.DataFrame, templates: pd.DataFrame, params: DiversityParams, configs: Iterable[str] = ()
) -> StageOutput:
    """Table 2 twice: ``table2``, the paper's, on the template texts of ``templates`` (the ``04_disambiguate``
    templates table), and ``table2_instances``, on the contexts of ``examples`` per config, in the order the
    pipeline declares its ``configs``; each as parquet, CSV, Markdown and a bar chart per metric. Each BERTScore
    model is loaded once for both tables."""
    homogenizers = _homogenizers(params, dict.fromkeys(["fa", "en", *examples["lang"].unique()]), "cpu")
    table = _template_table(templates, homogenizers)
    instances = _instance_table(examples, homogenizers, tuple(configs))
    in_review = (templates["disambiguated_source"] == REVIEW_SOURCE) | (
        templates["counter_biased_source"] == REVIEW_SOURCE
    )
    both = pd.concat([table["homogenization"], instances["homogenization"]])
    report = {
        "stage": "diversity",
        "parameters": asdict(params),
        "counts": {
            "in": len(examples),
            "out": len(table) + len(instances),
            "templates": len(templates),
            "templates_used": int((~in_review).sum()),
            "templates_in_review": sorted(templates.loc[in_review, "template_id"]),
            "table2_rows": len(table),
            "table2_instances_rows": len(instances),
        },
        "dropped": {"total": 0, "by_reason": {}},
        "table2": _records(table),
        "table2_instances": _records(instances),
        "homogenization": {"computed_rows": int(both.notna().sum()), "not_computed_rows": int(both.isna().sum())},
    }
    return StageOutput(
        tables={"table2": table, "table2_instances": instances},
        schemas={"table2": TABLE2, "table2_instances": TABLE2_INSTANCES},
        report=report,
        csv=("table2", "table2_instances"),
        files={
            "table2.md": table2_markdown(table, TEMPLATE_TITLE).encode("utf-8"),
            "table2_instances.md": table2_markdown(instances, INSTANCE_TITLE).encode("utf-8"),
            **metric_charts(table, "diversity"),
            **metric_charts(instances, "diversity_instances"),
        },
    )


STAGE = Stage(
    "08_diversity",
    "diversity",
    diversity,
    inputs={
        "examples": Configs(),
        "templates": Table("04_disambiguate", "templates"),
        "configs": Configs(declared=True),
    },
    outputs={"table2": TABLE2, "table2_instances": TABLE2_INSTANCES},
    params=DiversityParams,
    ranges={"homogenization_num_layers": (1, None), "homogenization_max_pairs": (1, None)}
    | {"homogenization_batch_size": (1, None), "seed": SEED},
    words=("examples", "rows of Table 2", "not measured"),
    artifacts={
        "table-2": ("table2", None, "Diversity per category on template texts (Table 2)"),
        "table-2-instances": ("table2_instances", None, "Diversity per category and config, on instances"),
    },
    imports=("hazm", "sacrebleu.metrics.bleu", "matplotlib.figure", "matplotlib.backends.backend_agg"),
)
