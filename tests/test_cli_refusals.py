"""Arguments and runs the ``pbbq`` command refuses with one ``pbbq: error:`` line, before it reads, writes or
serves anything: empty run ids, out-of-range numbers, a port in use, a release given as a run, two runs of
different kinds to diff."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from pbbq.flows.cli import main
from pbbq.tasks.core.run_folder import RunFolder
from tests.synthetic_run import make_run


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``pbbq`` prints when it refuses ``argv`` while parsing it (exit code 2)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err.rstrip("\n")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["build", "--sample", "--run-id", ""], "argument --run-id: an empty run id names no folder"),
        (["crawl", "--sample", "--run-id", ""], "argument --run-id: an empty run id names no folder"),
        (["evaluate", "--release", "r", "--model", "m", "--eval-id", ""], "argument --eval-id: an empty run id"),
        (["names", "--input", "x", "--names", "y", "--out", "z", "--n-seeds", "0"], "argument --n-seeds: must be "),
        (["browse", "r", "--port", "-1"], "argument --port: must be from 1 to 65535, not -1"),
        (["browse", "r", "--port", "65536"], "argument --port: must be from 1 to 65535, not 65536"),
        (["browse", "r", "--port", "http"], "argument --port: 'http' is not a whole number"),
    ],
)
def test_an_argument_out_of_its_range_is_one_line(
    argv: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PBBQ_OUTPUTS", str(tmp_path / "outputs"))
    assert _refused(argv, capsys).startswith(f"pbbq: error: {line}")
    assert not (tmp_path / "outputs").exists()  # nothing started, nothing written


def test_names_with_no_seeds_writes_no_variants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["names", "--input", "in.jsonl", "--names", "names.csv", "--out", str(out), "--n-seeds", "0"]
    assert (
        _refused(argv, capsys) == "pbbq: error: argument --n-seeds: must be at least 1, not 0 (see pbbq names --help)"
    )
    assert not out.exists()


def test_a_port_in_use_is_named_before_the_database_is_built(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = make_run(tmp_path / "outputs", "r1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["browse", str(run), "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err == f"pbbq: error: port {port} on 127.0.0.1 is in use; choose another with --port\n"
    assert not (run / "run.db").exists()


def test_a_release_is_not_read_as_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A release holds its run's manifest: audit must not count its absent stages as '?' and write audit.html
    into it (nor browse write run.db there)."""
    run = make_run(tmp_path / "outputs", "r1")
    release = run / "10_publish" / "hub"
    release.mkdir(parents=True)
    shutil.copy(run / "manifest.json", release / "manifest.json")
    for argv in (["audit", str(release)], ["browse", str(release)], ["trace", "x", "--run", str(release)]):
        assert main(argv) == 1
        assert capsys.readouterr().err == (
            f"pbbq: error: {release} is a release, not a run: it holds run r1's manifest but none of the stage "
            f"folders it lists; pass its run folder {run}\n"
        )
    assert sorted(p.name for p in release.iterdir()) == ["manifest.json"]
    downloaded = Path(shutil.copytree(release, tmp_path / "downloaded"))
    assert main(["audit", str(downloaded)]) == 1
    assert capsys.readouterr().err.endswith("pass the run r1 itself (by id or folder)\n")


def test_diff_refuses_a_build_against_a_crawl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A crawl-only run has none of a build's stages past 01_crawl: every one would read as dropped."""
    outputs = tmp_path / "outputs"
    make_run(outputs, "build")
    crawl = RunFolder.create(outputs, "crawl", {"crawl": {"sources": "crawl/sources.toml"}})
    crawl.write_manifest("completed")
    assert main(["diff", "build", "crawl", "--outputs", str(outputs)]) == 1
    assert capsys.readouterr().err == (
        "pbbq: error: run build is a build and run crawl a crawl: pbbq diff compares two runs of one kind\n"
    )
    assert main(["diff", "crawl", "--outputs", str(outputs)]) == 1  # one run: against the last of its configuration
    assert capsys.readouterr().err.startswith("pbbq: error: no completed run before crawl of its configuration")
    assert json.loads((outputs / "crawl" / "manifest.json").read_text(encoding="utf-8"))["status"] == "completed"
