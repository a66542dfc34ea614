"""``pbbq names`` on BBQ's own records follows the name-proxy paper's protocol by default (003 §4.1: every one of
the 3,080 Nationality records → 9,240 variants; ``--proxy-gate`` applies the build's weak-proxy gate)."""

from __future__ import annotations

import json
from pathlib import Path

from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import REPO_ROOT

NATIONALITY = REPO_ROOT / "tests" / "data" / "bbq" / "Nationality.jsonl"
TABLE = REPO_ROOT / "annotations" / "names" / "names_en_bbq.csv"


def _variants(out: Path, *flags: str) -> tuple[int, dict]:
    argv = ["names", "--input", str(NATIONALITY), "--names", str(TABLE), "--lang", "en", "--out", str(out), *flags]
    assert main(argv) == 0
    lines = (out / "Nationality.names.jsonl").read_text(encoding="utf-8").splitlines()
    return len(lines), json.loads((out / "report.json").read_text(encoding="utf-8"))


def test_pbbq_names_gives_the_papers_9240_variants_by_default(tmp_path: Path) -> None:
    count, report = _variants(tmp_path / "paper")
    assert (count, report["counts"]["in"], report["counts"]["mapped"]) == (9240, 3080, 3080)
    assert report["parameters"]["drop_weak_proxies"] is False  # the paper's protocol: no proxy-strength gate
