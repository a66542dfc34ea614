"""The decisions table: one row per reviewer and item, with the content hash of what was judged, the answers to
the item's questions and the verdict (accept | fix + text | reject + reason); its loader (a build input) and the
adjudication of the reviewers' decisions into one per item.

**Adjudication** (stated, DESIGN §9): when a majority of an item's reviewers (more than half) gave the same
decision (the same verdict, and for a fix the same text), that decision holds: a third reviewer settles a
disagreement of two. Otherwise the stricter decision holds: a reject over a fix over an accept; two fixes with
different texts and no majority leave the item ``unresolved`` (the machine's text stays, the item is listed among
the disagreements for another reviewer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..core.artifacts import from_spreadsheet
from ..core.inputs import InputError, read_csv_checked, spreadsheet_row
from .items import KINDS, QUESTIONS, VERDICTS, base_kind

DECISION_COLUMNS = ["round_id", "reviewer", "kind", "item_id", "hash", "verdict", "fix_text", "reason", "answers"]
"""A reviewer's decision on an item; ``answers``: the item's questions and the reviewer's answers, as JSON."""

ADJUDICATED_COLUMNS = [
    "kind",
    "item_id",
    "hash",
    "verdict",
    "fix_text",
    "reason",
    "n_reviewers",
    "how",
    "reviewers",
    "verdicts",
]
"""An item's one decision: ``how`` it was reached (unanimous, majority, stricter, unresolved), by whom, and each
reviewer's verdict (``reviewer: verdict``, ``; ``-joined)."""

STRICTNESS = {"accept": 0, "fix": 1, "reject": 2}
_HASH = re.compile(r"[0-9a-f]{64}")


def empty_decisions() -> pd.DataFrame:
    return pd.DataFrame(columns=DECISION_COLUMNS, dtype=str)


def _first(path: Path, bad: pd.Series, problem: str | Callable[[int], str]) -> None:
    """One :class:`InputError` for the first row where ``bad`` holds, if any."""
    if bad.any():
        index = int(bad.to_numpy().nonzero()[0][0])
        raise InputError(path, spreadsheet_row(index), problem if isinstance(problem, str) else problem(index))


def _answers_problem(kind: str, text: str) -> str | None:
    """What is wrong with a decision's answers to its kind's questions (None: nothing)."""
    try:
        answers = json.loads(text or "{}")
    except json.JSONDecodeError:
        return f"answers {text[:40]!r} are not JSON"
    asked = {q.key: q for q in QUESTIONS[base_kind(kind)]}
    if not isinstance(answers, dict) or set(answers) - set(asked):
        return f"answers must be an object with keys among {', '.join(asked)}"
    for key, answer in answers.items():
        if asked[key].choices and answer not in asked[key].choices:
            return f"{key} = {answer!r} is not one of {', '.join(asked[key].choices)}"
    return None


def check_decisions(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The decisions, each row checked (one :class:`InputError` naming the file and row): a reviewer, a known kind,
    a 64-hex hash, a verdict, a fix's text, a reject's reason, answers to the kind's questions only, one decision
    per reviewer, round and item."""
    frame = frame[DECISION_COLUMNS].map(from_spreadsheet).reset_index(drop=True)
    _first(path, frame["reviewer"] == "", "no reviewer")
    kinds = frame["kind"].str.split(":", n=1).str[0]
    _first(path, ~kinds.isin(KINDS), lambda i: f"kind {frame.at[i, 'kind']!r} is not one of {', '.join(KINDS)}")
    _first(
        path,
        ~frame["hash"].str.fullmatch(_HASH.pattern),
        lambda i: f"hash {frame.at[i, 'hash'][:20]!r} is not a sha256 (64 hex digits)",
    )
    _first(
        path,
        ~frame["verdict"].isin(VERDICTS),
        lambda i: f"verdict {frame.at[i, 'verdict']!r} is not one of {', '.join(VERDICTS)}",
    )
    _first(
        path,
        (frame["verdict"] == "fix") & (frame["fix_text"] == ""),
        "verdict fix without the corrected text (fix_text)",
    )
    _first(path, (frame["verdict"] == "reject") & (frame["reason"] == ""), "verdict reject without a reason")
    problems = [
        _answers_problem(kind, text)
        for kind, text in zip(frame["kind"].tolist(), frame["answers"].tolist(), strict=True)
    ]
    bad = pd.Series([p is not None for p in problems], index=frame.index, dtype=bool)
    _first(path, bad, lambda i: str(problems[i]))
    twice = frame.duplicated(["round_id", "reviewer", "kind", "item_id"], keep="first")
    _first(
        path,
        twice,
        lambda i: f"reviewer {frame.at[i, 'reviewer']} decided item {frame.at[i, 'item_id']} twice in one round",
    )
    return frame


def load_decisions(path: Path) -> pd.DataFrame:
    """A decisions file (``pbbq review import`` writes it; ``[review] decisions`` names it), checked."""
    return check_decisions(read_csv_checked(path, DECISION_COLUMNS, allow_empty=True), path)


def answers_of(decisions: pd.DataFrame) -> pd.DataFrame:
    """The decisions with each answer in a column of its own (the question's key; empty where not asked)."""
    parsed = pd.DataFrame([json.loads(a or "{}") for a in decisions["answers"]], index=decisions.index)
    return decisions.drop(columns="answers").join(parsed.fillna("").astype(str))


def _one(group: pd.DataFrame) -> dict:
    answers = list(zip(group["verdict"], group["fix_text"], group["reason"], strict=True))
    decided = [(verdict, fix if verdict == "fix" else "") for verdict, fix, _ in answers]
    counts = pd.Series(decided).value_counts()
    top, votes = counts.index[0], int(counts.iloc[0])
    reasons = "; ".join(dict.fromkeys(r for v, _, r in answers if v == "reject" and r))
    if votes == len(decided):
        (verdict, fix), how = top, "unanimous"
    elif votes * 2 > len(decided):
        (verdict, fix), how = top, "majority"
    else:
        verdict = max((v for v, _ in decided), key=STRICTNESS.__getitem__)
        fixes = {f for v, f in decided if v == "fix"}
        how = "stricter"
        fix = ""
        if verdict == "fix":
            if len(fixes) == 1:
                fix = next(iter(fixes))
            else:
                verdict, how = "unresolved", "unresolved"
    return {
        "verdict": verdict,
        "fix_text": fix,
        "reason": reasons if verdict == "reject" else "",
        "n_reviewers": len(group),
        "how": how,
        "reviewers": "; ".join(group["reviewer"]),
        "verdicts": "; ".join(f"{r}: {v}" for r, v in zip(group["reviewer"], group["verdict"], strict=True)),
    }


def adjudicate(decisions: pd.DataFrame) -> pd.DataFrame:
    """One decision per item and judged hash, from its reviewers' (the module's rule); in the items' order."""
    if decisions.empty:
        return pd.DataFrame(columns=ADJUDICATED_COLUMNS)
    rows = [
        {"kind": kind, "item_id": item_id, "hash": digest, **_one(group)}
        for (kind, item_id, digest), group in decisions.groupby(["kind", "item_id", "hash"], sort=True)
    ]
    return pd.DataFrame(rows, columns=ADJUDICATED_COLUMNS)
