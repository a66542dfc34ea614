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

import numpy as np
import pandas as pd

from ..core.artifacts import FORMULA_START
from ..core.inputs import InputError, read_csv_checked, spreadsheet_row
from .items import KINDS, NAME_VERDICTS, QUESTIONS, VERDICTS, base_kind

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
    a 64-hex hash, a verdict (a name's: accept or reject), a fix's text, a reject's reason, answers to the kind's
    questions only, one decision per reviewer, round and item."""
    frame = frame[DECISION_COLUMNS].reset_index(drop=True)
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
        (kinds == "names") & ~frame["verdict"].isin(NAME_VERDICTS),
        lambda i: f"verdict {frame.at[i, 'verdict']!r} on a name: a name is accepted or rejected, never fixed",
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
    frame = read_csv_checked(path, DECISION_COLUMNS, allow_empty=True)[DECISION_COLUMNS]
    protected = frame.apply(lambda cells: cells.str.startswith("'") & cells.str[1:].str.startswith(FORMULA_START))
    return check_decisions(frame.where(~protected, frame.apply(lambda cells: cells.str[1:])), path)


def answers_of(decisions: pd.DataFrame) -> pd.DataFrame:
    """The decisions with each answer in a column of its own (the question's key; empty where not asked)."""
    parsed = pd.DataFrame([json.loads(a or "{}") for a in decisions["answers"]], index=decisions.index)
    return decisions.drop(columns="answers").join(parsed.fillna("").astype(str))


def _joined(frame: pd.DataFrame, key: list[str], column: str) -> pd.Series:
    """``column``'s values of each ``key`` group joined by ``"; "`` in their order (a column at a time: a group
    holds a few reviewers, the round many items)."""
    if frame.empty:
        return pd.Series(dtype=object, index=pd.MultiIndex.from_tuples([], names=key))
    wide = frame.set_index([*key, frame.groupby(key).cumcount()])[column].unstack()
    joined = wide[0].astype(object)
    for position in wide.columns[1:]:
        more = wide[position]
        joined = joined + np.where(more.notna(), "; " + more.fillna("").astype(str), "")
    return joined


def adjudicate(decisions: pd.DataFrame) -> pd.DataFrame:
    """One decision per item and judged hash, from its reviewers' (the module's rule), by item."""
    if decisions.empty:
        return pd.DataFrame(columns=ADJUDICATED_COLUMNS)
    key = ["kind", "item_id", "hash"]
    frame = decisions[[*key, "reviewer", "verdict", "fix_text", "reason"]].copy()
    frame["fix_text"] = frame["fix_text"].where(frame["verdict"] == "fix", "")
    frame["said"] = frame["verdict"] + "\x1f" + frame["fix_text"]
    frame["strictness"] = frame["verdict"].map(STRICTNESS)
    frame["shown"] = frame["reviewer"] + ": " + frame["verdict"]
    groups = frame.groupby(key, sort=True)
    votes = frame.groupby([*key, "said"], sort=True).size().rename("votes").reset_index()
    votes = votes.sort_values([*key, "votes", "said"], ascending=[True, True, True, False, True], kind="stable")
    top = votes.drop_duplicates(key, keep="first").set_index(key)
    fixes = frame[frame["verdict"] == "fix"].groupby(key)["fix_text"].agg(["nunique", "first"])
    given = frame[(frame["verdict"] == "reject") & (frame["reason"] != "")].drop_duplicates([*key, "reason"])
    reasons = _joined(given, key, "reason")
    table = pd.DataFrame(
        {
            "n_reviewers": groups.size(),
            "strictest": groups["strictness"].max(),
            "reviewers": _joined(frame, key, "reviewer"),
            "verdicts": _joined(frame, key, "shown"),
        }
    ).join(top[["said", "votes"]])
    table = table.join(fixes).join(reasons.rename("reasons"))
    agreed_verdict = table["said"].str.split("\x1f", n=1).str[0]
    agreed_fix = table["said"].str.split("\x1f", n=1).str[1]
    unanimous = table["votes"] == table["n_reviewers"]
    majority = table["votes"] * 2 > table["n_reviewers"]
    by_strictness = {value: verdict for verdict, value in STRICTNESS.items()}
    stricter = table["strictest"].map(by_strictness)
    verdict = agreed_verdict.where(majority, stricter)
    verdict = verdict.where(majority | (verdict != "fix") | (table["nunique"].fillna(0) == 1), "unresolved")
    fix_text = agreed_fix.where(majority, table["first"].fillna("")).where(verdict == "fix", "")
    how = pd.Series("stricter", index=table.index).where(~majority, "majority").where(~unanimous, "unanimous")
    how = how.where(verdict != "unresolved", "unresolved")
    out = pd.DataFrame(
        {
            "verdict": verdict,
            "fix_text": fix_text,
            "reason": table["reasons"].fillna("").where(verdict == "reject", ""),
            "n_reviewers": table["n_reviewers"].astype(int),
            "how": how,
            "reviewers": table["reviewers"],
            "verdicts": table["verdicts"],
        },
        index=table.index,
    ).reset_index()
    return out[ADJUDICATED_COLUMNS]
