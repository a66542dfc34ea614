"""``RUN/audit.html``: the audit of a run as one self-contained page a curator reads (docs/architecture.md §5).

A summary on top (run, status, code, input hashes, warnings), the funnel from crawled posts to published rows
per config, each stage's counts in words, its drops grouped by reason with the first rows of each (every row
stays in the parquet the page links to), the soundness checks, the charts (acceptance per stereotype with its
Wilson interval and the 60 % line by category, PBBQ §3.2; kappa against mean relevance per template with both
thresholds, §3.3; Table 1 and Table 2, §3.5; answer-position balance) and the changes since the previous completed
run. Charts are matplotlib SVG inlined in the page; Persian cells are right-to-left (``dir="auto"``) in a font
stack with Persian glyphs.
"""

from __future__ import annotations

import colorsys
import html
import io
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ...tasks.core.artifacts import atomic_write_bytes
from ...tasks.core.run_folder import run_status
from ...tasks.imports import one_import_at_a_time
from ...tasks.review.report import audit_lines
from ...tasks.survey_filter import SurveyParams
from ...tasks.text.categories import CATEGORIES
from .audit import (
    PathWords,
    ReasonDrops,
    drops,
    funnel,
    llm_usage,
    path_words,
    soundness,
    stage_lines,
    survey_margin,
    warnings,
    words,
)
from .diff import diff_runs, no_previous_run
from .runs import (
    config_hash,
    example_tables,
    is_adaptation,
    manifest,
    previous_completed,
    read_table,
    stage_folder,
    stage_report,
    table_path,
)

FONTS = '"Vazirmatn", "Noto Sans Arabic", "Noto Naskh Arabic", "DejaVu Sans", "Tahoma", sans-serif'
"""Fonts with Persian glyphs first; DejaVu Sans (on most Linux systems) covers Persian too."""
CELL_WIDTH = 100
"""Characters of a text cell shown in the first rows of a reason; the whole text is its tooltip."""
KEPT, STOPPED = "#2a6f97", "#c1121f"
CONFIG_PALETTE = (
    "#2a6f97", "#e09f3e", "#6a994e", "#9d4edd", "#c1121f", "#14746f", "#f72585", "#7f5539", "#4361ee", "#b5a642",
    "#5c677d", "#ff7b00", "#2b9348", "#8338ec", "#ef476f", "#06aed5", "#a44a3f", "#3a0ca3", "#90a955", "#d4a373",
)  # fmt: skip
"""The charts' colours, one per config in the order the run builds them (the source, its names variant, then each
target); a run with more configs than these draws the rest in evenly spaced hues."""
OUTCOME_COLOURS = {
    "kept": KEPT,
    "kappa_below_threshold": STOPPED,
    "relevance_below_threshold": "#e09f3e",
    "stereotype_not_accepted": "#8d99ae",
}
TEMPLATE_LEVEL_NOTE = (
    "Table 2's measures{cite}: each category's template texts, each written once, with the "
    "placeholders replaced by one neutral word."
)
INSTANCE_LEVEL_NOTE = (
    "Instance level: the distinct instantiated contexts of each config. They repeat their template's words for "
    "every entity pair and lexical variant, so Self-BLEU is near 1 and TTR near 0.02 by construction; compare "
    "builds with these figures, not the paper."
)
METRICS = (("ngd_mean", "NGD (mean of n=1..4)"), ("ngd", "NGD"), ("ttr", "TTR"), ("self_bleu", "Self-BLEU"))
CSS = f"""
body{{font-family:{FONTS};margin:1.5em auto;max-width:1200px;color:#222;line-height:1.45}}
h1{{margin-bottom:.2em}} h2{{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.8em}}
table{{border-collapse:collapse;font-size:13px;margin:.4em 0}}
td,th{{border:1px solid #ccc;padding:3px 7px;vertical-align:top}} th{{background:#f3f3f3;text-align:start}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}}
.status-completed{{color:#2b7a0b}} .status-failed,.status-incomplete{{color:{STOPPED}}}
.warn{{background:#fff4e5;border-left:4px solid #e09f3e;padding:.3em .8em;margin:.2em 0}}
.bar{{width:320px}} .bar span{{display:block;height:12px;background:{KEPT}}}
tr.drop td{{color:#777}} tr.drop .bar span{{background:{STOPPED}}}
tr.published .bar span{{background:#6a994e}} tr.config .bar span{{background:#e09f3e}}
.chart svg{{max-width:100%;height:auto}} .note{{color:#555;font-size:13px}}
nav a{{margin-right:1em}} code{{font-size:12px}}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _format(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return "; ".join(_format(v) for v in value)
    return str(value)


def table_html(frame: pd.DataFrame, truncate: int | None = None) -> str:
    """A table with every cell ``dir="auto"`` (Persian reads right to left, English left to right), numbers
    right-aligned, and long texts cut at ``truncate`` characters with the whole text as the tooltip."""
    if frame.empty:
        return "<p>none</p>"
    head = "".join(f"<th>{_esc(c)}</th>" for c in frame.columns)
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for value in record:
            text = _format(value)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if truncate and len(text) > truncate:
                cells.append(f'<td dir="auto" title="{_esc(text)}">{_esc(text[: truncate - 1])}…</td>')
            else:
                cells.append(f'<td dir="auto"{" class=n" if numeric else ""}>{_esc(text)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# ------------------------------------------------------------------------------------------------------ charts


_DECIMALS = re.compile(r"(\d\.\d)\d+")
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.DOTALL)
_FONT_FAMILY = re.compile(r"; font-family: [^;\"]*")


def _svg(figure: Any) -> str:
    """A figure as inline SVG: text kept as text (the page's fonts draw it), no date, stable ids, coordinates to
    a tenth of a point (inside tags only: the labels keep their digits). Each chart sets its own margins: a
    tight bounding box would draw every figure twice, half the report's time."""
    with one_import_at_a_time():
        import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "pbbq-audit"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = _METADATA.sub("", text[text.index("<svg") :])
    text = _FONT_FAMILY.sub("", re.sub(r">\s+<", "><", text))  # the text inherits the page's Persian-capable fonts
    used = set(re.findall(r"#([\w.-]+)", text))
    text = re.sub(r' id="([^"]+)"', lambda m: m.group(0) if m.group(1) in used else "", text)
    return re.sub(r"<[^>]+>", lambda tag: _DECIMALS.sub(r"\1", " ".join(tag.group(0).split())), text)


def _figure(width: float, height: float) -> Any:
    with one_import_at_a_time():
        from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=72)


def config_colours(configs: Iterable[str]) -> dict[str, str]:
    """One colour per config (:data:`CONFIG_PALETTE`), none shared."""
    configs = list(dict.fromkeys(configs))
    if len(configs) <= len(CONFIG_PALETTE):
        return dict(zip(configs, CONFIG_PALETTE, strict=False))
    hues = (colorsys.hsv_to_rgb(k / len(configs), 0.65, 0.8) for k in range(len(configs)))
    return {
        config: "#" + "".join(f"{round(255 * c):02x}" for c in rgb) for config, rgb in zip(configs, hues, strict=True)
    }


def chart_categories(present: Iterable[str]) -> list[str]:
    """The categories a chart draws: every one present, PBBQ's in the paper's order first, then the others (BBQ's
    Race_ethnicity, a sheet's own) in the order they come."""
    present = list(dict.fromkeys(present))
    return [c for c in CATEGORIES if c in present] + [c for c in present if c not in CATEGORIES]


def acceptance_chart(stereotypes: pd.DataFrame, threshold: float) -> str:
    """Acceptance per stereotype with its Wilson interval and the threshold line, stereotypes grouped by category
    (shaded bands, named on top). At 0 % or 100 % the interval's end meets the point up to floating-point error
    (statsmodels gives 8.7e-19 for 0 of 250), which draws as no bar, not as a negative one."""
    order = {c: i for i, c in enumerate(CATEGORIES)}
    frame = stereotypes.assign(_order=stereotypes["category"].map(order).fillna(len(order)))
    frame = frame.sort_values(["_order", "category", "stereotype_id"]).reset_index(drop=True)
    positions, x, previous = [], -1.0, None
    for category in frame["category"]:
        x += 1.0 if category == previous else (1.8 if previous is not None else 1.0)
        positions.append(x)
        previous = category
    frame["x"] = positions
    figure = _figure(max(8.0, 0.2 * len(frame) + 2), 4.2)
    ax = figure.subplots()
    figure.subplots_adjust(left=0.07, right=0.93, top=0.78, bottom=0.2)
    for k, (category, part) in enumerate(frame.groupby("category", sort=False)):
        low, high = part["x"].min() - 0.6, part["x"].max() + 0.6
        if k % 2 == 0:
            ax.axvspan(low, high, color="#f1f1f1", lw=0)
        ax.text((low + high) / 2, 1.03, category, rotation=35, fontsize=7, ha="left", va="bottom",
                transform=ax.get_xaxis_transform())  # fmt: skip
    for kept, colour in ((True, KEPT), (False, STOPPED)):
        part = frame[frame["kept"].astype(bool) == kept]
        if len(part):
            err = [
                (part["acceptance"] - part["ci_low"]).clip(lower=0),
                (part["ci_high"] - part["acceptance"]).clip(lower=0),
            ]
            label = "kept" if kept else "not accepted"
            ax.errorbar(part["x"], part["acceptance"], yerr=err, fmt="o", color=colour, ms=3.5, capsize=1.5, lw=1,
                        label=label)  # fmt: skip
    ax.axhline(threshold, color="#555", ls="--", lw=0.8)
    ax.set_xticks(frame["x"], frame["stereotype_id"], rotation=90, fontsize=6)
    ax.set_xlim(frame["x"].min() - 1, frame["x"].max() + 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("acceptance (Wilson 95 % interval)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7, loc="lower left")
    return _svg(figure)


def kappa_chart(templates: pd.DataFrame, min_kappa: float, min_relevance: float) -> str:
    """Fleiss' kappa against mean relevance per template, the two thresholds, each template's outcome."""
    figure = _figure(9.5, 5)
    ax = figure.subplots()
    figure.subplots_adjust(left=0.08, right=0.7, top=0.95, bottom=0.1)
    plotted = templates.dropna(subset=["kappa", "mean_relevance"])
    outcome = plotted["reason"].where(~plotted["kept"].astype(bool), "kept")
    for name in dict.fromkeys([*OUTCOME_COLOURS, *sorted(set(outcome))]):
        part = plotted[outcome == name]
        if len(part):
            colour = OUTCOME_COLOURS.get(name, "#555")
            ax.scatter(part["mean_relevance"], part["kappa"], s=22, color=colour, label=f"{words(name)} ({len(part)})")
    for row in plotted[outcome.isin(["kappa_below_threshold", "relevance_below_threshold"])].itertuples():
        ax.annotate(
            row.template_id, (row.mean_relevance, row.kappa), fontsize=6, xytext=(3, 3), textcoords="offset points"
        )
    ax.axhline(min_kappa, color="#555", ls="--", lw=0.8)
    ax.axvline(min_relevance, color="#555", ls=":", lw=0.8)
    ax.text(ax.get_xlim()[1], min_kappa, f" κ ≥ {min_kappa}", va="bottom", ha="right", fontsize=7)
    ax.text(min_relevance, ax.get_ylim()[1], f" relevance ≥ {min_relevance}", va="top", fontsize=7)
    ax.set_xlabel("mean relevance", fontsize=9)
    ax.set_ylabel("Fleiss' kappa", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _svg(figure)


def table1_chart(table1: pd.DataFrame, colours: dict[str, str]) -> str:
    """Examples per category and config (Table 1), every category present (:func:`chart_categories`), each config
    in its colour (:func:`config_colours`)."""
    rows = table1[table1["category"] != "Total"]
    configs = list(dict.fromkeys(rows["config"]))
    categories = chart_categories(rows["category"])
    figure = _figure(9, 0.32 * len(categories) * max(1, len(configs)) / 2 + 1.2)
    ax = figure.subplots()
    figure.subplots_adjust(left=0.22, right=0.98, top=0.97, bottom=0.12)
    height = 0.8 / max(1, len(configs))
    for k, config in enumerate(configs):
        samples = rows[rows["config"] == config].set_index("category")["samples"].reindex(categories).fillna(0)
        positions = [i + k * height for i in range(len(categories))]
        ax.barh(positions, samples, height=height, color=colours[config], label=config)
    ax.set_yticks([i + height * (len(configs) - 1) / 2 for i in range(len(categories))], categories, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("examples", fontsize=9)
    ax.legend(fontsize=8)
    return _svg(figure)


def table2_chart(table2: pd.DataFrame, colours: dict[str, str]) -> str:
    """Table 2's metrics per category (and config, at instance level), one panel per metric."""
    metrics = [(c, label) for c, label in METRICS if c in table2.columns and table2[c].notna().any()]
    if "ngd_mean" in dict(metrics):
        metrics = [(c, label) for c, label in metrics if c != "ngd"]
    configs = list(dict.fromkeys(table2["config"])) if "config" in table2.columns else [None]
    categories = list(dict.fromkeys(table2["category"]))
    figure = _figure(11, 0.22 * len(categories) * len(configs) + 1.5)
    axes = figure.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    figure.subplots_adjust(left=0.17, right=0.99, top=0.9, bottom=0.1, wspace=0.08)
    height = 0.8 / len(configs)
    for ax, (column, label) in zip(axes, metrics, strict=True):
        for k, config in enumerate(configs):
            part = table2 if config is None else table2[table2["config"] == config]
            values = part.set_index("category")[column].reindex(categories)
            colour = colours[config] if config else KEPT
            ax.barh([i + k * height for i in range(len(categories))], values, height=height, color=colour, label=config)
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0].set_yticks([i + height * (len(configs) - 1) / 2 for i in range(len(categories))], categories, fontsize=7)
    axes[0].invert_yaxis()
    if configs != [None]:
        axes[-1].legend(fontsize=7)
    return _svg(figure)


def balance_chart(distribution: pd.DataFrame, colours: dict[str, str]) -> str:
    """Share of examples per answer position, of the correct answer (label) and of the stereotyped entity
    (target_loc), per config; a balanced build sits on the 1/3 line."""
    dimensions = [d for d in ("label", "target_loc") if d in set(distribution["dimension"])]
    figure = _figure(9, 2.8)
    axes = figure.subplots(1, len(dimensions), squeeze=False)[0]
    figure.subplots_adjust(left=0.06, right=0.98, top=0.88, bottom=0.12, wspace=0.15)
    for ax, dimension in zip(axes, dimensions, strict=True):
        part = distribution[distribution["dimension"] == dimension]
        configs = list(dict.fromkeys(part["config"]))
        values = sorted(set(part["value"]), key=str)
        width = 0.8 / len(configs)
        for k, config in enumerate(configs):
            shares = part[part["config"] == config].set_index("value")["share"].reindex(values).fillna(0)
            ax.bar([i + k * width for i in range(len(values))], shares, width=width,
                   color=colours[config], label=config)  # fmt: skip
        ax.axhline(1 / 3, color="#555", ls="--", lw=0.8)
        ax.set_xticks([i + width * (len(configs) - 1) / 2 for i in range(len(values))], [f"ans{v}" for v in values])
        ax.set_title(
            "correct answer (label)" if dimension == "label" else "stereotyped entity (target_loc)", fontsize=9
        )
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=8)
    axes[-1].legend(fontsize=7)
    return _svg(figure)


# ----------------------------------------------------------------------------------------------------- sections


def _cited(said: PathWords, section: str) -> str:
    """`` (PBBQ §3.5)`` after a title on PBBQ's path; nothing on the adaptation path, whose charts PBBQ's paper does
    not describe."""
    return f" ({said.cite} {section})" if said.cite else ""


def _section(anchor: str, title: str, *body: str) -> str:
    return f'<section id="{anchor}"><h2>{_esc(title)}</h2>{"".join(body)}</section>'


def _chart(svg: str, caption: str) -> str:
    return f'<figure class="chart">{svg}<figcaption class="note">{_esc(caption)}</figcaption></figure>'


def _link(run: Path, relative: str, text: str | None = None) -> str:
    relative = table_path(run, relative)  # a stage's file by its declared name: `statistics/soundness.parquet`
    if not (run / relative).exists():
        return f"<code>{_esc(text or relative)}</code>"
    return f'<a href="{_esc(relative)}"><code>{_esc(text or relative)}</code></a>'


def summary_section(run: Path) -> str:
    info = manifest(run)
    status = run_status(info)
    code = info.get("code_version", {})
    commit = code.get("git_commit") or "no git commit"
    dirty = " (with uncommitted changes)" if code.get("git_dirty") else ""
    source = (code.get("source_sha256") or "")[:12]
    facts = [
        ("status", f'<b class="status-{_esc(status)}">{_esc(status)}</b>'),
        ("written", _esc(info.get("written_at", ""))),
        (
            "code",
            f"<code>{_esc(commit)}</code>{dirty}, source sha256 <code>{_esc(source)}</code>",
        ),
        ("manifest", _link(run, "manifest.json")),
    ]
    if info.get("error"):
        facts.append(("error", f"{_esc(info['error'])} ({_link(run, 'error.log')})"))
    release = f"{stage_folder(run, 'publish')}/hub"
    if (run / release / "README.md").is_file():
        facts.append(("release", _link(run, f"{release}/README.md", f"{release}/ (dataset card)")))
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{v}</td></tr>" for k, v in facts)
    inputs = pd.DataFrame(
        [
            {
                "input": name,
                "file": entry.get("path"),
                "rows": entry.get("rows"),
                "sha256": (entry.get("sha256") or "")[:16],
            }
            for name, entry in info.get("inputs", {}).items()
        ],
        dtype=object,
    )
    notes = [survey_margin(run), *warnings(run)]
    warned = "".join(f'<div class="warn" dir="auto">{_esc(n)}</div>' for n in notes if n)
    llm = llm_usage(run)
    nav = "".join(
        f'<a href="#{a}">{t}</a>'
        for a, t in (("funnel", "Funnel"), ("stages", "Stages"), ("drops", "Drops"), ("soundness", "Soundness"),
                     ("charts", "Charts"), ("changes", "Changes"))
    )  # fmt: skip
    return (
        f"<h1>{_esc(path_words(run).benchmark)} run {_esc(info['run_id'])}</h1><nav>{nav}</nav><table>{rows}</table>"
        f"<h3>Input files</h3>{table_html(inputs)}{warned}"
        + (f"<h3>LLM usage</h3>{table_html(llm)}" if len(llm) else "")
    )


def funnel_section(run: Path) -> str:
    steps = funnel(run)
    if not steps:
        return _section("funnel", "Funnel", "<p>The run wrote no funnel (it stopped before the statistics stage).</p>")
    top = max(s.count for s in steps) or 1
    rows = []
    for step in steps:
        width = 100 * math.log10(step.count + 1) / math.log10(top + 1)
        indent = "&nbsp;&nbsp;&nbsp;" if step.kind != "step" else ""
        rows.append(
            f'<tr class="{step.kind}"><td>{indent}{_esc(step.label)}</td><td class="n">{step.count}</td>'
            f'<td class="bar"><span style="width:{width:.1f}%"></span></td></tr>'
        )
    said = path_words(run)
    return _section(
        "funnel",
        f"Funnel: from {said.start} to published rows",
        f"<table><thead><tr><th>step</th><th>count</th><th>(bar length: log scale)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>",
        '<p class="note">Indented: entity pairs dropped for a confound, examples built per config, rows published '
        f"per config. An {_esc(said.source)} example without a name proxy has no {_esc(said.source)}-names variant; "
        "it is not lost.</p>",
    )


def stages_section(run: Path) -> str:
    rows = []
    for line in stage_lines(run):
        reasons = ", ".join(f"{words(k)}: {v}" for k, v in line.by_reason.items())
        other = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in line.other_counts.items() if not isinstance(v, list))
        how = {True: "cached", False: "recomputed", None: ""}[line.cached]
        rows.append(
            {
                "stage": line.folder,
                "what happened": line.sentence(),
                "by reason": reasons,
                "other counts": other,
                "": how,
            }
        )
    return _section("stages", "Stages", table_html(pd.DataFrame(rows)))


def _reason_block(run: Path, group: ReasonDrops) -> str:
    where = f" — all {group.count} in {_link(run, group.table)}" if group.table else ""
    shown = f"first {len(group.first)} of {group.count}" if group.count > len(group.first) else "all"
    return (
        f"<h4>{group.count} {_esc(group.meaning)}: {_esc(words(group.reason))} "
        f"<small>(<code>{_esc(group.reason)}</code>)</small></h4>"
        f'<p class="note">{shown}{where}</p>{table_html(group.first, truncate=CELL_WIDTH)}'
    )


def drops_section(run: Path) -> str:
    groups = drops(run)
    if not groups:
        return _section("drops", "Drops by stage and reason", "<p>No stage dropped anything.</p>")
    body, folder = [], None
    for group in groups:
        if group.folder != folder:
            folder = group.folder
            body.append(f"<h3>{_esc(folder)}</h3>")
        body.append(_reason_block(run, group))
    return _section("drops", "Drops by stage and reason", *body)


def soundness_section(run: Path) -> str:
    table = soundness(run)
    if table.empty:
        return _section("soundness", "Soundness", "<p>The run has no soundness table.</p>")
    wide = table.pivot_table(index="check", columns="config", values="violations", aggfunc="sum", sort=False)
    wide = wide.astype("Int64")
    broken = int(table["violations"].sum())
    verdict = "every check holds in every config" if broken == 0 else f"{broken} violations"
    return _section(
        "soundness",
        "Soundness (violations per config and check; 0 = sound)",
        f"<p><b>{verdict}</b> ({_link(run, 'statistics/soundness.parquet')})</p>",
        table_html(wide.reset_index()),
    )


def _table2_notes(table: pd.DataFrame, instance_level: bool, cite: str) -> list[str]:
    """The notes under a Table 2 (``cite``: the paper section the template level follows, :func:`_cited`)."""
    notes = [INSTANCE_LEVEL_NOTE if instance_level else TEMPLATE_LEVEL_NOTE.format(cite=cite)]
    for column, label in METRICS:
        if column in table.columns and table[column].notna().all() and table[column].nunique() == 1 and len(table) > 1:
            notes.append(f"{label} reads {table[column].iloc[0]:.3f} in every row" + (
                " (expected at instance level, see above)." if instance_level else "."))  # fmt: skip
    if "homogenization_note" in table.columns:
        notes += [f"BERTScore: {n}" for n in dict.fromkeys(table["homogenization_note"].dropna()) if n]
    return notes


NOTHING_TO_DRAW = "Nothing to draw: a stage before it kept nothing (see the warnings above)."


def _left_empty(run: Path, name: str, table: pd.DataFrame) -> bool:
    """Whether the run wrote the table ``name`` with no rows (a stage before it kept nothing)."""
    return table.empty and (run / f"{table_path(run, name)}.parquet").is_file()


def charts_section(run: Path) -> str:
    """Every chart the run's tables give; a table a stage left empty (it kept nothing) is said, not drawn."""
    parts = []
    said = path_words(run)
    colours = config_colours([*example_tables(run), *read_table(run, "statistics/table1").get("config", [])])
    stereotypes = read_table(run, "survey_filter/stereotypes")
    if not stereotypes.empty:
        threshold = stage_report(run, "survey_filter").get("parameters", {}).get("threshold", SurveyParams.threshold)
        parts += [
            f"<h3>Survey: acceptance per stereotype, by category{_cited(said, '§3.2')}</h3>",
            _chart(
                acceptance_chart(stereotypes, threshold),
                f"Points: acceptance; bars: Wilson 95 % interval; dashed: the {threshold:.0%} line (kept when above); "
                "blue kept, red not accepted.",
            ),
        ]
    gate = "adapt" if is_adaptation(run) else "kappa_gate"  # the adaptation gates its templates in its own stage
    templates = read_table(run, f"{gate}/templates")
    if not templates.empty and "kappa" in templates.columns:
        params = stage_report(run, gate).get("parameters", {})
        missing = int(templates["kappa"].isna().sum())
        parts += [
            "<h3>Kappa gate: Fleiss' kappa against mean relevance per template</h3>",
            _chart(
                kappa_chart(templates, params.get("min_kappa", 0.2), params.get("min_relevance", 1.5)),
                f"A template passes when kappa ≥ {params.get('min_kappa', 0.2)} (dashed) and mean relevance ≥ "
                f"{params.get('min_relevance', 1.5)} (dotted)"
                + (" and its stereotype was accepted." if said.cite else "; an SR row is removed before it.")
                + (f" {missing} template(s) without a kappa (see kappa_note) are not drawn." if missing else ""),
            ),
        ]
    table1 = read_table(run, "statistics/table1")
    if _left_empty(run, "statistics/table1", table1):
        parts += [f"<h3>Table 1{_cited(said, '§3.5')}</h3>", f"<p>{NOTHING_TO_DRAW}</p>"]
    elif not table1.empty:
        wide = table1.pivot_table(index="category", columns="config", values=["templates", "samples"], sort=False)
        wide = wide.astype("Int64")
        wide.columns = [f"{config} {value}" for value, config in wide.columns]
        parts += [
            f"<h3>Table 1: templates and examples per category and config{_cited(said, '§3.5')}</h3>",
            _chart(table1_chart(table1, colours), "Examples per category and config."),
            table_html(wide.reset_index()),
        ]
    for name, instance_level in (("table2", False), ("table2_instances", True)):
        table = read_table(run, f"diversity/{name}")
        instance_level = instance_level or "config" in table.columns
        title = "Table 2, instance level" if instance_level else "Table 2: diversity per category (template level)"
        if table.empty:
            parts += (
                [f"<h3>{title}</h3><p>{NOTHING_TO_DRAW}</p>"] if _left_empty(run, f"diversity/{name}", table) else []
            )
            continue
        notes = "".join(
            f'<p class="note">{_esc(n)}</p>'
            for n in _table2_notes(table, instance_level, _cited(said, "§3.5, Appendix C"))
        )
        shown = table.drop(columns=["homogenization_note"], errors="ignore")
        caption = "One panel per metric; ↑ more diverse for NGD and TTR, ↓ for Self-BLEU."
        chart = "" if instance_level else _chart(table2_chart(table, colours), caption)
        parts += [f"<h3>{title}</h3>", notes, chart, table_html(shown)]
    distribution = read_table(run, "statistics/distribution")
    if _left_empty(run, "statistics/distribution", distribution):
        parts += ["<h3>Answer-position balance</h3>", f"<p>{NOTHING_TO_DRAW}</p>"]
    elif not distribution.empty:
        parts += [
            "<h3>Answer-position balance</h3>",
            _chart(
                balance_chart(distribution, colours),
                "Share of examples with the correct answer, and with the stereotyped entity, in each option; "
                "dashed: 1/3.",
            ),
        ]
    return _section("charts", "Charts", *parts)


def changes_section(run: Path) -> str:
    previous = previous_completed(run)
    if previous is None:
        return _section("changes", "Changes", f"<p>{_esc(no_previous_run(run))} to compare with.</p>")
    note = (
        f'<p class="note">Against run {_esc(previous.name)}, the previous completed run of this configuration '
        f"(config hash <code>{_esc(config_hash(manifest(run))[:12])}</code>).</p>"
    )
    return f'<section id="changes">{diff_runs(previous, run).html()}{note}</section>'


def review_section(run: Path) -> str:
    """What people reviewed (docs/review.md): agreement per question, the stale decisions and the disagreements;
    nothing for a run without review rounds."""
    report = stage_report(run, "review")
    if not report:
        return ""
    agreement = pd.DataFrame(report.get("agreement", []))
    stale = pd.DataFrame(report.get("stale", []))
    return _section(
        "review",
        "Review by people",
        f"<p>{_esc(audit_lines(report, pd.DataFrame())[0])}</p>",
        table_html(agreement) if len(agreement) else "",
        f"<h3>Stale decisions (not applied)</h3>{table_html(stale)}" if len(stale) else "",
        "<h3>Disagreements</h3>",
        table_html(read_table(run, "review/disagreements"), truncate=50),
    )


def audit_html(run: Path) -> str:
    """The page, as text."""
    parts: Iterable[str] = (
        summary_section(run),
        funnel_section(run),
        stages_section(run),
        drops_section(run),
        soundness_section(run),
        review_section(run),
        charts_section(run),
        changes_section(run),
        '<p class="note">Every row is in the parquet files of this folder; <code>pbbq browse RUN</code> serves them '
        "as tables to filter and facet.</p>",
    )
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(path_words(run).benchmark)} audit {_esc(run.name)}</title>"
        f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>'
        + "\n".join(parts)
        + "</body></html>\n"
    )
    return page


def write_audit_html(run: Path) -> Path:
    """Write ``<run>/audit.html`` and return its path."""
    target = run / "audit.html"
    atomic_write_bytes(target, audit_html(run).encode("utf-8"))
    return target
