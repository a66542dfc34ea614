"""`pbbq diff`: what changed between two runs, by stable ids (docs/architecture.md §5).

Synthetic runs (tests/synthetic_run.py) pin each part of the comparison; one rebuild of the sample with one survey
answer file changed checks that the diff names exactly the stereotypes, templates and examples that changed."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from pbbq.flows.audit import EXAMPLE_TABLES
from pbbq.flows.cli import main
from pbbq.flows.diff import changes_since_previous, default_pair, diff_runs
from pbbq.flows.runs import AuditError, completed_runs

from tests.synthetic_run import make_run

NEW_ANSWER = "{stereo} گفت و {nonstereo} شنید."


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    return tmp_path / "outputs"


def test_identical_runs_have_no_change(outputs: Path) -> None:
    a, b = make_run(outputs, "a"), make_run(outputs, "b")
    found = diff_runs(a, b)
    assert not found
    assert found.text() == "Changes from run a to run b: no change"


def test_a_rejected_stereotype_names_its_templates_and_examples(outputs: Path) -> None:
    a = make_run(outputs, "a")
    b = make_run(outputs, "b", rejected=frozenset({"AGE-01"}))
    found = diff_runs(a, b)
    assert list(found.inputs) == ["responses"]
    assert found.stereotypes.changed.keys() == {"AGE-01"} and not found.stereotypes.added
    assert [(f.decision, f.id) for f in found.decisions] == [("acceptance", "AGE-01"), ("kappa gate", "AGE-01-T1")]
    assert set(found.templates.changed) == {"AGE-01-T1", "AGE-01-T2"}  # T2 was stopped already: its reason moved
    before = pd.read_parquet(a / "05_instantiate" / "examples.parquet")
    expected = sorted(before.loc[before.stereotype_id == "AGE-01", "example_id"])
    assert found.examples["fa"].removed == expected and not found.examples["fa"].changed
    assert not found.examples["fa"].added
    assert {row.split(" / ")[0] for row in (d.row for d in found.table1)} <= {"fa", "fa-names", "en"}
    assert any(d.row == "fa / Age" for d in found.table1)


def test_a_changed_llm_answer_names_the_answer_and_the_examples_it_wrote(outputs: Path) -> None:
    a = make_run(outputs, "a")
    b = make_run(outputs, "b", answers={"GEN-01-T1": NEW_ANSWER})
    found = diff_runs(a, b)
    assert found.templates.changed == {"GEN-01-T1": ["disambiguated_fa"]}
    assert [key for key, _, new in found.llm_answers["disambiguation"] if new == NEW_ANSWER] == ["GEN-01-T1 biased 1"]
    changed = found.examples["fa"].changed
    assert changed and all(i.startswith("GEN-01-T1-") and fields == ["context"] for i, fields in changed.items())
    assert not found.decisions and not found.stereotypes


def test_lists_are_cut_at_twenty_unless_all_are_asked_for(outputs: Path) -> None:
    a = make_run(outputs, "a")
    b = make_run(outputs, "b", rejected=frozenset({"AGE-01", "ETH-01"}))
    found = diff_runs(a, b)
    removed = len(found.examples["fa"].removed)
    assert removed > 20
    assert f"removed ({removed}):" in found.text() and "more" in found.text()
    assert "more" not in found.text(limit=None).split("Examples:")[1].split("Decisions")[0]
    markdown = found.markdown()
    assert markdown.startswith("## Changes from run a to run b") and "### Decisions that flipped" in markdown


def test_the_default_pair_is_the_last_two_completed_runs(outputs: Path) -> None:
    with pytest.raises(AuditError, match="holds 0 completed run"):
        default_pair(outputs)
    first = make_run(outputs, "first")
    second = make_run(outputs, "second", rejected=frozenset({"AGE-01"}))
    make_run(outputs, "broken", fail_after="03_kappa_gate")
    assert [run.name for run in completed_runs(outputs)] == ["first", "second"]
    assert default_pair(outputs) == (first, second)
    assert changes_since_previous(first).startswith("## Changes\n\nNo earlier completed run")
    assert changes_since_previous(second).startswith("## Changes from run first to run second")


def test_the_command(outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(outputs, "first")
    make_run(outputs, "second", rejected=frozenset({"AGE-01"}))
    assert main(["diff", "--outputs", str(outputs)]) == 0
    assert capsys.readouterr().out.startswith("Changes from run first to run second")
    assert main(["diff", "second", "--outputs", str(outputs), "--markdown"]) == 0
    assert "### Stereotypes" in capsys.readouterr().out
    assert main(["diff", "second", "first", "--outputs", str(outputs)]) == 0
    assert capsys.readouterr().out.startswith("Changes from run second to run first")
    assert main(["diff", "a", "b", "c", "--outputs", str(outputs)]) == 1
    assert "at most two runs" in capsys.readouterr().err
    assert main(["diff", "first", "--outputs", str(outputs)]) == 1
    assert "no completed run before first" in capsys.readouterr().err


def _flip_one_stereotype(sample_copy: Path, stereotype_id: str, answers: int) -> None:
    """Turn ``answers`` of the respondents who accepted ``stereotype_id`` into rejections."""
    path = sample_copy / "survey" / "responses.csv"
    responses = pd.read_csv(path, dtype=str, keep_default_na=False)
    accepting = responses.index[responses[stereotype_id] == "yes"][:answers]
    responses.loc[accepting, stereotype_id] = "no"
    responses.to_csv(path, index=False)


def test_changing_one_survey_answer_file_names_exactly_what_changed(
    two_builds: tuple[Path, Path], sample_copy: Path, tmp_path: Path
) -> None:
    """DOM-03 is accepted at 153/250 = 0.612; four fewer acceptances put it under the 60 % threshold."""
    from pbbq.flows.build_pbbq import build_pbbq

    first = two_builds[0]
    _flip_one_stereotype(sample_copy, "DOM-03", 4)
    config = sample_copy / "configs" / "sample.toml"
    changed = Path(build_pbbq(config=str(config), run_id="dom03", outputs=str(tmp_path / "out")))
    found = diff_runs(first, changed)
    assert list(found.inputs) == ["responses"]
    assert set(found.stereotypes.changed) == {"DOM-03"} and not found.stereotypes.added
    gated = pd.read_parquet(first / "03_kappa_gate" / "templates.parquet")
    dom03 = set(gated.loc[gated.stereotype_id == "DOM-03", "template_id"])
    assert set(found.templates.changed) == dom03 and not found.templates.added and not found.templates.removed
    assert ("acceptance", "DOM-03") in [(f.decision, f.id) for f in found.decisions]
    for config_name, table in EXAMPLE_TABLES.items():
        before = pd.read_parquet(first / f"{table}.parquet")
        expected = sorted(before.loc[before.stereotype_id == "DOM-03", "example_id"])
        assert found.examples[config_name].removed == expected, config_name
        assert not found.examples[config_name].added and not found.examples[config_name].changed, config_name
    rows = {d.row for d in found.table1}
    assert rows == {f"{c} / {r}" for c in EXAMPLE_TABLES for r in ("Domestic Area", "Total")}
    assert re.search(r"acceptance DOM-03: accepted \(0\.612.*→ not accepted \(0\.596", found.text())


def test_the_flow_writes_the_diff_as_a_markdown_artifact(two_builds: tuple[Path, Path]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async def latest() -> list[str]:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["changes"])),
                sort=ArtifactSort.CREATED_DESC,
            )
            return [str(artifact.data) for artifact in found]

    texts = asyncio.run(latest())
    assert any(text.startswith("## Changes from run first to run second") for text in texts)


def test_a_run_whose_manifest_lists_no_tables_yet_is_compared_by_its_files(
    outputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow diffs the run it is finishing, whose manifest on disk lists no stage yet: a table with the same
    bytes in both runs is known unchanged from its file's hash, and not read (at paper scale, reading and
    comparing every example took 20 s of each rebuild); only the small tables of Table 1 and 2 are always read."""
    a, b = make_run(outputs, "a"), make_run(outputs, "b")
    path = b / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "stages": []}), encoding="utf-8")
    read: list[str] = []

    def read_table(run: Path, table: str) -> pd.DataFrame:
        read.append(table)
        return pd.read_parquet(run / f"{table}.parquet")

    monkeypatch.setattr("pbbq.flows.diff.read_table", read_table)
    assert not diff_runs(a, b)
    assert sorted(set(read)) == ["08_diversity/table2", "08_diversity/table2_instances", "09_statistics/table1"]
