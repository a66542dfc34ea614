"""`pbbq browse`: the run's tables in one SQLite file, served by Datasette with facets (docs/architecture.md §5)."""

from __future__ import annotations

import json
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest

from pbbq.flows.audit.browse import build_db, metadata, table_name
from pbbq.flows.audit.runs import drop_tables, stage_folders, stage_report
from tests.synthetic_run import make_run


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "outputs", "r1")


def test_table_names() -> None:
    assert table_name(Path("06_names/unmapped.parquet")) == "06_names_unmapped"
    assert table_name(Path("10_publish/hub/data/fa-names/test-00000-of-00001.parquet")) == "release_fa-names"


def test_the_database_holds_every_table_once_and_is_read_only(run: Path) -> None:
    db = build_db(run)
    assert not stat.S_IMODE(db.stat().st_mode) & 0o222
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        names = {row[0] for row in connection.execute("select name from sqlite_master")}
        parquet = [table_name(p.relative_to(run)) for p in run.rglob("*.parquet")]
        assert set(parquet) <= names and {"examples", "drops", "run_inputs", "run_stages"} <= names
        for path in run.rglob("*.parquet"):
            count = connection.execute(f'select count(*) from "{table_name(path.relative_to(run))}"').fetchone()[0]
            assert count == len(pd.read_parquet(path)), path
        configs = dict(connection.execute("select config, count(*) from examples group by config").fetchall())
        assert configs == {
            c: len(pd.read_parquet(run / f"{t}.parquet")) for c, t in (("fa", "05_instantiate/examples"),
                                                                        ("fa-names", "06_names/examples"),
                                                                        ("en", "07_translate/examples"))
        }  # fmt: skip
    mtime = db.stat().st_mtime_ns
    assert build_db(run) == db and db.stat().st_mtime_ns == mtime  # written once


def test_a_run_that_changed_gets_a_new_database(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    run = make_run(outputs, "r1")
    first = build_db(run).stat().st_ino
    (run / "manifest.json").write_text((run / "manifest.json").read_text().replace('"completed"', '"completed" '))
    assert build_db(run).stat().st_ino != first


def test_facets_and_saved_queries(run: Path) -> None:
    db = build_db(run)
    database = metadata(run, db)["databases"]["run"]
    assert database["tables"]["drops"]["facets"][:2] == ["reason", "stage"]
    assert "config" in database["tables"]["examples"]["facets"]
    assert set(database["queries"]) == {"drops_by_reason", "example_lineage"}
    example = pd.read_parquet(run / "06_names" / "examples.parquet").iloc[0]
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        steps = connection.execute(database["queries"]["example_lineage"]["sql"], {"example_id": example.example_id})
        kinds = [row[1] for row in steps.fetchall()]
    assert kinds[0] == "example (fa-names)" and kinds[1] == "original (fa)"
    assert any(k.startswith("kappa gate: ") for k in kinds) and any(k.startswith("survey: ") for k in kinds)
    assert "crawl candidate" in kinds


def _drops(db: Path) -> dict[tuple[str, str], int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        rows = connection.execute("select stage, reason, count(*) from drops group by stage, reason").fetchall()
    return {(stage, reason): count for stage, reason, count in rows}


def _reported(run: Path) -> dict[tuple[str, str], int]:
    """Every stage's drops per reason, as its report counts them."""
    return {
        (folder, reason): count
        for folder in stage_folders(run)
        for reason, count in stage_report(run, folder).get("dropped", {}).get("by_reason", {}).items()
    }


def test_the_drops_table_is_every_stage_s_drops_in_a_sample_build(two_builds: tuple[Path, Path]) -> None:
    """Every drop its stage counts, from the tables it declares (the disambiguation's review sheet has no reason
    column: its drop comes from the report's list), and no other row with a reason (the survey's kept
    stereotypes, the gate's templates table)."""
    run = two_builds[0]
    db = build_db(run)
    assert _drops(db) == _reported(run)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        sources = connection.execute("select distinct stage, source_table from drops").fetchall()
        review = connection.execute("select id from drops where stage = '04_disambiguate'").fetchall()
    assert review == [("DOM-02-T1",)]
    for stage, source in sources:
        assert source.removeprefix(f"{stage}_") in drop_tables(run, stage), source


def test_rows_a_stage_does_not_count_as_drops_are_not_drops(run: Path) -> None:
    """Name variants that no name table covers stay in the names stage's table with their reason, but a names report
    that does not count them as dropped (they are not covered, not dropped) keeps them out of ``drops``."""
    report = run / "06_names" / "report.json"
    names = json.loads(report.read_text(encoding="utf-8"))
    uncovered = names["dropped"]["total"]
    assert uncovered and len(pd.read_parquet(run / "06_names" / "unmapped.parquet")) == uncovered
    names.update(dropped={"total": 0, "by_reason": {}}, not_covered=uncovered)
    report.write_text(json.dumps(names), encoding="utf-8")
    found = _drops(build_db(run))
    assert found == _reported(run) and not any(stage == "06_names" for stage, _ in found)
    assert found[("04_disambiguate", "failed_validation")] == 1


def test_pbbq_browse_serves_a_table_and_a_facet(run: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "pbbq.flows.cli", "browse", str(run), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}/run"
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"{base}/drops.json", params={"_facet": "reason", "_shape": "objects"})
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, "Datasette did not start within 60 s"
                time.sleep(0.3)
        assert response.status_code == 200
        body = response.json()
        facet = {row["value"]: row["count"] for row in body["facet_results"]["reason"]["results"]}
        # the names stage's uncovered examples stay in fa: not drops
        assert facet["kappa_below_threshold"] == 1 and "entity_not_in_name_table" not in facet
        assert httpx.get(f"{base}/02_survey_stereotypes.json").json()["rows"]
    finally:
        server.terminate()
        server.wait(timeout=20)
