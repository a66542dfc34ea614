"""The run folder's rules: safe run ids, files readable under the user's umask, spreadsheet-safe CSV, and a run
whose process dies reads ``incomplete``."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from pbbq.tasks.core.artifacts import FILE_MODE, StageOutput, atomic_write_bytes, from_spreadsheet, spreadsheet_safe
from pbbq.tasks.core.run_folder import RunFolder, check_run_id, run_status


@pytest.mark.parametrize("run_id", ["", "../x", "/etc", "a/b", ".hidden", "a b", "x" * 129, "..", "a\\b"])
def test_a_run_id_that_is_not_one_safe_folder_name_is_refused(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ValueError, match="not one safe folder name"):
        RunFolder.create(tmp_path / "outputs", run_id, {})
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").iterdir())


@pytest.mark.parametrize("run_id", ["first", "2026-11-23_weekly.v2", "A-1"])
def test_safe_run_ids_are_kept(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


def test_files_follow_the_umask_not_mkstemps_0600(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    atomic_write_bytes(target, b"{}")
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE
    mask = os.umask(0o022)
    os.umask(mask)
    assert 0o666 & ~mask == FILE_MODE


def test_review_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "text": ["=1+1", '=HYPERLINK("http://x.invalid","click")', "+98 912", "-x", "@SUM(A1)", "\tx", "ok"],
            "score": [-1.5, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        }
    )
    run = RunFolder.create(tmp_path, "r", {})
    output = StageOutput(
        tables={"review": frame},
        schemas={"review": pa.schema([("text", pa.string()), ("score", pa.float64())])},
        report={},
        csv=("review",),
    )
    run.write_stage("04_x", output, inputs={}, cached=False)
    written = pd.read_csv(tmp_path / "r" / "04_x" / "review.csv", dtype={"text": str}, keep_default_na=False)
    assert not written["text"].str.match(r"[=+\-@\t\r]").any()
    assert [from_spreadsheet(v) for v in written["text"]] == list(frame["text"])
    assert written["score"].tolist() == frame["score"].tolist()  # numbers stay numbers
    assert spreadsheet_safe(frame)["text"].iloc[-1] == "ok"


def test_a_killed_run_reads_incomplete(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from pathlib import Path
        from pbbq.tasks.core.run_folder import RunFolder
        RunFolder.create(Path({str(tmp_path)!r}), "killed", {{}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    process = subprocess.run([sys.executable, "-c", script], check=False)
    assert process.returncode == -signal.SIGKILL
    manifest = json.loads((tmp_path / "killed" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "running"
    assert run_status(manifest) == "incomplete"
    assert run_status({**manifest, "process": {"pid": os.getpid(), "host": manifest["process"]["host"]}}) == "running"
    assert run_status({"status": "completed"}) == "completed"
