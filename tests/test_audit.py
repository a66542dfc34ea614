"""`pbbq audit` and `pbbq trace` on a build of the sample (DESIGN.md §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from flows.audit import AuditError, audit_text, trace, write_audit_html
from flows.cli import main


def test_audit_shows_the_funnel_every_stage_and_its_drops(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    text = audit_text(run)
    assert "funnel: candidates 48 → surveyed 48 → accepted 39" in text
    for folder in ("02_survey", "03_kappa_gate", "04_disambiguate", "05_instantiate", "06_names", "07_translate"):
        assert folder in text
    assert "kappa_below_threshold: 4" in text and "failed_validation: 1" in text
    assert "LLM 07_translate:" in text and "from the store" in text
    page = write_audit_html(run).read_text(encoding="utf-8")
    assert page.count("<table") >= 8 and page.count("data:image/png;base64,") == 4
    assert "DOM-02-T1" in page  # the continuation left in review is listed with its attempts


def test_trace_follows_a_name_variant_back_to_its_stereotype_and_llm_answers(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    variant = pd.read_parquet(run / "06_names" / "examples.parquet").iloc[0]
    traced = trace(run, variant.example_id)
    assert traced["original"]["example_id"] == variant.source_example_id
    assert traced["stereotype"]["stereotype_id"] == variant.stereotype_id and traced["stereotype"]["kept"]
    assert traced["gate"]["kappa"] >= 0.2 and traced["template"]["template_id"] == variant.template_id
    variants = {v["variant"] for v in traced["variants"]}
    assert {"names-7271", "names-861", "names-5391"} <= variants
    llm_sources = {
        traced["template"]["disambiguated_biased_source"],
        traced["template"]["disambiguated_counter_biased_source"],
    }
    if "llm" in llm_sources:
        assert traced["llm"] and all(entry["answer"] for entry in traced["llm"])
        prompt = traced["llm"][0]["messages"][0][1]
        assert "{stereo}" in prompt  # the Appendix D prompt that wrote the continuation


def test_trace_of_an_unknown_example_is_a_clear_error(two_builds: tuple[Path, Path]) -> None:
    with pytest.raises(AuditError, match="no example 'nope'"):
        trace(two_builds[0], "nope")


def test_the_commands(two_builds: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    run = two_builds[0]
    assert main(["audit", str(run)]) == 0
    assert "report:" in capsys.readouterr().out
    example = pd.read_parquet(run / "07_translate" / "examples.parquet").iloc[0].example_id
    assert main(["trace", example, "--run", run.name, "--outputs", str(run.parent)]) == 0
    assert json.loads(capsys.readouterr().out)["example"]["lang"] == "en"
    assert main(["audit", "no-such-run", "--outputs", str(run.parent)]) == 1
