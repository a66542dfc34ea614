"""Issue 38: the diff compares every target's translate stage (``07_translate_ur`` beside ``07_translate``), not
only the first target's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pbbq.flows.audit.diff import _llm_answers, decisions
from tests.synthetic_run import make_run


def _urdu_segments(run: Path, text: str, flagged: bool) -> None:
    """A second target's segments table, as a build into ``targets = ["en", "ur"]`` writes it."""
    folder = run / "07_translate_ur"
    folder.mkdir()
    pd.DataFrame(
        {
            "segment_id": ["context-1", "context-2"],
            "kind": ["context", "context"],
            "text_fa": ["متن یک", "متن دو"],
            "text_ur": ["متن ایک", text],
            "back_fa": ["متن یک", "متن دو"],
            "chrf": [90.0, 40.0],
            "flagged": [False, flagged],
        }
    ).to_parquet(folder / "segments.parquet")


def test_every_target_translation_is_compared(tmp_path: Path) -> None:
    a, b = make_run(tmp_path, "a"), make_run(tmp_path, "b")
    _urdu_segments(a, "متن دو", flagged=False)
    _urdu_segments(b, "دوسرا متن", flagged=True)
    found, texts = _llm_answers(a, b)
    assert texts["translation (ur)"] == [("context-2", "متن دو", "دوسرا متن")]
    assert not found["translation"]  # the first target's answers are the same in both runs
    flips = [(flip.decision, flip.id) for flip in decisions(a, b)]
    assert ("translation review (ur)", "context-2") in flips
