"""What a build does with a round's decisions: each item's adjudicated decision applied only where the content
hash it judged is the hash of what the build has now; otherwise it is ``stale`` (the machine's output changed
since), reported and never applied to the new text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from .decisions import adjudicate

STATUS_COLUMNS = ["kind", "item_id", "hash", "verdict", "fix_text", "reason", "n_reviewers", "how", "status"]
"""An item's decision and what the build did with it: ``applied``, ``stale`` (its hash is not the build's),
``unresolved`` (no decision reached) or ``absent`` (the build has no such item)."""

REJECTED = "review_rejected"
"""The drop reason of an item reviewers rejected."""
UNREVIEWED = "review_required"
"""The drop reason of an item no applied decision covers, under ``[review] require = true``."""


@dataclass(frozen=True)
class Applied:
    """The decisions of one kind a stage applies: the fixed texts and rejects by item id, the items with an applied
    decision (any verdict), and every decision's status."""

    fixes: Mapping[str, str] = field(default_factory=dict)
    rejects: Mapping[str, str] = field(default_factory=dict)
    reviewed: frozenset[str] = frozenset()
    statuses: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STATUS_COLUMNS))

    def stale(self) -> list[str]:
        return sorted(self.statuses.loc[self.statuses["status"] == "stale", "item_id"])

    def report(self) -> dict:
        """For a stage's report: counts per status and verdict, and the stale items."""
        applied = self.statuses[self.statuses["status"] == "applied"]
        return {
            "decisions": len(self.statuses),
            "by_status": {str(k): int(v) for k, v in sorted(self.statuses["status"].value_counts().items())},
            "applied": {str(k): int(v) for k, v in sorted(applied["verdict"].value_counts().items())},
            "stale": self.stale(),
        }


def resolve(decisions: pd.DataFrame | None, kind: str, current: Mapping[str, str]) -> Applied:
    """The decisions of ``kind`` against ``current`` (item id → the hash of what the build has now)."""
    if decisions is None or decisions.empty:
        return Applied()
    mine = adjudicate(decisions[decisions["kind"] == kind])
    if mine.empty:
        return Applied()
    now = mine["item_id"].map(current)
    matches = now == mine["hash"]
    status = pd.Series("stale", index=mine.index)
    status[now.isna()] = "absent"
    status[matches] = "applied"
    status[matches & (mine["verdict"] == "unresolved")] = "unresolved"
    # an item judged on an earlier text and again on the current one: the current decision is the one applied
    superseded = (status == "stale") & mine["item_id"].isin(mine.loc[matches, "item_id"])
    mine = mine.assign(status=status)[~superseded]
    applied = mine[mine["status"] == "applied"]
    return Applied(
        fixes=dict(zip(*(applied.loc[applied["verdict"] == "fix", c] for c in ("item_id", "fix_text")), strict=True)),
        rejects={
            item: reason or "rejected"
            for item, reason in zip(
                *(applied.loc[applied["verdict"] == "reject", c] for c in ("item_id", "reason")), strict=True
            )
        },
        reviewed=frozenset(applied["item_id"]),
        statuses=mine[STATUS_COLUMNS].reset_index(drop=True),
    )
