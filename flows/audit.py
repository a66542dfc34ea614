"""Auditing a run afterwards (DESIGN.md §4): ``pbbq audit <run>`` and ``pbbq trace <example_id>``.

``audit`` reads a run folder: the funnel, every stage's counts in and out with its drops per reason, the
warnings and the LLM usage, printed as text and written as a static HTML report (``audit.html`` in the run
folder) with the drop tables, Table 1, Table 2 and the charts. ``trace`` follows one example back through
the run: its template and where its disambiguated context came from, the stereotype with its survey figures,
the template's kappa, the LLM prompts and answers behind it, and its name-proxy and English variants.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.artifacts import atomic_write_bytes
from tasks.llm import usage_summary

EXAMPLE_TABLES = ("05_instantiate/examples", "06_names/examples", "07_translate/examples")
DROP_TABLES = (
    "02_survey/dropped",
    "03_kappa_gate/dropped",
    "04_disambiguate/review",
    "05_instantiate/dropped_templates",
    "05_instantiate/dropped_examples",
    "06_names/unmapped",
    "07_translate/dropped",
)


class AuditError(ValueError):
    """A run folder or an example that cannot be found or read."""


def run_folder(run: str, outputs: Path) -> Path:
    """A run by id (under ``outputs``) or by path; it must hold a manifest."""
    for candidate in (Path(run), outputs / run):
        if (candidate / "manifest.json").is_file():
            return candidate
    raise AuditError(f"no run {run!r}: neither {run} nor {outputs / run} holds a manifest.json")


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _table(run: Path, name: str) -> pd.DataFrame:
    path = run / f"{name}.parquet"
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame()


def stage_summary(run: Path) -> pd.DataFrame:
    """One row per stage: rows in and out, drops per reason, recomputed or cached."""
    rows = []
    for stage in _json(run / "manifest.json")["stages"]:
        report = _json(run / stage["folder"] / "report.json")
        counts, dropped = report.get("counts", {}), report.get("dropped", {})
        rows.append(
            {
                "stage": stage["folder"],
                "in": counts.get("in"),
                "out": counts.get("out"),
                "dropped": dropped.get("total", 0),
                "by reason": ", ".join(f"{k}: {v}" for k, v in dropped.get("by_reason", {}).items()),
                "cached": stage["cached"],
            }
        )
    return pd.DataFrame(rows)


def audit_text(run: Path) -> str:
    """The run at a glance, for the terminal."""
    manifest = _json(run / "manifest.json")
    lines = [f"run {manifest['run_id']} ({manifest['status']}), code {manifest['code_version'].get('git_commit')}"]
    if manifest.get("error"):
        lines.append(f"error: {manifest['error']}")
    funnel = _table(run, "09_statistics/funnel")
    if not funnel.empty:
        lines.append("funnel: " + " → ".join(f"{r.step} {r.count}" for r in funnel.itertuples()))
    lines += ["", stage_summary(run).to_string(index=False), ""]
    for stage in manifest["stages"]:
        report = _json(run / stage["folder"] / "report.json")
        lines += [f"warning ({stage['folder']}): {w}" for w in report.get("warnings", [])]
        if report.get("llm"):
            lines += [f"LLM {line}" for line in usage_summary({stage["folder"]: report})]
    return "\n".join(lines)


def _cell(value: Any) -> Any:
    """Lists, arrays and structs as JSON, so a table cell shows them whole."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    return json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, list | dict) else value


def _section(title: str, frame: pd.DataFrame, limit: int = 200) -> str:
    if frame.empty:
        return f"<h2>{html.escape(title)}</h2><p>none</p>"
    shown = frame.head(limit).map(_cell)
    more = f"<p>first {limit} of {len(frame)} rows; all in the parquet</p>" if len(frame) > limit else ""
    return f"<h2>{html.escape(title)}</h2>{shown.to_html(index=False, escape=True, na_rep='')}{more}"


def write_audit_html(run: Path) -> Path:
    """A static HTML report of the run (one file, charts embedded), written to ``<run>/audit.html``."""
    parts = [
        f"<h1>PBBQ run {html.escape(run.name)}</h1><pre>{html.escape(audit_text(run))}</pre>",
        _section("Funnel", _table(run, "09_statistics/funnel")),
        _section("Stages", stage_summary(run)),
        _section("Table 1: templates and samples per category", _table(run, "09_statistics/table1")),
        _section("Table 2: diversity per category", _table(run, "08_diversity/table2")),
    ]
    parts += [_section(f"Dropped: {name}", _table(run, name)) for name in DROP_TABLES]
    for chart in sorted((run / "08_diversity").glob("*.png")):
        data = base64.b64encode(chart.read_bytes()).decode()
        name = html.escape(chart.stem)
        parts.append(f'<h2>{name}</h2><img alt="{name}" src="data:image/png;base64,{data}">')
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>PBBQ audit</title>'
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;unicode-bidi:plaintext}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )
    target = run / "audit.html"
    atomic_write_bytes(target, page.encode("utf-8"))
    return target


def _transcript(run: Path) -> dict[str, dict[str, Any]]:
    path = run / "transcript.jsonl"
    if not path.is_file():
        return {}
    data = path.read_bytes()
    text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    records = [json.loads(line) for line in text.splitlines()[1:] if line.strip()]
    return {record["key"]: record for record in records}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", force_ascii=False))


def trace(run: Path, example_id: str) -> dict[str, Any]:
    """Everything the run knows about one example, from its stereotype to its variants."""
    examples = pd.concat([_table(run, name) for name in EXAMPLE_TABLES], ignore_index=True)
    found = examples[examples["example_id"] == example_id]
    if found.empty:
        raise AuditError(f"no example {example_id!r} in {run}")
    example = found.iloc[0]
    original_id = example.source_example_id or example.example_id
    original = examples[examples["example_id"] == original_id]
    template = _table(run, "04_disambiguate/templates").query("template_id == @example.template_id")
    gate = _table(run, "03_kappa_gate/templates").query("template_id == @example.template_id")
    stereotype = _table(run, "02_survey/stereotypes").query("stereotype_id == @example.stereotype_id")
    attempts = _table(run, "04_disambiguate/attempts").query("template_id == @example.template_id")
    transcript = _transcript(run)
    llm = []
    for key in dict.fromkeys([*attempts.get("request_id", []), *example.llm_request_ids]):
        record = transcript.get(key)
        if record is not None:
            llm.append({"request_id": key, "messages": record["request"]["messages"], "answer": record["response"]})
    variants = examples[examples["source_example_id"] == original_id]
    return {
        "example": _records(found)[0],
        "original": _records(original)[0] if not original.empty else None,
        "stereotype": _records(stereotype)[0] if not stereotype.empty else None,
        "template": _records(template)[0] if not template.empty else None,
        "gate": _records(gate[["kappa", "kappa_note", "mean_relevance", "kept", "reason"]])[0]
        if not gate.empty
        else None,
        "disambiguation_attempts": _records(attempts),
        "llm": llm,
        "variants": _records(
            variants[["example_id", "lang", "variant", "context", "question", "ans0", "ans1", "ans2"]]
        ),
    }
