"""`pbbq diff`: what changed between two runs, by stable ids (docs/architecture.md §5).

Synthetic runs (tests/synthetic_run.py) pin each part of the comparison; one rebuild of the sample with one survey
answer file changed checks that the diff names exactly the stereotypes, templates and examples that changed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbbq.flows.audit import diff as diff_module
from pbbq.flows.audit.diff import (
    IdChanges,
    _arrow_differs,
    _canonical_cell,
    _llm_answers,
    _rows_at,
    _rows_moved,
    changes_since_previous,
    compare,
    compare_files,
    default_pair,
    diff_runs,
    stage_changes,
)
from pbbq.flows.audit.runs import AuditError, completed_runs, example_tables, table_path
from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import sha256_file
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
    assert {t: list(values) for t, values in found.templates.changed.items()} == {"GEN-01-T1": ["disambiguated_fa"]}
    assert [key for key, _, new in found.llm_answers["disambiguation"] if new == NEW_ANSWER] == ["GEN-01-T1 biased 1"]
    changed = found.examples["fa"].changed
    assert changed and all(i.startswith("GEN-01-T1-") and list(values) == ["context"] for i, values in changed.items())
    assert not found.decisions and not found.stereotypes


def _edit(run: Path, table: str, key: str, row_id: str, column: str, value: float) -> None:
    """Set one cell of a run's table as a rebuild would have written it (the manifest records the new hash)."""
    path = run / f"{table}.parquet"
    schema = pq.read_schema(path)
    frame = pd.read_parquet(path)
    frame.loc[frame[key] == row_id, column] = value
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    for artifact in (a for stage in manifest["stages"] for a in stage["artifacts"]):
        if artifact["path"] == f"{table}.parquet":
            artifact["sha256"] = sha256_file(path)
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def _set_parameter(run: Path, folder: str, name: str, value: float) -> None:
    path = run / folder / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    report["parameters"][name] = value
    path.write_text(json.dumps(report), encoding="utf-8")


def test_changed_rows_show_old_and_new_values_and_all_shows_every_field(outputs: Path) -> None:
    a = make_run(outputs, "a")
    b = make_run(outputs, "b", rejected=frozenset({"AGE-01"}), answers={"GEN-01-T1": NEW_ANSWER * 3})
    found = diff_runs(a, b)
    assert found.stereotypes.changed["AGE-01"]["acceptance"] == (0.72, 0.58)
    lines = found.text().splitlines()
    assert (
        "    AGE-01: acceptance 0.720 → 0.580, ci_low 0.660 → 0.520, ci_high 0.780 → 0.640, n_accepting 180 → 145 "
        "… and 2 more fields" in lines
    )
    every = found.text(limit=None).splitlines()
    assert (
        "    AGE-01: acceptance 0.720 → 0.580, ci_low 0.660 → 0.520, ci_high 0.780 → 0.640, n_accepting 180 → 145, "
        "kept true → false, reason accepted → acceptance_at_or_below_0.6" in every
    )
    continuation = next(line for line in lines if line.startswith("    GEN-01-T1: disambiguated_fa"))
    assert continuation.endswith("…") and NEW_ANSWER * 3 not in continuation
    assert any(line.endswith(f" → {NEW_ANSWER * 3}") for line in every)
    assert "- AGE-01: acceptance 0.720 → 0.580" in found.markdown()  # a changed row is a sub-item of its list


def test_decisions_near_their_threshold_are_flagged_within_the_margin(outputs: Path) -> None:
    """Acceptance 0.58 is within 0.02 of the survey's 0.6, not within 0.01; kappa 0.21 and relevance 1.51 are near
    the gate's 0.2 and 1.5; a threshold the run changed (0.6 → 0.7) flags an acceptance near it (0.72)."""
    a = make_run(outputs, "a")
    b = make_run(outputs, "b", rejected=frozenset({"AGE-01"}))
    assert [n.line() for n in diff_runs(a, b).near] == ["acceptance AGE-01: 0.720 → 0.580 (threshold 0.6)"]
    assert "Decisions within 0.02 of their threshold:" in diff_runs(a, b).text()
    assert not diff_runs(a, b, margin=0.01).near
    c = make_run(outputs, "c")
    _edit(c, "03_kappa_gate/templates", "template_id", "GEN-01-T1", "kappa", 0.21)
    _edit(c, "03_kappa_gate/templates", "template_id", "GEN-01-T1", "mean_relevance", 1.51)
    assert [n.line() for n in diff_runs(a, c).near] == [
        "kappa GEN-01-T1: 0.400 → 0.210 (threshold 0.2)",
        "relevance GEN-01-T1: 2.100 → 1.510 (threshold 1.5)",
    ]
    d = make_run(outputs, "d")
    _set_parameter(d, "02_survey", "threshold", 0.7)
    assert [n.line() for n in diff_runs(a, d).near] == ["acceptance AGE-01: 0.720 → 0.720 (threshold 0.6 → 0.7)"]
    assert not diff_runs(a, make_run(outputs, "e")).near


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


def test_stage_changes_computed_during_the_build_are_used_only_against_their_run(outputs: Path) -> None:
    """The flow compares the stages' tables up to the examples while diversity and the statistics compute,
    against the run that was the previous one then; the artifact uses them only if it is still the previous one."""
    first = make_run(outputs, "first")
    second = make_run(outputs, "second", rejected=frozenset({"AGE-01"}))
    plain = changes_since_previous(second)
    assert changes_since_previous(second, stages=(first, stage_changes(first, second))) == plain
    marked = dataclasses.replace(stage_changes(first, second), examples={"fa": IdChanges(added=["MARKED-EXAMPLE"])})
    assert "MARKED-EXAMPLE" in changes_since_previous(second, stages=(first, marked))
    assert changes_since_previous(second, stages=(outputs / "another", marked)) == plain


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


def _changes_notes() -> list[str]:
    """The flows' "changes" Markdown artifacts on the test Prefect server, newest first."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async def read() -> list[str]:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["changes"])),
                sort=ArtifactSort.CREATED_DESC,
            )
            return [str(artifact.data) for artifact in found]

    return asyncio.run(read())


def _change_note(a: Path, b: Path) -> str:
    """The newest "changes" note the flow wrote for run ``b`` against run ``a``."""
    title = f"## Changes from run {a.name} to run {b.name}"
    return next(text for text in _changes_notes() if text.split("\n", 1)[0] == title)


def _diff_markdown(a: Path, b: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["diff", str(a), str(b), "--markdown"]) == 0
    return capsys.readouterr().out.rstrip("\n")


def test_changing_one_survey_answer_file_names_exactly_what_changed(
    two_builds: tuple[Path, Path], sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DOM-03 is accepted at 153/250 = 0.612; four fewer acceptances put it under the 60 % threshold. The rebuild
    runs in a copy of the first run's outputs folder, so its "changes" note compares it with the first run, and the
    note is exactly what ``pbbq diff --markdown`` says of the two runs."""
    from pbbq.flows.build_pbbq import build_pbbq

    first = tmp_path / "out" / "first"
    shutil.copytree(two_builds[0], first)
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
    for config_name, table in example_tables(first).items():
        before = pd.read_parquet(first / f"{table}.parquet")
        expected = sorted(before.loc[before.stereotype_id == "DOM-03", "example_id"])
        assert found.examples[config_name].removed == expected, config_name
        assert not found.examples[config_name].added and not found.examples[config_name].changed, config_name
    rows = {d.row for d in found.table1}
    touched = {
        c
        for c, t in example_tables(first).items()
        if (pd.read_parquet(first / f"{t}.parquet").stereotype_id == "DOM-03").any()
    }
    assert touched == {"fa", "en"}  # fa-names has no Domestic Area example: the city names are weak proxies
    assert rows == {f"{c} / {r}" for c in touched for r in ("Domestic Area", "Total")}
    text = found.text()
    assert re.search(r"acceptance DOM-03: accepted \(0\.612.*→ not accepted \(0\.596", text)
    assert "    DOM-03: n_accepting 153 → 149, acceptance 0.612 → 0.596, " in text
    assert "Decisions within 0.02 of their threshold:\n  acceptance DOM-03: 0.612 → 0.596 (threshold 0.6)\n" in text
    note = _change_note(first, changed)
    assert note == _diff_markdown(first, changed, capsys)
    assert "### Input files whose hash changed\n\n- responses: " in note and "→ none" not in note


def test_the_flow_writes_the_diff_as_a_markdown_artifact(
    two_builds: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The rebuild that changed nothing says so in its "changes" note, as ``pbbq diff --markdown`` does."""
    note = _change_note(*two_builds)
    assert note == _diff_markdown(*two_builds, capsys)
    assert note == "## Changes from run first to run second\n\nNo change."


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
        return pd.read_parquet(run / f"{table_path(run, table)}.parquet")

    monkeypatch.setattr("pbbq.flows.audit.diff.read_table", read_table)
    assert not diff_runs(a, b)
    assert sorted(set(read)) == ["diversity/table2", "diversity/table2_instances", "statistics/table1"]


_CELL_KINDS = {
    "text": st.one_of(st.none(), st.sampled_from(["", "a", "b", "زن"])),
    "number": st.one_of(st.floats(), st.sampled_from([0.0, -0.0, float("nan"), -float("nan")])),
    "count": st.integers(-3, 3),
    "texts": st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", ""]), max_size=3)),
    "numbers": st.lists(st.sampled_from([0.0, -0.0, 1.5, float("nan"), -float("nan")]), max_size=3),
    "record": st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"ans0": st.lists(st.sampled_from(["a", "b"]), max_size=2), "version": st.sampled_from(["a", "b"])}
        ),
    ),
    "loose record": st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.none(), st.sampled_from(["x", ""])), min_size=1),
    ),
}


@st.composite
def _two_versions(draw: st.DrawFn, kinds: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two versions of a table keyed by ``id`` (ids may repeat, or be in one version only); each cell of the
    second is the first's or another draw."""
    ids = st.lists(st.sampled_from("pqrst"), min_size=1, max_size=6)
    old = {"id": draw(ids)}
    new = {"id": draw(ids)}
    for n, kind in enumerate(kinds):
        old[f"{kind}{n}"] = [draw(_CELL_KINDS[kind]) for _ in old["id"]]
        new[f"{kind}{n}"] = [
            old[f"{kind}{n}"][i] if i < len(old["id"]) and draw(st.booleans()) else draw(_CELL_KINDS[kind])
            for i in range(len(new["id"]))
        ]
    return pd.DataFrame(old), pd.DataFrame(new)


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(st.sampled_from(sorted(_CELL_KINDS)), min_size=1, max_size=4).flatmap(_two_versions))
def test_comparing_two_files_on_their_arrow_tables_finds_what_their_canonical_strings_find(
    frames: tuple[pd.DataFrame, pd.DataFrame], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two versions written as parquet files: the changed cells found on their Arrow tables (what ``pbbq diff`` and
    the flow's diff do) are exactly those whose canonical strings differ, with the same old and new values."""
    folder = tmp_path_factory.mktemp("versions")
    for name, frame in zip(("old", "new"), frames, strict=True):
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / f"{name}.parquet")
    fast = compare_files(folder / "old.parquet", folder / "new.parquet", "id")
    slow = compare(pd.read_parquet(folder / "old.parquet"), pd.read_parquet(folder / "new.parquet"), ["id"])
    assert (fast.added, fast.removed) == (slow.added, slow.removed)
    assert _shown(fast.changed) == _shown(slow.changed)


def _shown(changed: dict[str, dict[str, tuple[Any, Any]]]) -> dict[str, dict[str, tuple[str, str]]]:
    """Changed fields with their old and new values as canonical strings (arrays compare element by element)."""
    return {
        row: {name: (_canonical_cell(old), _canonical_cell(new)) for name, (old, new) in fields.items()}
        for row, fields in changed.items()
    }


def test_a_nan_is_the_same_as_any_nan_and_zero_is_not_minus_zero() -> None:
    """As their canonical strings ('nan', '0.0', '-0.0'): NaNs with other bits are equal, the two zeros are not."""
    old = pa.array(np.array([np.nan, 0.0, 1.5]))
    new = pa.array(np.array([-np.nan, -0.0, 1.5]))
    assert old[0].as_py() != old[0].as_py() and np.signbit(new.to_numpy()[0])  # the bits differ
    assert _arrow_differs(old, new).tolist() == [False, True, False]


def test_comparing_two_files_reads_neither_provenance_nor_a_column_of_one_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request ids say how a row was made (most of a translated example table's bytes): not read, not shown."""
    old = pd.DataFrame({"id": ["p", "q"], "text": ["a", "b"], "llm_request_ids": [["k1"], ["k2"]], "gone": [1, 2]})
    new = pd.DataFrame({"id": ["q", "p"], "text": ["c", "a"], "llm_request_ids": [["k3"], ["k4"]]})
    for name, frame in (("old", old), ("new", new)):
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / f"{name}.parquet")
    read: list[list[str] | None] = []
    read_table = pq.read_table

    def recorded(path: Path, columns: list[str] | None = None, **options: Any) -> pa.Table:
        read.append(columns)
        return read_table(path, columns=columns, **options)

    monkeypatch.setattr(pq, "read_table", recorded)
    found = compare_files(tmp_path / "old.parquet", tmp_path / "new.parquet", "id")
    assert read == [["id", "text"], ["id", "text"]]
    assert (found.added, found.removed, found.changed) == ([], [], {"q": {"text": ("b", "c")}})


def test_a_decision_is_taken_again_only_for_a_row_whose_values_moved() -> None:
    """Missing values on both sides (None, NaN) and equal values are not a move; another value or one missing on
    one side is; runs whose tables have other columns decide every row again."""
    old = pd.DataFrame({"kept": [True, None, True, True, 1.0], "chrf": [0.5, np.nan, None, 0.5, 0.25]})
    new = pd.DataFrame({"kept": [True, None, True, False, 1.0], "chrf": [0.5, np.nan, 0.1, 0.5, 0.25]})
    assert _rows_moved(old, new).tolist() == [False, False, True, True, False]
    assert _rows_moved(old, new[["chrf", "kept"]]).tolist() == [True] * 5


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.integers(0, 9), max_size=12))
def test_rows_taken_as_slices_are_the_rows_a_gather_takes(rows: list[int]) -> None:
    table = pa.table({"n": range(10), "text": [f"t{n}" for n in range(10)], "items": [[n] * n for n in range(10)]})
    positions = np.array(rows, dtype=np.int64)
    assert _rows_at(table, positions).equals(table.take(positions))


def test_rows_that_keep_their_order_are_not_copied() -> None:
    """Two runs of consecutive rows (a changed template's rows left out between them) are slices of the read
    table: their values stay in its buffers."""
    table = pa.table({"text": [f"t{n}" for n in range(10)]})
    taken = _rows_at(table, np.array([0, 1, 2, 6, 7, 8, 9]))
    source = table.column("text").chunk(0).buffers()[2].address
    assert [chunk.buffers()[2].address for chunk in taken.column("text").chunks] == [source, source]


def test_a_changed_translation_is_found_on_the_segments_arrow_tables(
    outputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The translated segments (a paper-scale run has thousands) are compared as Arrow arrays: no cell of them is
    made a canonical string; the answers found are those the canonical comparison finds."""
    a = make_run(outputs, "a")
    b = make_run(outputs, "b", answers={"GEN-01-T1": NEW_ANSWER})
    canonical = diff_module._canonical

    def only_attempts(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
        assert "segment_id" not in frame.index.names and columns == ["answer"]  # the attempts' three-column key
        return canonical(frame, columns)

    monkeypatch.setattr(diff_module, "_canonical", only_attempts)
    found, texts = _llm_answers(a, b)
    assert texts["translation"] == [("context-2", "Text two", "Text 2")]
    assert found["translation"].changed == {"context-2": {"text_en": ("Text two", "Text 2")}}
    assert [key for key, _, new in texts["disambiguation"] if new == NEW_ANSWER] == ["GEN-01-T1 biased 1"]
