"""Auditing a run afterwards (docs/architecture.md §5): ``pbbq audit <run>`` and ``pbbq trace <example_id>``.

``audit`` reads a run folder and says, in words a curator reads, what each stage took in, what it gave out and
what the difference means (a drop, or an example that simply has no name proxy), every drop grouped by reason
with its first rows, the funnel from crawled posts to published rows per config, the soundness checks, the
warnings and the LLM usage. :mod:`pbbq.flows.audit.report` draws the same as ``audit.html``. ``trace`` follows one
example back through the run: its stereotype with its survey figures and any crawl evidence, the template's
kappa and where its disambiguated context came from (on the adaptation path: the BBQ template, its class, the
sheet row and the gate's kappa instead), the LLM prompts and answers behind it, its whole family (the source
original, ``fa`` or ``en``, its name-proxy variants, its translations and every drop among them with stage and
reason; any member, a dropped one too, traces to the same family), and whether it is new or changed since the
previous completed run of the same configuration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ...tasks.core.run_folder import run_status
from ...tasks.core.verification import verify_run
from ...tasks.review.report import audit_lines, example_history
from .browse import DB_NAME
from .diff import example_status
from .runs import (
    AuditError,
    drop_tables,
    example_tables,
    input_file,
    is_adaptation,
    manifest,
    read_table,
    run_folder,
    source_config,
    stage_folders,
    stage_report,
    stage_words,
)

__all__ = ["AuditError", "audit_text", "drops", "funnel", "path_words", "run_folder", "stage_summary", "trace"]

REASON_WORDS: dict[str, str] = {
    "stereotype_not_accepted": "its stereotype was not accepted by the survey",
    "kappa_below_threshold": "Fleiss' kappa under the threshold",
    "relevance_below_threshold": "mean relevance under the threshold",
    "failed_validation": "every LLM attempt broke a rule (in review)",
    "no_disambiguated_context": "no disambiguated continuation (in review)",
    "gender_confound": "the two entities' genders differ outside Gender",
    "age_confound": "the two entities' age bands differ outside Age",
    "duplicate_example": "an exact duplicate of another example",
    "unfilled_placeholder": "a placeholder left unfilled",
    "pronoun_gender_clash": "a pronoun of the template gives an entity the other gender (its pair goes in both orders)",
    "entity_not_in_name_table": "an entity no name of the table stands for",
    "flagged_translation": "a segment's back-translation under the chrF threshold",
    "pair_incomplete": "another example of its entity pair has no English version (pairs stay whole)",
}
"""Reasons in words; any other reason reads as its name with spaces."""

FUNNEL_WORDS: dict[str, str] = {
    "posts": "posts crawled",
    "candidates": "candidate stereotypes",
    "surveyed": "stereotypes surveyed",
    "accepted": "stereotypes accepted by the survey",
    "templates": "templates written",
    "gated": "templates through the kappa gate",
    "instantiated_templates": "templates instantiated",
    "entity_pairs": "entity pairs",
    "pairs_without_confound": "entity pairs without a confound",
    "examples": "examples (fa)",
    "adapt_reviewed": "BBQ templates reviewed, and rows added",
    "adapt_DT": "kept as BBQ wrote them (DT)",
    "adapt_TM": "modified for the target culture (TM)",
    "adapt_NA": "newly added (NA)",
    "adapt_SR": "removed, with the experts' reason (SR)",
    "adapt_gated": "templates through the annotation gate",
    "adapt_examples": "examples (en)",
}

FIRST_ROWS = 3
"""Rows shown per reason; every row stays in the parquet the report links to."""
COLUMN_PRIORITY = (
    "reason", "removal_reason", "class", "detail", "entity", "pair", "acceptance", "ci_low", "ci_high", "kappa",
    "mean_relevance", "chrf", "assignment", "attempt", "failures", "stereo_entity", "nonstereo_entity", "category",
    "statement_fa", "context", "answer", "text_fa", "text_en",
)  # fmt: skip
"""Columns shown in a reason's first rows, after the ids, up to :data:`MAX_COLUMNS`."""
MAX_COLUMNS = 7


def words(reason: str) -> str:
    """A reason (or a step) in words."""
    return REASON_WORDS.get(reason, reason.replace("_", " "))


def _count(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "?" if value is None else str(value)


@dataclass(frozen=True)
class PathWords:
    """How the audit names what a run built: PBBQ's path (crawled posts, a survey, Persian templates) or the
    adaptation of BBQ's templates (a reviewed sheet, English examples)."""

    benchmark: str
    """What the run builds, for titles."""
    start: str
    """What its funnel starts from."""
    source: str
    """The config of its examples before any name proxy or translation (``fa``, ``en``)."""
    cite: str
    """The paper its charts cite (``PBBQ``), empty on the adaptation path."""


def path_words(run: Path) -> PathWords:
    """The words of the run's path (:class:`PathWords`)."""
    if is_adaptation(run):
        return PathWords("BBQ adaptation", "the reviewed BBQ templates", source_config(run), "")
    return PathWords("PBBQ", "crawled posts", source_config(run), "PBBQ")


@dataclass(frozen=True)
class StageLine:
    """One stage as the report states it."""

    folder: str
    count_in: str
    what_in: str
    count_out: str
    what_out: str
    dropped: int
    what_dropped: str
    by_reason: dict[str, int]
    other_counts: dict[str, Any]
    cached: bool | None

    def sentence(self) -> str:
        """E.g. ``5556 examples (fa) in → 3240 name-proxy variants (fa-names) out; 4476 examples without a name
        proxy (they stay in fa)``."""
        text = f"{self.count_in} {self.what_in} in → {self.count_out} {self.what_out} out"
        if self.dropped:
            text += f"; {self.dropped} {self.what_dropped}"
        return text


def stage_lines(run: Path) -> list[StageLine]:
    """Every stage of the run with its counts in words."""
    cached = {stage["folder"]: stage.get("cached") for stage in manifest(run).get("stages", [])}
    lines = []
    for folder in stage_folders(run):
        report = stage_report(run, folder)
        counts = report.get("counts", {})
        dropped = report.get("not_covered") or report.get("dropped", {})  # names: examples that stay in fa
        what_in, what_out, what_dropped = stage_words(run, folder)
        lines.append(
            StageLine(
                folder=folder,
                count_in=_count(counts.get("in")),
                what_in=what_in,
                count_out=_count(counts.get("out")),
                what_out=what_out,
                dropped=int(dropped.get("total", 0) or 0),
                what_dropped=what_dropped,
                by_reason=dict(dropped.get("by_reason", {})),
                other_counts={k: v for k, v in counts.items() if k not in ("in", "out")},
                cached=cached.get(folder),
            )
        )
    return lines


def stage_summary(run: Path) -> pd.DataFrame:
    """One row per stage: what went in and came out, what the difference means, recomputed or cached."""
    rows = [
        {
            "stage": line.folder,
            "in": f"{line.count_in} {line.what_in}",
            "out": f"{line.count_out} {line.what_out}",
            "not carried on": f"{line.dropped} {line.what_dropped}" if line.dropped else "",
            "by reason": ", ".join(f"{k}: {v}" for k, v in line.by_reason.items()),
            "cached": {True: "cached", False: "recomputed", None: ""}[line.cached],
        }
        for line in stage_lines(run)
    ]
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ReasonDrops:
    """The drops of one stage for one reason: how many, what they mean, where all of them are, the first ones."""

    folder: str
    reason: str
    count: int
    meaning: str
    table: str | None
    """The parquet file (relative to the run) that holds every row of this reason, if the stage wrote one."""
    first: pd.DataFrame


def _is_nested(value: Any) -> bool:
    return isinstance(value, list | dict | tuple) or (hasattr(value, "tolist") and not isinstance(value, str))


def _shown_columns(frame: pd.DataFrame) -> list[str]:
    """Ids first, then the informative columns of :data:`COLUMN_PRIORITY`, never nested values."""
    sample = frame.iloc[0] if len(frame) else None
    flat = [c for c in frame.columns if sample is None or not _is_nested(sample[c]) or c == "failures"]
    ids = [c for c in flat if c.endswith("_id") and c not in ("request_id", "source_example_id")][:2]
    rest = [c for c in COLUMN_PRIORITY if c in flat and c not in ids]
    return [*ids, *rest][:MAX_COLUMNS]


def _reason_tables(run: Path, folder: str) -> list[Path]:
    """The stage's parquet tables that have a ``reason`` column, drop tables first."""
    declared = drop_tables(run, folder)
    paths = sorted((run / folder).glob("*.parquet"), key=lambda p: (p.stem not in declared, p.stem))
    return [path for path in paths if "reason" in pq.read_schema(path).names]


def _reason_rows(tables: list[Path], reason: str) -> tuple[str | None, pd.DataFrame]:
    """The first table (drop tables first) with rows of ``reason`` that were not kept, and those rows."""
    for path in tables:
        rows = pd.read_parquet(path, filters=[("reason", "==", reason)])
        if "kept" in rows.columns:
            rows = rows[~rows["kept"].astype(bool)]
        if len(rows):
            return path.stem, rows
    return None, pd.DataFrame()


def drops(run: Path) -> list[ReasonDrops]:
    """Every stage's drops grouped by reason, with the table holding them all and the first rows of each.

    Counts come from the stage's report; the rows from its tables (a stage whose tables carry no reason, e.g. a
    review sheet, shows the drops its report lists)."""
    found = []
    for folder in stage_folders(run):
        report = stage_report(run, folder)
        by_reason = report.get("dropped", {}).get("by_reason", {})
        if not by_reason:
            continue
        tables = _reason_tables(run, folder)
        declared = drop_tables(run, folder)
        _, _, meaning = stage_words(run, folder)
        for reason, count in by_reason.items():
            name, rows = _reason_rows(tables, reason)
            if name is None:  # the report's own list of drops, and the stage's drop table to look in
                rows = pd.DataFrame([d for d in report.get("drops", []) if d.get("reason") == reason])
                name = declared[0] if declared else None
            first = rows.head(FIRST_ROWS)
            found.append(
                ReasonDrops(
                    folder=folder,
                    reason=reason,
                    count=int(count),
                    meaning=meaning,
                    table=f"{folder}/{name}.parquet" if name else None,
                    first=first[_shown_columns(first)].reset_index(drop=True) if len(first) else first,
                )
            )
    return found


@dataclass(frozen=True)
class FunnelStep:
    step: str
    label: str
    count: int
    kind: str
    """``step`` (a count on the way), ``drop`` (what a step lost), ``config`` (rows built per config) or
    ``published`` (rows in the release per config)."""


def funnel(run: Path) -> list[FunnelStep]:
    """The whole funnel: the crawl (when its counts are not already the funnel's first steps), the statistics
    stage's funnel from candidates to examples per config, and the published rows per config."""
    table = read_table(run, "statistics/funnel")
    steps: list[FunnelStep] = []
    crawl = stage_report(run, "crawl").get("counts", {})
    if crawl and (table.empty or table["step"].iloc[0] != "posts"):  # the statistics stage does not count the crawl
        posts, candidates, _ = stage_words(run, "crawl")
        steps += [
            FunnelStep(step, f"{what} (crawl)", int(crawl[k]), "step")
            for k, step, what in (("in", "crawled_posts", posts), ("out", "crawl_candidates", candidates))
            if isinstance(crawl.get(k), int)
        ]
    for row in table.itertuples():
        step = str(row.step)
        if step.startswith("pairs_dropped_"):
            steps.append(
                FunnelStep(step, f"pairs dropped: {words(step.removeprefix('pairs_dropped_'))}", row.count, "drop")
            )
        elif step.startswith("examples_"):
            config = step.removeprefix("examples_")
            steps.append(FunnelStep(step, f"examples ({config})", int(row.count), "config"))
        else:
            steps.append(FunnelStep(step, FUNNEL_WORDS.get(step, words(step)), int(row.count), "step"))
    published = stage_report(run, "publish").get("configs", {})
    order = list(example_tables(run))
    steps += [
        FunnelStep(f"published_{config}", f"published rows ({config})", int(count), "published")
        for config, count in sorted(
            published.items(), key=lambda item: (order.index(item[0]) if item[0] in order else len(order), item[0])
        )
    ]
    return steps


def soundness(run: Path) -> pd.DataFrame:
    """The statistics stage's soundness checks (violations per config and check; 0 is sound)."""
    return read_table(run, "statistics/soundness")


def warnings(run: Path) -> list[str]:
    """What a person should look at before trusting the run: the manifest's warnings (about an input, or a stage
    that kept nothing, which names its folder first) and every stage's report's, each after what it is about."""
    folders = stage_folders(run)
    found = []
    for warning in manifest(run).get("warnings", []):
        subject, _, text = warning.partition(" ")
        found.append(f"{subject}: {text}" if subject in folders else f"input: {warning}")
    for folder in folders:
        found += [f"{folder}: {w}" for w in stage_report(run, folder).get("warnings", [])]
    return found


def survey_margin(run: Path) -> str | None:
    """The survey's Cochran margin of error against its target (PBBQ §5), in words, if the survey ran."""
    report = stage_report(run, "survey_filter")
    margin, target = report.get("margin_of_error"), report.get("parameters", {}).get("target_margin")
    if margin is None:
        return None
    respondents = report.get("counts", {}).get("respondents")
    verdict = "" if target is None else (" (over the target)" if margin > target else f" (target {target})")
    return f"Cochran margin of error {margin:.4f} with {respondents} respondents{verdict}"


def llm_usage(run: Path) -> pd.DataFrame:
    """Per LLM stage: provider, model, requests sent, answers from the store, tokens and cost (from its report;
    a cached stage shows the figures of the run that computed it)."""
    rows = []
    for folder in stage_folders(run):
        report = stage_report(run, folder)
        usage = report.get("llm")
        if not usage:
            continue
        cost = usage.get("cost_usd")
        rows.append(
            {
                "stage": folder,
                "model": f"{usage.get('provider')} {usage.get('model')}",
                "requests sent": usage.get("requests_sent"),
                "from the store": usage.get("cache_hits"),
                "tokens in": usage.get("tokens_in"),
                "tokens out": usage.get("tokens_out"),
                "cost": "unknown" if cost is None else f"${cost:.4f}",
                "stage cached": "yes" if report.get("cached") else "no",
            }
        )
    return pd.DataFrame(rows)


def audit_text(run: Path) -> str:
    """The run at a glance, for the terminal."""
    info = manifest(run)
    code = info.get("code_version", {})
    lines = [f"run {info['run_id']} ({run_status(info)}), code {code.get('git_commit')}"]
    if info.get("error"):
        lines.append(f"error: {info['error']}")
    steps = funnel(run)
    if steps:
        lines.append("funnel: " + " → ".join(f"{s.step} {s.count}" for s in steps if s.kind == "step"))
        built = [s for s in steps if s.kind in ("config", "drop", "published")]
        lines += [f"  {s.label}: {s.count}" for s in built]
    lines += ["", stage_summary(run).to_string(index=False), ""]
    for group in drops(run):
        where = f" (all in {group.table})" if group.table else ""
        lines.append(f"{group.folder}: {group.count} {group.meaning}: {words(group.reason)}{where}")
    sound = soundness(run)
    if not sound.empty:
        broken = sound[sound["violations"] > 0]
        lines.append(
            "soundness: every check holds in every config"
            if broken.empty
            else "soundness: " + ", ".join(f"{r.config} {r.check} {r.violations}" for r in broken.itertuples())
        )
    margin = survey_margin(run)
    if margin:
        lines.append(margin)
    lines += [f"warning ({w.split(': ', 1)[0]}): {w.split(': ', 1)[1]}" for w in warnings(run)]
    review = stage_report(run, "review")
    if review:  # review rounds (docs/review.md): what people checked, the disagreements
        lines += audit_lines(review, read_table(run, "review/disagreements"))
    lines += [
        f"LLM {r['stage']}: {r['model']}, {r['requests sent']} requests sent, {r['from the store']} answers from the "
        f"store, {r['tokens in']} tokens in, {r['tokens out']} out, cost {r['cost']}"
        for r in llm_usage(run).to_dict(orient="records")
    ]
    lines += tampering(run)
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------------- tampering

AFTER_BUILD = ("audit.html", DB_NAME)
"""What ``pbbq audit`` and ``pbbq browse`` write into a run after its build: not the build's files."""


def tampering(run: Path) -> list[str]:
    """The run's files against its manifest (``pbbq verify``): one line saying they match, or one per file that
    differs (a replaced data file, card or manifest)."""
    if run_status(manifest(run)) == "running":
        return ["files: not checked while the run is running"]
    found = verify_run(run, ignored=AFTER_BUILD)
    if found.ok:
        return [f"files: all {found.checked} match the manifest"]
    return [f"TAMPERED ({m.kind}): {m.path}: {m.detail}" for m in found.mismatches]


# ------------------------------------------------------------------------------------------------------ trace


def _transcript(run: Path) -> dict[str, dict[str, Any]]:
    from ...tasks.llm import read_transcript  # the LLM SDKs are slow to import: only trace pays for them

    path = run / "transcript.jsonl"
    if not path.is_file():
        return {}
    records = [json.loads(line) for line in read_transcript(path).splitlines()[1:] if line.strip()]
    return {record["key"]: record for record in records}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", force_ascii=False))


def crawl_evidence(run: Path, stereotype_id: str) -> list[dict[str, Any]]:
    """The crawl's candidates behind a stereotype (post ids, channels), when the run crawled and the candidates
    carry the stereotype id the experts gave them."""
    candidates = read_table(run, "crawl/candidates")
    if candidates.empty or "stereotype_id" not in candidates.columns:
        return []
    return _records(candidates[candidates["stereotype_id"] == stereotype_id])


def _original_id(row: pd.Series) -> str:
    """The id of the source original (``fa``, ``en``) an example was made from (its own id when it is one)."""
    source = row.get("source_example_id")
    return source if isinstance(source, str) and source else str(row["example_id"])


def _matching(path: Path, example_id: str, family: bool = False) -> pd.DataFrame:
    """The rows of a parquet table with ``example_id``, and with ``family`` also those made from it (whose
    ``source_example_id`` it is); an empty table when the file is missing or has no example ids."""
    names = pq.read_schema(path).names if path.is_file() else []
    if "example_id" not in names:
        return pd.DataFrame()
    filters = [[("example_id", "==", example_id)]]
    if family and "source_example_id" in names:
        filters.append([("source_example_id", "==", example_id)])
    return pd.read_parquet(path, filters=filters)


def _drop_tables_with_examples(run: Path) -> list[tuple[str, Path]]:
    """(stage folder, table) for every table of the run whose rows are examples a stage did not carry on."""
    return [
        (folder, path)
        for folder in stage_folders(run)
        for path in _reason_tables(run, folder)
        if "example_id" in pq.read_schema(path).names
    ]


def _family_drops(run: Path, original_id: str) -> list[dict[str, Any]]:
    """Every row of the original's family (itself, its name variants, its translations) that a stage did not
    carry on: the stage, its table and the reason in words."""
    found = []
    for folder, path in _drop_tables_with_examples(run):
        rows = _matching(path, original_id, family=True)
        if "kept" in rows.columns:
            rows = rows[~rows["kept"].astype(bool)]
        found += [
            {
                "stage": folder,
                "table": f"{folder}/{path.stem}.parquet",
                "example_id": row["example_id"],
                "lang": row.get("lang"),
                "variant": row.get("variant"),
                "reason": row["reason"],
                "meaning": words(str(row["reason"])),
            }
            for row in rows.to_dict(orient="records")
        ]
    return found


def _find(run: Path, example_id: str) -> tuple[pd.DataFrame, str]:
    """The example's row and the table it is in (relative to the run, no suffix): a config's examples, else the
    table of the stage that did not carry it on."""
    candidates = [(run / f"{table}.parquet") for table in example_tables(run).values()]
    candidates += [path for _, path in _drop_tables_with_examples(run)]
    for path in candidates:
        rows = _matching(path, example_id)
        if len(rows):
            return rows.iloc[:1], path.relative_to(run).with_suffix("").as_posix()
    raise AuditError(f"no example {example_id!r} in {run} (neither built nor dropped)")


def trace(run: Path, example_id: str) -> dict[str, Any]:
    """Everything the run knows about one example, from its stereotype (on the adaptation path: its BBQ template,
    class and sheet row) to its whole family: the source original (``fa``, ``en``),
    its name-proxy variants, its translations and every drop among them with its stage and reason. Any member
    traces to the same family, a dropped one too."""
    found, table = _find(run, example_id)
    example = found.iloc[0]
    original_id = _original_id(example)
    members = [_matching(run / f"{t}.parquet", original_id, family=True) for t in example_tables(run).values()]
    family = pd.concat([m for m in members if len(m)] or [pd.DataFrame(columns=["example_id"])], ignore_index=True)
    original = family[family["example_id"] == original_id]
    derived = family[family["example_id"] != original_id]
    adapted = is_adaptation(run)
    origin = _adapted_origin(run, example) if adapted else _pbbq_origin(run, example)
    attempts = pd.DataFrame() if adapted else _rows(run, "disambiguate/attempts", "template_id", example.template_id)
    transcript = _transcript(run)
    llm = []
    for key in dict.fromkeys([*attempts.get("request_id", []), *example.llm_request_ids]):
        record = transcript.get(key)
        if record is not None:
            llm.append({"request_id": key, "messages": record["request"]["messages"], "answer": record["response"]})
    shown = ["example_id", "lang", "variant", "context", "question", "ans0", "ans1", "ans2"]
    drops_found = _family_drops(run, original_id)
    own_drop = [d for d in drops_found if d["table"] == f"{table}.parquet" and d["example_id"] == example_id]
    return {
        "example": _records(found)[0],
        "table": table,
        "dropped": own_drop[0] if own_drop else None,
        "original": _records(original)[0] if not original.empty else None,
        "variants": _records(derived.loc[derived["variant"] != "original", shown]),
        "translations": _records(derived.loc[derived["variant"] == "original", shown]),
        "drops": drops_found,
        **origin,
        **({} if adapted else {"disambiguation_attempts": _records(attempts)}),
        "llm": llm,
        "diff": example_status(run, found, table),
        "review": example_history(
            (original if not original.empty else found).iloc[0], read_table(run, "review/decisions")
        ),
    }


def _rows(run: Path, table: str, column: str, value: Any) -> pd.DataFrame:
    """The rows of a run's table whose ``column`` is ``value``; none when the run has no such table."""
    frame = read_table(run, table)
    return frame[frame[column] == value] if column in frame.columns else frame


def _pbbq_origin(run: Path, example: pd.Series) -> dict[str, Any]:
    """Where a PBBQ example comes from: its stereotype with its survey figures and crawl evidence, its template and
    the template's gate figures."""
    template = _rows(run, "disambiguate/templates", "template_id", example.template_id)
    gate = _rows(run, "kappa_gate/templates", "template_id", example.template_id)
    stereotype = _rows(run, "survey_filter/stereotypes", "stereotype_id", example.stereotype_id)
    return {
        "stereotype": _records(stereotype)[0] if not stereotype.empty else None,
        "crawl": crawl_evidence(run, example.stereotype_id),
        "template": _records(template)[0] if not template.empty else None,
        "gate": _records(gate[["kappa", "kappa_note", "mean_relevance", "kept", "reason"]])[0]
        if not gate.empty
        else None,
    }


GATE_COLUMNS = ["kappa", "kappa_note", "n_items", "n_annotators", "mean_relevance", "kept", "reason"]
"""The annotation gate's figures of a template (PakBBQ §3.2), as the adaptation's template table holds them."""
SHEET_PREFIX = "bbq_"
"""The sheet's columns holding BBQ's own template (``bbq_ambiguous``, …), beside the adapted ``target_`` ones."""


def _adapted_origin(run: Path, example: pd.Series) -> dict[str, Any]:
    """Where an adaptation example comes from: its adapted template with its class (DT / TM / NA / SR), the BBQ
    template the sheet row adapts (none for a newly added NA row), the sheet row itself (file and spreadsheet row),
    the gate's kappa and mean relevance, and the template's texts as the instances were filled from."""
    row = _rows(run, "adapt/templates", "template_id", example.template_id)
    texts = _rows(run, "adapt/texts", "template_id", example.template_id)
    template = _records(row.drop(columns=GATE_COLUMNS, errors="ignore"))[0] if not row.empty else None
    sheet, bbq = _sheet_row(run, str(example.template_id))
    return {
        "template": template,
        "class": template["class"] if template else None,
        "bbq_template": bbq if template and template["class"] != "NA" else None,
        "sheet": sheet,
        "gate": _records(row[[c for c in GATE_COLUMNS if c in row.columns]])[0] if not row.empty else None,
        "texts": _records(texts)[0] if not texts.empty else None,
    }


def _sheet_row(run: Path, template_id: str) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The adaptation sheet's row of a template: its file, its spreadsheet row (header = row 1, as the build's
    errors count) and whether the file is still the one the run read; and BBQ's template as the row quotes it."""
    from ...tasks.core.inputs import read_csv_checked, spreadsheet_row

    path, state = input_file(run, "adapt_sheet")
    sheet: dict[str, Any] = {
        "file": manifest(run).get("inputs", {}).get("adapt_sheet", {}).get("path"),
        "file_is": state,
    }
    if path is None:
        return sheet | {"row": None}, None
    frame = read_csv_checked(path, ["template_id"])
    rows = frame.index[frame["template_id"] == template_id]
    if not len(rows):
        return sheet | {"row": None}, None
    record = frame.loc[rows[0]]
    bbq = {c.removeprefix(SHEET_PREFIX): record[c] for c in frame.columns if c.startswith(SHEET_PREFIX)}
    return sheet | {"row": spreadsheet_row(rows[0])}, bbq
