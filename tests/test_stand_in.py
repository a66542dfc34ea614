"""The stand-in answer mode (``pbbq build --stand-in``, ``[llm] mode = "stand-in"``): a curator tries a change of
the sample's inputs offline. Its answers pass every validator; the build says it is stand-in (manifest, card) and
publish does not upload it."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.cli import main
from pbbq.flows.config import load_config
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import load_inputs
from pbbq.tasks.disambiguate import Prompts, disambiguate
from pbbq.tasks.instantiate import instantiate
from pbbq.tasks.kappa_gate import kappa_gate
from pbbq.tasks.llm import LLMClient
from pbbq.tasks.survey_filter import survey_filter
from pbbq.tasks.translate import translate
from pbbq.tasks.translate.glossary import load_glossary
from pbbq.tasks.translate.requests import TranslatePrompts
from tests.fakes.hub_server import FakeHub

TOKEN = "hf_test-TOKEN-secret-stand-in"  # fake, shaped unlike a real token


def test_stand_in_answers_pass_every_validator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A template of each of the sample's categories disambiguated (none left for review) and every example
    translated, with no key and no server: no answer breaks a rule and no back-translation is flagged."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    build = load_config().with_stand_in()
    config = dataclasses.replace(build.llm, store_path=tmp_path / "store.sqlite")
    client = LLMClient(config)
    tables = load_inputs(build.inputs)
    survey = survey_filter(tables["questionnaire"], tables["responses"], build.survey_filter)
    gate = kappa_gate(tables["templates"], tables["ratings"], survey["stereotypes"], build.kappa_gate)
    no_overrides = tables["disambiguation_overrides"].iloc[0:0]
    gated = gate["gated"].groupby("category").head(1)  # a template of each category: each kind of entity
    done = disambiguate(gated, survey["stereotypes"], no_overrides, Prompts.load(), client, build.disambiguate)
    assert done["review"].empty and (done["attempts"]["failures"] == "").all()
    examples = instantiate(done["templates"], survey["stereotypes"], build.instantiate)["examples"]
    glossary = load_glossary(build.inputs["glossary"])
    english = translate(examples, tables["unknown_phrases"], glossary, TranslatePrompts.load(), client, build.translate)
    segments = english["segments"]
    assert (segments["failures"] == "").all() and not segments["flagged"].any()
    assert english.report["counts"]["out"] == len(examples)
    assert client.usage("translate").requests_sent == len(english["attempts"]) + len(segments)
    groups = segments[segments["kind"] == "group"]
    assert len(groups) and groups["text_en"].str.match(r"stand-in .*group \d+$").all()


@pytest.mark.usefixtures("prefect_server")
def test_a_survey_change_builds_with_stand_in_answers_only(
    sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One respondent more accepts GEN-03 (150 → 151 of 250: over 60 %), so its template needs a disambiguation
    the sample's transcript does not hold: replay fails and names --stand-in; --stand-in builds, says so in the
    manifest and the card, and the upload is refused."""
    responses = sample_copy / "survey" / "responses.csv"
    frame = pd.read_csv(responses, dtype=str, keep_default_na=False)
    frame.loc[frame.index[frame["GEN-03"] == "no"][0], "GEN-03"] = "yes"
    frame.to_csv(responses, index=False, lineterminator="\n")
    config = sample_copy / "configs" / "sample.toml"
    outputs = tmp_path / "outputs"
    build = ["build", "--config", str(config), "--outputs", str(outputs)]

    assert main([*build, "--run-id", "replay"]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("pbbq: error: replay mode: no recorded answer for stage 'disambiguate' (template GEN-03")
    assert "--stand-in" in error

    assert main([*build, "--run-id", "tried", "--stand-in"]) == 0
    run = outputs / "tried"
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed" and manifest["parameters"]["llm"]["mode"] == "stand-in"
    assert any(warning.startswith("STAND-IN answers") for warning in manifest["warnings"])
    card = (run / "10_publish" / "hub" / "README.md").read_text(encoding="utf-8")
    assert card.split("\n---\n", 1)[1].lstrip().startswith("> **STAND-IN ANSWERS — NOT PBBQ DATA.**")
    templates = pd.read_parquet(run / "04_disambiguate" / "templates.parquet")
    assert "GEN-03-T1" in set(templates["template_id"])

    with FakeHub(token=TOKEN) as hub:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        upload = [*build, "--run-id", "upload", "--stand-in", "--upload", "--repo-id", "curator/pbbq-try"]
        assert main(upload) == 1
        assert hub.requests == [] and hub.repos == {}
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "STAND-IN placeholders (--stand-in) and it is not uploaded" in error
    assert (outputs / "upload" / "10_publish" / "hub" / "README.md").is_file()


def test_the_stand_in_checker_passes_on_the_bundled_stand_ins(capsys: pytest.CaptureFixture[str]) -> None:
    """``prompts/transcripts/stand_ins/check_stand_ins.py``, the development check of the stand-in files, holds for
    the files bundled with the sample: it fails (AssertionError) as soon as a file or the design drifts from it."""
    path = REPO_ROOT / "prompts" / "transcripts" / "stand_ins" / "check_stand_ins.py"
    spec = importlib.util.spec_from_file_location("check_stand_ins", path)
    assert spec is not None and spec.loader is not None
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    checker.main()
    assert capsys.readouterr().out.splitlines()[-1] == "OK"
