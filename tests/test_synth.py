"""``pbbq synth`` (tasks/synth/__init__.py): synthetic inputs at the paper's scale, and publish's refusal of them.

The plan is checked at every scale against PBBQ Table 1 (no files written); the files themselves at the hidden
``tiny`` scale (one template per category): the same seed gives the same bytes, every table passes its real
loader, the build's stages find the planned counts, the transcript answers every request the build makes, the
build runs end to end offline, and publish refuses to upload it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.cli import main
from pbbq.flows.config import load_config
from pbbq.tasks.core.inputs import load_inputs
from pbbq.tasks.disambiguate import Prompts, disambiguate
from pbbq.tasks.instantiate import instantiate
from pbbq.tasks.kappa_gate import kappa_gate
from pbbq.tasks.llm import LLMClient, LLMConfig, ResponseStore
from pbbq.tasks.names.tables import load_name_table
from pbbq.tasks.publish.hub import PublishError, UploadResult
from pbbq.tasks.statistics import table1
from pbbq.tasks.survey_filter import survey_filter
from pbbq.tasks.synth import SynthError, plan, synthesize
from pbbq.tasks.synth.files import LLM_SECTION, TRANSCRIPT
from pbbq.tasks.synth.scale import SCALES, TABLE1
from pbbq.tasks.text.categories import CATEGORIES
from pbbq.tasks.translate import translate
from pbbq.tasks.translate.glossary import load_glossary
from pbbq.tasks.translate.requests import TranslatePrompts
from tests.release_support import publish_stage

SEED = 7
FUNNEL = pd.DataFrame([("surveyed", 18), ("examples", 384)], columns=["step", "count"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth") / "tiny"
    synthesize(folder, "tiny", SEED, read_config=load_config)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_paper_scale_plan_is_table1() -> None:
    """PBBQ Table 1's templates per category exactly, its samples per category to the nearest multiple of 12
    (the examples of one entity pair and variant), 307 stereotypes of which 233 accepted (§3.2), 24 more templates
    that fail the gate. (Table 1's rows sum to 39,274 samples, though its Total row says 37,742.)"""
    plans = {p.category: p for p in plan("paper")}
    assert set(plans) == set(CATEGORIES) == set(TABLE1)
    for category, (templates, samples) in TABLE1.items():
        assert plans[category].templates == templates
        assert abs(plans[category].examples - samples) <= 6 and plans[category].examples % 12 == 0
        assert 1 <= plans[category].accepted <= templates
    assert sum(p.templates for p in plans.values()) == 276
    assert sum(p.stereotypes for p in plans.values()) == 307
    assert sum(p.accepted for p in plans.values()) == 233
    assert sorted(k for p in plans.values() for k in p.failing) == ["kappa"] * 12 + ["rejected"] * 6 + ["relevance"] * 6
    assert sum(p.examples for p in plans.values()) == 39_276


@pytest.mark.parametrize("scale", ["half", "quarter"])
def test_smaller_scales_are_proportional(scale: str) -> None:
    share = SCALES[scale]
    for p in plan(scale):
        templates, samples = TABLE1[p.category]
        assert abs(p.templates - templates * share) <= 0.5
        assert abs(p.examples - samples * share) <= 6 or p.examples == 12 * p.templates
        assert 1 <= p.accepted <= p.templates
    assert abs(sum(p.stereotypes for p in plan(scale)) - 307 * share) <= 1.5


def test_the_same_seed_gives_the_same_bytes_and_another_seed_other_data(tiny: Path, tmp_path: Path) -> None:
    synthesize(tmp_path / "again", "tiny", SEED, read_config=load_config)
    assert _files(tmp_path / "again") == _files(tiny)
    synthesize(tmp_path / "other", "tiny", SEED + 1, read_config=load_config)
    other = _files(tmp_path / "other")
    assert other["survey/questionnaire.csv"] != _files(tiny)["survey/questionnaire.csv"]


def test_every_table_passes_its_loader_and_says_synthetic(tiny: Path) -> None:
    build = load_config(tiny / "build.toml")
    tables = load_inputs(build.inputs)
    assert len(load_name_table(build.inputs["names"], tables["templates"])) > 0
    assert len(load_glossary(build.inputs["glossary"])) > 0
    assert len(tables["disambiguation_overrides"]) >= 1
    assert (tables["templates"]["disambiguated_fa"] != "").any()
    assert tables["questionnaire"]["stereotype_id"].str.startswith("SYNTH-").all()
    assert tables["questionnaire"]["statement_en"].str.startswith("[SYNTHETIC]").all()
    assert tables["responses"]["respondent_id"].str.startswith("SYNTH-").all() and len(tables["responses"]) == 250
    assert build.publish.synthetic and build.publish.dry_run and build.llm.mode == "replay"
    assert ResponseStore.from_transcript(tiny / TRANSCRIPT).header["synthetic"] is True
    assert json.loads((tiny / "synth.json").read_text())["synthetic"] is True
    assert "SYNTHETIC" in (tiny / "README.md").read_text() and "SYNTHETIC" in (tiny / "build.toml").read_text()


def test_the_stages_find_the_planned_counts_per_category(tiny: Path) -> None:
    counts = json.loads((tiny / "synth.json").read_text())["counts"]
    for p in plan("tiny"):
        found = counts[p.category]
        assert found["stereotypes"] == p.stereotypes and found["accepted"] == p.accepted
        assert found["templates"] == p.templates + len(p.failing) and found["gated"] == p.templates
        assert found["fa"] == found["en"] == p.examples


def test_the_transcript_answers_every_request_in_replay(tiny: Path) -> None:
    """The LLM stages run with the real client in replay mode on the transcript alone: a request it does not
    answer would raise ReplayMissError. Every answer passes its validators (no review, no English drop), and
    the transcript holds no answer the build does not ask for."""
    build = load_config(tiny / "build.toml")
    tables = load_inputs(build.inputs)
    config = dataclasses.replace(LLMConfig.from_mapping(LLM_SECTION, env={}), store_path=Path(":memory:"))
    client = LLMClient(config, ResponseStore(config.store_path), transcript=tiny / TRANSCRIPT)
    recorded = len(client.store)
    survey = survey_filter(tables["questionnaire"], tables["responses"], build.survey_filter)
    gate = kappa_gate(tables["templates"], tables["ratings"], survey["stereotypes"], build.kappa_gate)
    overrides = tables["disambiguation_overrides"]
    disambiguated = disambiguate(
        gate["gated"], survey["stereotypes"], overrides, Prompts.load(), client, build.disambiguate
    )
    examples = instantiate(disambiguated["templates"], survey["stereotypes"], build.instantiate)["examples"]
    glossary = load_glossary(build.inputs["glossary"])
    english = translate(examples, tables["unknown_phrases"], glossary, TranslatePrompts.load(), client, build.translate)
    asked = {*disambiguated["attempts"]["request_id"], *english["segments"]["request_ids"].explode().dropna()}
    assert len(asked) == recorded
    assert disambiguated["review"].empty and (disambiguated["attempts"]["attempt"] == 2).any()
    assert english["dropped"].empty and len(english["examples"]) == len(examples)


def test_publish_refuses_a_synthetic_build_unless_forced(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = load_config(tiny / "build.toml")
    tables = load_inputs(build.inputs)
    survey = survey_filter(tables["questionnaire"], tables["responses"], build.survey_filter)
    templates = tables["templates"].assign(
        disambiguated_fa="{stereo} دیر آمد، اما {nonstereo} زود آمد.",
        disambiguated_counter_biased_fa="{nonstereo} دیر آمد، اما {stereo} زود آمد.",
        category=tables["templates"]["stereotype_id"].map(survey["stereotypes"].set_index("stereotype_id")["category"]),
    )
    examples = instantiate(templates, survey["stereotypes"], build.instantiate)["examples"]
    stage = {"table1": table1(examples), "table2": None, "funnel": FUNNEL, "manifest_path": tiny / "synth.json"}
    stage |= {"transcript_path": None, "build_id": "synthetic-test", "build_config": "build.toml"}
    uploads: list[str] = []

    def upload_release(folder: Path, repo_id: str, **_: object) -> UploadResult:
        uploads.append(repo_id)
        return UploadResult(f"https://hub.invalid/{repo_id}", "0" * 40, True, "synthetic-test", ())

    monkeypatch.setattr("pbbq.tasks.publish.upload_release", upload_release)

    dry = publish_stage(tmp_path / "dry", examples, params=build.publish, **stage)
    assert dry.report["synthetic"] and "SYNTHETIC" in (tmp_path / "dry" / "hub" / "README.md").read_text()
    upload = dataclasses.replace(build.publish, dry_run=False, repo_id="org/pbbq")
    with pytest.raises(PublishError, match="SYNTHETIC"):
        publish_stage(tmp_path / "refused", examples, params=upload, **stage)
    unflagged = dataclasses.replace(upload, synthetic=False)  # the SYNTH- ids still say it
    with pytest.raises(PublishError, match="SYNTHETIC"):
        publish_stage(tmp_path / "ids", examples, params=unflagged, **stage)
    assert uploads == []
    forced = dataclasses.replace(upload, force_synthetic=True)
    assert publish_stage(tmp_path / "forced", examples, params=forced, **stage).report["upload"]["committed"]
    assert uploads == ["org/pbbq"]


def test_the_tiny_build_builds_offline_end_to_end(tiny: Path, tmp_path: Path, prefect_server: None) -> None:
    """``pbbq build --config DIR/build.toml``'s flow, in replay mode: every stage runs, the counts are the plan's,
    and the release is marked synthetic."""
    from pbbq.flows.build_pbbq import build_pbbq

    run = Path(build_pbbq(config=str(tiny / "build.toml"), outputs=str(tmp_path)))
    assert json.loads((run / "manifest.json").read_text())["status"] == "completed"
    fa = pd.read_parquet(run / "05_instantiate" / "examples.parquet").groupby("category").size()
    en = pd.read_parquet(run / "07_translate" / "examples.parquet").groupby("category").size()
    assert {p.category: p.examples for p in plan("tiny")} == fa.to_dict() == en.to_dict()
    report = json.loads((run / "10_publish" / "report.json").read_text())
    assert report["synthetic"] and report["dry_run"]
    assert "SYNTHETIC — NOT PBBQ DATA" in (run / "10_publish" / "hub" / "README.md").read_text()


def test_the_command_line_refuses_a_folder_in_use_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    assert main(["synth", "--scale", "tiny", "--out", str(tmp_path / "used")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("pbbq: error:") and "not an empty folder" in error and "\n" not in error
    with pytest.raises(SynthError, match="scale"):
        plan("double")
    with pytest.raises(SystemExit):
        main(["synth", "--scale", "double", "--out", str(tmp_path / "x")])


def test_a_scale_the_phrase_book_cannot_make_fails_before_anything_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """BharatBBQ's size (1.25 × the paper's) asks more Gender stereotypes than the phrase book's groups × traits."""
    monkeypatch.setitem(SCALES, "bharat", 1.25)
    with pytest.raises(SynthError, match="scale 'bharat': Gender needs 49 stereotypes; the phrase book makes 40"):
        plan("bharat")
