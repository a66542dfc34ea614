"""What people checked, in words: the dataset card's review section (:func:`card_section`), the audit's
(:func:`audit_lines`) and an example's review history for ``pbbq trace`` (:func:`example_history`), all from the
review stage's report and tables (:mod:`.stage`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..core.artifacts import sha256_bytes
from .items import context_item_id

ADJUDICATION = (
    "an item's decision is the one more than half of its reviewers gave (so a third reviewer settles two who "
    "disagree); otherwise the stricter one (reject over fix over accept), and two different fixes leave the item "
    "unresolved (the machine's text stays)"
)


def _alpha(value: Any) -> str:
    return "undefined" if value is None or value != value else f"{value:.2f}"


def card_section(report: Mapping[str, Any]) -> str:
    """The card's section on the review rounds: per kind, items reviewed, reviewers per item, the decisions applied
    (fixes, rejects) and stale; alpha per question; the method and its limits."""
    params = report.get("parameters", {})
    lines = ["", "## Review by people", ""]
    if params.get("label"):
        lines += [f"> **{params['label']}**", ""]
    lines += [
        f"Reviewers judged what a machine wrote ({report['counts']['reviewers']} reviewers, "
        f"{report['counts']['items']} items, {report['counts']['decisions']} decisions; docs/review.md). "
        f"Adjudication: {ADJUDICATION}. A decision applies only to the exact text it judged (by its hash): "
        f"{report['counts']['stale']} were stale (the machine's text changed since) and were not applied."
        + (" Only reviewed items are released (`require`)." if params.get("require") else ""),
        "",
        "| items | reviewed | reviewers per item | accepted | fixed | rejected | stale |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, numbers in report.get("by_kind", {}).items():
        applied = numbers.get("applied", {})
        lines.append(
            f"| {kind} | {numbers['items']} | {numbers['reviewers_per_item']:.1f} | {applied.get('accept', 0)} | "
            f"{applied.get('fix', 0)} | {applied.get('reject', 0)} | {numbers['by_status'].get('stale', 0)} |"
        )
    lines += ["", "| items | question | items rated twice or more | reviewers | Krippendorff's alpha | Fleiss' kappa |"]
    lines += ["| --- | --- | --- | --- | --- | --- |"]
    for row in report.get("agreement", []):
        lines.append(
            f"| {row['kind']} | {row['question']} | {row['n_items']} | {row['n_reviewers']} | {_alpha(row['alpha'])} "
            f"| {_alpha(row['fleiss_kappa'])} |"
        )
    decided = report.get("names_decided_by_people") or {}
    if decided:
        shown = ", ".join(f"{group.split(':', 1)[1]} {share:.2f}" for group, share in decided.items())
        lines += [
            "",
            f"Name proxies decided by people (the share of reviewers' answers naming the group): {shown}. For these "
            "groups this measure, not the classifier's, decided whether their names stand for them (same threshold); "
            "names the reviewers did not read as their group or gender left its draw. Every other group: the "
            "classifier.",
        ]
    if report.get("below_min_alpha"):
        lines += [
            "",
            f"Under the agreement asked (alpha {params.get('min_alpha')}): {', '.join(report['below_min_alpha'])}. "
            "Their decisions were applied as adjudicated; read them as one reviewer's judgment, not a consensus.",
        ]
    return "\n".join(lines) + "\n"


def audit_lines(report: Mapping[str, Any], disagreements: pd.DataFrame, first: int = 10) -> list[str]:
    """The audit's review section: the counts, the agreement per question, the stale decisions and the first
    disagreements with each reviewer's verdict."""
    counts = report.get("counts", {})
    lines = [
        f"review: {counts.get('decisions', 0)} decisions by {counts.get('reviewers', 0)} reviewers on "
        f"{counts.get('items', 0)} items; applied {counts.get('applied', 0)}, stale {counts.get('stale', 0)}"
    ]
    lines += [
        f"  {r['kind']} {r['question']}: alpha {_alpha(r['alpha'])} "
        f"({r['n_items']} items, {r['n_reviewers']} reviewers)"
        for r in report.get("agreement", [])
    ]
    lines += [f"  stale (not applied): {s['kind']} {s['item_id']}" for s in report.get("stale", [])[:first]]
    lines.append(f"  disagreements: {len(disagreements)}")
    lines += [
        f"    {r.kind} {r.item_id}: {r.verdicts} → {r.verdict} ({r.how})"
        for r in disagreements.head(first).itertuples(index=False)
    ]
    return lines


def example_history(example: Mapping[str, Any], decisions: pd.DataFrame) -> list[str]:
    """An example's review history (``example``: its source-language original): the decisions on its template's
    context and on the translations of its context and question (segments are named by their source text, as the
    translate stage names them), from the review stage's table of statuses."""
    if decisions.empty:
        return []
    items = {context_item_id(str(example.get("template_id", "")), "biased")}
    items |= {
        f"{kind}-{sha256_bytes(str(example.get(kind, '')).encode('utf-8'))[:12]}" for kind in ("context", "question")
    }
    lines = []
    for row in decisions[decisions["item_id"].isin(items)].itertuples(index=False):
        lines.append(f"review: {row.kind} {row.item_id}: {row.verdict} by {row.n_reviewers} ({row.how}), {row.status}")
    return lines


def decision_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """What changed in the review decisions between two runs (their review stages' ``decisions``): an item's
    decision added, gone, or changed in verdict, fixed text or status (applied, stale, …)."""
    key = ["kind", "item_id"]
    columns = ["verdict", "fix_text", "status"]
    empty = pd.DataFrame(columns=[*key, *columns])
    a = (old if len(old) else empty).drop_duplicates(key, keep="last").set_index(key)[columns]
    b = (new if len(new) else empty).drop_duplicates(key, keep="last").set_index(key)[columns]
    lines = [f"{kind} {item}: decided {b.at[(kind, item), 'verdict']}" for kind, item in b.index.difference(a.index)]
    lines += [f"{kind} {item}: no decision any more" for kind, item in a.index.difference(b.index)]
    both = a.index.intersection(b.index)
    for kind, item in both:
        was, now = a.loc[(kind, item)], b.loc[(kind, item)]
        changed = [f"{c} {was[c] or '∅'} → {now[c] or '∅'}" for c in columns if was[c] != now[c]]
        if changed:
            lines.append(f"{kind} {item}: " + ", ".join(changed))
    return lines
