"""``pbbq adapt``: the review sheet from BBQ's template files, written atomically, never over a reviewed sheet
unasked, and a bad template row refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pbbq.flows.cli import main
from pbbq.tasks.adapt.sheet import SHEET_COLUMNS
from tests.adapt_support import NATIONALITY, RELIGION, VOCABULARY, write_templates


def _adapt(out: Path, *extra: str, templates: tuple[Path, ...] = (NATIONALITY, RELIGION)) -> int:
    argv = ["adapt", "--templates", *map(str, templates), "--vocabulary", str(VOCABULARY), "--out", str(out)]
    return main([*argv, *extra])


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.rstrip("\n")


def test_adapt_writes_one_row_per_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sheet.csv"
    assert _adapt(out) == 0
    assert f"50 templates (Nationality 25, Religion 25) → {out}" in capsys.readouterr().out
    header, *rows = out.read_text(encoding="utf-8").splitlines()[:2]
    assert header.split(",") == SHEET_COLUMNS
    assert rows[0].startswith("Nationality-1,,Nationality,,1,British,")
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_reviewed_sheet_is_not_overwritten_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(RELIGION,)) == 0
    reviewed = out.read_text(encoding="utf-8").replace("Religion-1,,", "Religion-1,DT,", 1)
    out.write_text(reviewed, encoding="utf-8")
    capsys.readouterr()
    assert _adapt(out) == 1
    assert _error(capsys) == (
        f"pbbq: error: {out}: already reviewed (a class or an edit is filled): --overwrite to replace"
    )
    assert out.read_text(encoding="utf-8") == reviewed
    assert _adapt(out, "--overwrite") == 0
    assert "Religion-1,DT," not in out.read_text(encoding="utf-8")


def test_an_unreviewed_sheet_is_written_again(tmp_path: Path) -> None:
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(RELIGION,)) == 0
    assert _adapt(out) == 0
    assert out.read_text(encoding="utf-8").count("\nNationality-") == 25


def test_a_bad_template_row_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_templates(tmp_path / "templates-Religion.csv", {}, {"Answer_negative": "Someone"})
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(bad,)) == 1
    assert _error(capsys).startswith(f"pbbq: error: {bad}, row 3: the negative and the non-negative answer must")
    assert not out.exists()
