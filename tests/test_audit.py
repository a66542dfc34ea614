"""`pbbq audit`, `pbbq trace` and `RUN/audit.html` on a build of the sample (docs/architecture.md §5)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.audit.audit import AuditError, audit_text, funnel, trace
from pbbq.flows.audit.report import acceptance_chart, write_audit_html
from pbbq.flows.cli import main
from pbbq.flows.pipeline import PIPELINE
from tests.synthetic_run import make_run

REPORT_LIMIT = 300_000
"""Bytes: the report is read, not downloaded (a size budget, so the report stays quick to open)."""


def test_audit_shows_the_funnel_every_stage_and_its_drops(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    text = audit_text(run)
    assert "funnel: posts 59 → candidates 22 → candidate_clusters 15 → surveyed 48 → accepted 39" in text
    for stage in PIPELINE:
        assert stage.folder in text
    assert "kappa_below_threshold: 4" in text and "failed_validation: 1" in text
    # examples without a name proxy are not called dropped: they stay in the fa config
    assert "3060 examples without a name proxy (they stay in fa)" in text
    assert re.search(r"published rows \(fa-names\): 828", text)
    # examples whose names do not tell their groups apart: left out of fa-names, in the funnel and the drops
    assert "names_weak_proxy 408" in text and "weak proxy (all in 06_names/weak_proxy.parquet)" in text
    assert "LLM 07_translate:" in text and "from the store" in text


def test_the_report_is_small_self_contained_right_to_left_and_charted(two_builds: tuple[Path, Path]) -> None:
    path = write_audit_html(two_builds[1])
    page = path.read_text(encoding="utf-8")
    assert path.stat().st_size < REPORT_LIMIT
    assert page.count("<svg") >= 5  # acceptance, kappa, Table 1, Table 2, answer positions
    assert 'dir="auto"' in page and "Vazirmatn" in page
    assert "published rows" in page and "without a name proxy" in page
    assert "DOM-02-T1" in page  # the continuation left in review is listed with its reason
    assert "src=" not in page.replace('src="data:', "")  # nothing fetched from elsewhere
    assert "first" in page  # the changes section compares with the run before it
    # at most the first rows of a reason: 3,396 examples without a name proxy are not all on the page
    assert page.count("entity_not_in_name_table") < 20


def test_trace_follows_a_name_variant_back_to_its_stereotype_and_llm_answers(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    variant = pd.read_parquet(run / "06_names" / "examples.parquet").iloc[0]
    traced = trace(run, variant.example_id)
    assert traced["original"]["example_id"] == variant.source_example_id
    assert traced["stereotype"]["stereotype_id"] == variant.stereotype_id and traced["stereotype"]["kept"]
    assert traced["gate"]["kappa"] >= 0.2 and traced["template"]["template_id"] == variant.template_id
    variants = {v["variant"] for v in traced["variants"]}
    assert {"names-7271", "names-861", "names-5391"} <= variants
    assert traced["diff"]["status"] == "no earlier completed run of its configuration to compare with"
    if traced["template"]["disambiguated_source"] == "llm":
        assert traced["llm"] and all(entry["answer"] for entry in traced["llm"])
        assert "{stereo}" in traced["llm"][0]["messages"][0][1]  # the Appendix D input that wrote it


def _family(run: Path, original_id: str) -> dict[str, set[str]]:
    """The family of an original as the run's tables hold it: name variants, translations, dropped members."""

    def ids(table: str) -> set[str]:
        frame = pd.read_parquet(run / f"{table}.parquet")
        return set(
            frame.loc[(frame.source_example_id == original_id) | (frame.example_id == original_id), "example_id"]
        )

    return {
        "variants": ids("06_names/examples"),
        "translations": ids("07_translate/examples"),
        "drops": ids("06_names/unmapped") | ids("06_names/weak_proxy") | ids("07_translate/dropped"),
    }


def _traced_family(traced: dict) -> dict[str, set[str]]:
    return {key: {member["example_id"] for member in traced[key]} for key in ("variants", "translations", "drops")}


def test_trace_of_any_member_shows_the_whole_family(two_builds: tuple[Path, Path]) -> None:
    """An original, one of its name variants and its English version trace to one family; a family whose English
    version was dropped (pairs stay whole) shows the drop with its stage and reason, from any member."""
    run = two_builds[0]
    names = pd.read_parquet(run / "06_names" / "examples.parquet")
    english = pd.read_parquet(run / "07_translate" / "examples.parquet")
    original_id = sorted(set(names.source_example_id) & set(english.source_example_id))[0]
    family = _family(run, original_id)
    assert len(family["variants"]) == 3 and len(family["translations"]) == 1
    members = [original_id, sorted(family["variants"])[0], *family["translations"]]
    for member in members:
        traced = trace(run, member)
        assert traced["example"]["example_id"] == member and traced["dropped"] is None
        assert traced["original"]["example_id"] == original_id and traced["original"]["lang"] == "fa"
        assert _traced_family(traced) == family
    dropped = pd.read_parquet(run / "07_translate" / "dropped.parquet")
    lost = dropped[dropped.reason == "pair_incomplete"].iloc[0]
    family = _family(run, lost.source_example_id)
    assert lost.example_id in family["drops"] and not family["translations"]
    for member in (lost.source_example_id, lost.example_id):
        traced = trace(run, member)
        assert traced["original"]["example_id"] == lost.source_example_id
        assert _traced_family(traced) == family
        drop = next(d for d in traced["drops"] if d["example_id"] == lost.example_id)
        assert (drop["stage"], drop["table"], drop["reason"]) == (
            "07_translate",
            "07_translate/dropped.parquet",
            "pair_incomplete",
        )
    assert trace(run, lost.example_id)["dropped"]["reason"] == "pair_incomplete"
    assert trace(run, lost.example_id)["table"] == "07_translate/dropped"


def test_trace_in_the_second_run_says_the_example_is_unchanged(two_builds: tuple[Path, Path]) -> None:
    example = pd.read_parquet(two_builds[1] / "07_translate" / "examples.parquet").iloc[0]
    status = trace(two_builds[1], example.example_id)["diff"]
    assert status == {"previous_run": "first", "status": "unchanged", "changed_fields": []}


def test_trace_of_an_unknown_example_is_a_clear_error(two_builds: tuple[Path, Path]) -> None:
    with pytest.raises(AuditError, match=r"no example 'nope' in .*\(neither built nor dropped\)"):
        trace(two_builds[0], "nope")


def test_the_commands(two_builds: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    run = two_builds[0]
    assert main(["audit", str(run)]) == 0
    assert "report:" in capsys.readouterr().out
    example = pd.read_parquet(run / "07_translate" / "examples.parquet").iloc[0].example_id
    assert main(["trace", example, "--run", run.name, "--outputs", str(run.parent)]) == 0
    assert json.loads(capsys.readouterr().out)["example"]["lang"] == "en"
    assert main(["audit", "no-such-run", "--outputs", str(run.parent)]) == 1
    assert capsys.readouterr().err.startswith("pbbq: error: no run 'no-such-run'")


def _unanimous(n_respondents: int) -> pd.DataFrame:
    """Acceptance as the survey filter computes it for two stereotypes that every respondent answers alike."""
    from pbbq.tasks.core.inputs import DEMOGRAPHIC_COLUMNS
    from pbbq.tasks.survey_filter import SurveyParams, acceptance_rates

    questionnaire = pd.DataFrame({"stereotype_id": ["AGE-01", "AGE-02"], "category": ["Age", "Age"]})
    responses = pd.DataFrame({column: "x" for column in DEMOGRAPHIC_COLUMNS} | {"AGE-01": "no", "AGE-02": "yes"},
                             index=range(n_respondents))  # fmt: skip
    rates = acceptance_rates(questionnaire, responses, SurveyParams())
    return rates.assign(kept=rates["acceptance"] > 0.6)


@pytest.mark.parametrize("n_respondents", [1, 250, 1000])
def test_the_acceptance_chart_draws_stereotypes_accepted_by_none_or_all(n_respondents: int) -> None:
    stereotypes = _unanimous(n_respondents)
    assert stereotypes["acceptance"].tolist() == [0.0, 1.0]
    svg = acceptance_chart(stereotypes, 0.6)  # 0 of 250: statsmodels' Wilson lower end is 8.7e-19, not 0
    assert svg.startswith("<svg") and "AGE-01" in svg and "AGE-02" in svg


def test_the_audit_of_a_run_with_unanimous_answers_and_a_template_of_one_item_has_every_chart(
    prefect_server: None, sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pbbq.flows.build_pbbq import build_pbbq

    responses = sample_copy / "survey" / "responses.csv"
    answers = pd.read_csv(responses, dtype=str, keep_default_na=False)
    answers["AGE-01"], answers["AGE-02"] = "no", "yes"  # accepted at 81 % and 70 % in the sample
    answers.to_csv(responses, index=False)
    ratings = sample_copy / "annotations" / "ratings.csv"
    rated = pd.read_csv(ratings, dtype=str, keep_default_na=False)
    rated[(rated["template_id"] != "AGE-02-T1") | (rated["item_id"] == "AGE-02-T1-I1")].to_csv(ratings, index=False)
    config = sample_copy / "configs" / "sample.toml"
    run = Path(build_pbbq(config=str(config), run_id="unanimous", outputs=str(tmp_path / "outputs")))

    stereotypes = pd.read_parquet(run / "02_survey" / "stereotypes.parquet").set_index("stereotype_id")
    assert stereotypes.loc[["AGE-01", "AGE-02"], "acceptance"].tolist() == [0.0, 1.0]
    assert (
        pd.read_parquet(run / "03_kappa_gate" / "templates.parquet")
        .set_index("template_id")
        .loc["AGE-02-T1", "n_items"]
        == 1
    )
    assert main(["audit", str(run)]) == 0
    assert "report:" in capsys.readouterr().out
    page = (run / "audit.html").read_text(encoding="utf-8")
    assert page.count("<svg") == 5  # acceptance, kappa, Table 1, Table 2, answer positions
    assert "AGE-01" in page and "AGE-02-T1" in page


def _shifted(text: str) -> str:
    """Every stage folder named in ``text`` numbered 10 higher: ``02_survey`` → ``12_survey``."""
    return re.sub(r"(?<![\w.])(\d\d)_(?=[a-z])", lambda m: f"{int(m.group(1)) + 10:02d}_", text)


def test_the_audit_finds_a_runs_stages_by_their_declared_names_whatever_their_folders(tmp_path: Path) -> None:
    """A pipeline with other stages first numbers its folders otherwise (the adaptation path): the audit reads
    the stages its manifest declares, not folder names it knows."""
    run = make_run(tmp_path / "outputs", "r1")
    moved = tmp_path / "moved" / "r1"
    shutil.copytree(run, moved)
    for folder in moved.glob("[0-9][0-9]_*"):
        folder.rename(moved / _shifted(folder.name))
    (moved / "manifest.json").write_text(_shifted((run / "manifest.json").read_text(encoding="utf-8")), "utf-8")
    assert [step.count for step in funnel(moved)] == [step.count for step in funnel(run)]
    assert any(step.kind == "published" for step in funnel(moved))
    assert audit_text(moved) == _shifted(audit_text(run))
    variant = pd.read_parquet(run / "06_names" / "examples.parquet").iloc[0].example_id
    traced, original = trace(moved, variant), trace(run, variant)
    assert traced["table"] == "16_names/examples" and traced["template"] == original["template"] is not None
    assert traced["stereotype"] == original["stereotype"] is not None and traced["gate"] == original["gate"]
    assert traced["original"] == original["original"] is not None
