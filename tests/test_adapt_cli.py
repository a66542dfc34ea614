"""``pbbq adapt``: the review sheet from BBQ's template files, written atomically, never over an existing file
unasked nor over an input, a template file or id given twice and a bad template row refused in one line."""

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


@pytest.mark.parametrize("reviewed", [True, False])
def test_an_existing_file_is_not_overwritten_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reviewed: bool
) -> None:
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(RELIGION,)) == 0
    written = out.read_text(encoding="utf-8")
    if reviewed:
        written = written.replace("Religion-1,,", "Religion-1,DT,", 1)
        out.write_text(written, encoding="utf-8")
    capsys.readouterr()
    assert _adapt(out) == 1
    assert _error(capsys) == f"pbbq: error: {out}: exists: --overwrite to replace it"
    assert out.read_text(encoding="utf-8") == written
    assert _adapt(out, "--overwrite") == 0
    assert out.read_text(encoding="utf-8").count("\nNationality-") == 25


@pytest.mark.parametrize("name", ["ratings.csv", "notes.txt"])
def test_any_existing_file_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    out = tmp_path / name
    out.write_text("template_id,item_id\nReligion-1,I1\n", encoding="utf-8")
    assert _adapt(out) == 1
    assert _error(capsys).endswith(": exists: --overwrite to replace it")
    assert out.read_text(encoding="utf-8") == "template_id,item_id\nReligion-1,I1\n"


@pytest.mark.parametrize("which", ["templates", "vocabulary"])
def test_an_input_is_never_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str) -> None:
    templates = tmp_path / "templates-Religion.csv"
    templates.write_bytes(RELIGION.read_bytes())
    vocabulary = tmp_path / "vocabulary.csv"
    vocabulary.write_bytes(VOCABULARY.read_bytes())
    target = templates if which == "templates" else vocabulary
    before = target.read_bytes()
    out = tmp_path / "sub" / ".." / target.name  # another spelling of the same file
    argv = ["adapt", "--templates", str(templates), "--vocabulary", str(vocabulary), "--out", str(out)]
    assert main([*argv, "--overwrite"]) == 1
    assert _error(capsys).startswith(f"pbbq: error: {out}: is an input of this command")
    assert target.read_bytes() == before


def test_a_template_file_given_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(RELIGION, NATIONALITY, RELIGION)) == 1
    assert _error(capsys) == f"pbbq: error: {RELIGION}: given twice (as {RELIGION})"
    assert not out.exists()


def test_templates_with_one_id_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "templates-Religion-copy.csv"
    copy.write_bytes(RELIGION.read_bytes())
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(RELIGION, copy)) == 1
    assert _error(capsys) == f"pbbq: error: {copy}: template id 'Religion-1' repeats one of {RELIGION}"
    assert not out.exists()


def test_a_bad_template_row_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_templates(tmp_path / "templates-Religion.csv", {}, {"Answer_negative": "Someone"})
    out = tmp_path / "sheet.csv"
    assert _adapt(out, templates=(bad,)) == 1
    assert _error(capsys).startswith(f"pbbq: error: {bad}, row 3: the negative and the non-negative answer must")
    assert not out.exists()
