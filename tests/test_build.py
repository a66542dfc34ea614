"""The build-pbbq flow end to end on the bundled sample."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.cli import main
from pbbq.flows.config import load_config
from pbbq.tasks.core.artifacts import sha256_file
from tests.helpers import load_release_offline


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def _parquet_hashes(run: Path) -> dict[str, str]:
    return {
        artifact["path"]: artifact["sha256"]
        for stage in _manifest(run)["stages"]
        for artifact in stage["artifacts"]
        if artifact["path"].endswith(".parquet")
    }


def test_rebuild_is_byte_identical_and_recomputes_nothing(two_builds: tuple[Path, Path]) -> None:
    first, second = two_builds
    hashes = _parquet_hashes(first)
    assert hashes and hashes == _parquet_hashes(second)
    for path, digest in hashes.items():
        assert sha256_file(second / path) == digest
    assert not any(stage["cached"] for stage in _manifest(first)["stages"])
    # every stage but publish, which is no cached task: it uploads (side effects) into this run's own folder
    assert [s["folder"] for s in _manifest(second)["stages"] if not s["cached"]] == ["10_publish"]


def test_a_cold_rebuild_elsewhere_is_byte_identical(
    two_builds: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Not only the cache replaying its result: recomputing every stage gives the same bytes."""
    cold = Path(build_pbbq(run_id="cold", outputs=str(tmp_path_factory.mktemp("elsewhere"))))
    assert not any(stage["cached"] for stage in _manifest(cold)["stages"])
    sample = load_config().pipeline  # PBBQ's pipeline with the sample's review stage
    assert [stage["folder"] for stage in _manifest(cold)["stages"]] == [stage.folder for stage in sample]
    assert _parquet_hashes(cold) == _parquet_hashes(two_builds[0])


def test_manifest_lists_every_artifact_with_hash_rows_inputs_and_code(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    manifest = _manifest(run)
    assert manifest["status"] == "completed"
    assert set(manifest["inputs"]) == {
        "questionnaire",
        "responses",
        "templates",
        "ratings",
        "unknown_phrases",
        "disambiguation_overrides",
        "names",
        "glossary",
        "transcript",
        "crawl_sources",
        "crawl_export_sample_export",
        "crawl_export_sample_x",
        "lexicon",
        "review_decisions",
        "reviewed_names",
    }
    assert manifest["files"][0]["path"] == "transcript.jsonl"
    assert "10_publish/hub/data/fa/test-00000-of-00001.parquet" in {f["path"] for f in manifest["files"]}
    assert manifest["code_version"]["source_sha256"]
    assert manifest["parameters"]["kappa_gate"] == {"min_kappa": 0.2, "min_relevance": 1.5}
    folders = [stage["folder"] for stage in manifest["stages"]]
    assert folders == sorted(folders) and "05_instantiate" in folders
    for stage in manifest["stages"]:
        assert stage["inputs"], stage["folder"]
        for artifact in stage["artifacts"]:
            path = run / artifact["path"]
            assert sha256_file(path) == artifact["sha256"]
            if path.suffix == ".parquet":
                # a release shard is a file of its stage, its rows listed in the stage's release_files table
                rows = artifact["rows"] if artifact["rows"] is not None else _shard_rows(run, artifact["path"])
                assert len(pd.read_parquet(path)) == rows
    listed = {artifact["path"] for stage in manifest["stages"] for artifact in stage["artifacts"]}
    listed |= {artifact["path"] for artifact in manifest["files"]}
    # audit.html and run.db are written later by `pbbq audit` and `pbbq browse`, not by the build
    written_later = {"manifest.json", "audit.html", "run.db"}
    on_disk = {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()} - written_later
    assert listed == on_disk


def _shard_rows(run: Path, path: str) -> int:
    """The rows of a release shard that a stage keeps as a file (``10_data/data/…``), from its release_files table."""
    folder, shard = path.split("/", 1)
    files = pd.read_parquet(run / folder / "release_files.parquet").set_index("path")
    return int(files.loc[shard, "rows"])


def test_every_drop_is_written_with_its_reason(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    survey = json.loads((run / "02_survey" / "report.json").read_text(encoding="utf-8"))
    dropped = pd.read_parquet(run / "02_survey" / "dropped.parquet")
    assert survey["dropped"]["total"] == len(dropped) > 0
    assert sum(survey["dropped"]["by_reason"].values()) == len(dropped)
    assert {d["stereotype_id"] for d in survey["drops"]} == set(dropped["stereotype_id"])
    gate = json.loads((run / "03_kappa_gate" / "report.json").read_text(encoding="utf-8"))
    assert {"stereotype_not_accepted", "kappa_below_threshold", "relevance_below_threshold"} <= set(
        gate["dropped"]["by_reason"]
    )
    templates = pd.read_parquet(run / "03_kappa_gate" / "templates.parquet")
    gated = pd.read_parquet(run / "03_kappa_gate" / "gated.parquet")
    assert len(templates) == len(gated) + gate["dropped"]["total"]


def test_only_gated_templates_of_accepted_stereotypes_are_instantiated(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    examples = pd.read_parquet(run / "05_instantiate" / "examples.parquet")
    stereotypes = pd.read_parquet(run / "02_survey" / "stereotypes.parquet")
    gated = pd.read_parquet(run / "03_kappa_gate" / "gated.parquet")
    assert set(examples["template_id"]) <= set(gated["template_id"])
    assert set(examples["stereotype_id"]) <= set(stereotypes.loc[stereotypes["kept"], "stereotype_id"])


def test_statistics_table1_counts_match_examples(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    table1 = pd.read_parquet(run / "09_statistics" / "table1.parquet")
    configs = {
        "fa": pd.read_parquet(run / "05_instantiate" / "examples.parquet"),
        "fa-names": pd.read_parquet(run / "06_names" / "examples.parquet"),
        "en": pd.read_parquet(run / "07_translate" / "examples.parquet"),
    }
    assert set(table1["config"]) == set(configs)
    for config, examples in configs.items():
        table = table1[table1["config"] == config].set_index("category")
        assert len(table) == 17 and len(examples) > 0
        assert table.loc["Total", "samples"] == len(examples)
        assert table.drop("Total")["samples"].sum() == len(examples)
        assert table.loc["Total", "templates"] == examples["template_id"].nunique()
    funnel = pd.read_parquet(run / "09_statistics" / "funnel.parquet").set_index("step")["count"]
    assert funnel["surveyed"] >= funnel["accepted"] and funnel["templates"] >= funnel["gated"]
    assert funnel["examples"] == len(configs["fa"])
    assert (funnel["examples_fa-names"], funnel["examples_en"]) == (len(configs["fa-names"]), len(configs["en"]))
    dropped_pairs = pd.read_parquet(run / "05_instantiate" / "dropped_pairs.parquet")
    assert funnel["entity_pairs"] == funnel["pairs_without_confound"] + len(dropped_pairs)
    for reason, count in dropped_pairs["reason"].value_counts().items():
        assert funnel[f"pairs_dropped_{reason}"] == count


def test_the_build_checks_its_own_soundness_in_every_config(two_builds: tuple[Path, Path]) -> None:
    run = two_builds[0]
    table = pd.read_parquet(run / "09_statistics" / "soundness.parquet")
    assert set(table["config"]) == {"fa", "fa-names", "en"}
    assert table["violations"].sum() == 0, table.query("violations > 0").to_dict(orient="records")
    report = json.loads((run / "09_statistics" / "report.json").read_text(encoding="utf-8"))
    assert report["warnings"] == []


def test_table2_for_every_config_with_homogenization_not_computed_without_a_model(
    two_builds: tuple[Path, Path],
) -> None:
    folder = two_builds[0] / "08_diversity"
    table2 = pd.read_parquet(folder / "table2.parquet")  # the paper's Table 2: template texts, one per category
    instances = pd.read_parquet(folder / "table2_instances.parquet")  # the instantiated contexts, per config
    assert "config" not in table2.columns and set(instances["config"]) == {"fa", "fa-names", "en"}
    for table in (table2, instances):
        assert table[["ngd", "ttr", "self_bleu"]].notna().all().all()
        assert table["homogenization"].isna().all()
        assert table["homogenization_note"].str.contains("not computed").all()
    markdown = (folder / "table2.md").read_text(encoding="utf-8")
    assert "| Category | # templates | # units | NGD ↑ | NGD ÷ 4 ↑ | TTR ↑ | Self-BLEU ↓ | BERTScore ↓ |" in markdown
    assert "not computed" in markdown
    assert {p.name for p in folder.glob("*.png")} == {
        f"diversity_{kind}{m}.png" for kind in ("", "instances_") for m in ("ngd", "ttr", "self_bleu", "homogenization")
    }
    card = (two_builds[0] / "10_publish" / "hub" / "README.md").read_text(encoding="utf-8")
    assert (
        "Self-BLEU" in card and str(len(pd.read_parquet(two_builds[0] / "05_instantiate" / "examples.parquet"))) in card
    )


def test_bad_input_fails_with_message_and_leaves_earlier_runs_untouched(
    two_builds: tuple[Path, Path], sample_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = two_builds[0]
    before = {p: sha256_file(p) for p in first.rglob("*") if p.is_file()}
    ratings = sample_copy / "annotations" / "ratings.csv"
    lines = ratings.read_text(encoding="utf-8").splitlines()
    fields = lines[3].split(",")
    fields[-1] = "4"
    lines[3] = ",".join(fields)
    ratings.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = first.parent
    code = main(
        [
            "build",
            "--config",
            str(sample_copy / "configs" / "sample.toml"),
            "--outputs",
            str(outputs),
            "--run-id",
            "bad",
        ]
    )
    assert code != 0
    message = capsys.readouterr().err
    assert "ratings.csv, row 4" in message and "outside the scale 1–3" in message
    assert {p: sha256_file(p) for p in first.rglob("*") if p.is_file()} == before
    assert not (outputs / "bad").exists()  # an input error leaves no run folder (docs/runs.md)


def test_an_existing_run_folder_is_never_overwritten(two_builds: tuple[Path, Path]) -> None:
    first = two_builds[0]
    assert main(["build", "--sample", "--outputs", str(first.parent), "--run-id", first.name]) != 0
    assert _manifest(first)["status"] == "completed"


def _sample(two_builds: tuple[Path, Path], table: str) -> pd.DataFrame:
    return pd.read_parquet(two_builds[0] / f"{table}.parquet")


def test_examples_have_no_duplicates_and_per_template_counts_follow_the_product(two_builds: tuple[Path, Path]) -> None:
    for table in ("05_instantiate/examples", "06_names/examples", "07_translate/examples"):
        examples = _sample(two_builds, table)
        assert not examples.duplicated(["context", "question", "ans0", "ans1", "ans2"]).any(), table
    examples = _sample(two_builds, "05_instantiate/examples")
    assert _sample(two_builds, "05_instantiate/dropped_examples").empty
    dropped_pairs = _sample(two_builds, "05_instantiate/dropped_pairs").groupby("template_id").size()
    templates = _sample(two_builds, "04_disambiguate/templates").set_index("template_id")
    counts = examples.groupby("template_id").size()
    assert len(counts) > 32
    for template_id, count in counts.items():
        template = templates.loc[template_id]
        pairs = len(template.stereo_entities) * len(template.nonstereo_entities) - dropped_pairs.get(template_id, 0)
        assert count == pairs * max(len(template.lexical_variants), 1) * 12, template_id


def test_no_pair_mixes_genders_outside_gender_nor_age_bands_outside_age(two_builds: tuple[Path, Path]) -> None:
    from pbbq.tasks.text.cues import age_bands_differ, entity_age_band, genders_differ
    from pbbq.tasks.text.languages import language

    examples = _sample(two_builds, "05_instantiate/examples")
    pairs = examples[["category", "stereo_entity", "nonstereo_entity"]].drop_duplicates()
    for row in pairs.itertuples():
        genders = language("fa").entity_gender(row.stereo_entity), language("fa").entity_gender(row.nonstereo_entity)
        bands = entity_age_band(row.stereo_entity, "fa"), entity_age_band(row.nonstereo_entity, "fa")
        assert row.category == "Gender" or not genders_differ(*genders), row
        assert row.category == "Age" or not age_bands_differ(*bands), row
    dropped = _sample(two_builds, "05_instantiate/dropped_pairs")
    assert {"gender_confound", "age_confound"} <= set(dropped["reason"])


def test_counter_biased_continuations_are_mirrors(two_builds: tuple[Path, Path]) -> None:
    from pbbq.tasks.core.inputs import swap_roles

    templates = _sample(two_builds, "04_disambiguate/templates")
    usable = templates[templates["disambiguated_source"] != "review"]
    assert (usable["mirror_exception"] == "").all()
    assert (usable["disambiguated_counter_biased_fa"] == usable["disambiguated_fa"].map(swap_roles)).all()
    assert set(usable["counter_biased_source"]) == {"mirror"}


def test_labels_are_right_in_all_four_conditions_of_the_sample(two_builds: tuple[Path, Path]) -> None:
    examples = _sample(two_builds, "05_instantiate/examples")
    roles = {"stereotyped": "stereo_entity", "non-stereotyped": "nonstereo_entity"}
    conditions = set()
    for row in examples.itertuples():
        options = (row.ans0, row.ans1, row.ans2)
        answer = row.answer_roles[f"ans{row.label}"]
        if row.context_condition == "ambig":
            assert answer == "unknown"
        else:
            negative = "stereotyped" if row.assignment == "biased" else "non-stereotyped"
            other = "non-stereotyped" if negative == "stereotyped" else "stereotyped"
            assert answer == (negative if row.question_polarity == "neg" else other)
            assert options[row.label] == getattr(row, roles[answer])
            assert options[row.label] in row.context
        conditions.add((row.context_condition, row.assignment, row.question_polarity))
    assert len(conditions) == 6


def test_no_position_leaks_the_role_or_the_label(two_builds: tuple[Path, Path]) -> None:
    examples = _sample(two_builds, "05_instantiate/examples")
    for role in ("stereotyped", "non-stereotyped", "unknown"):
        positions = examples["answer_roles"].map(
            lambda info, role=role: [info[f"ans{i}"] for i in range(3)].index(role)
        )
        shares = positions.value_counts(normalize=True)
        assert len(shares) == 3 and shares.between(1 / 3 - 0.05, 1 / 3 + 0.05).all(), (role, shares.to_dict())
    for _, part in examples.groupby(["context_condition", "question_polarity"]):
        assert part["label"].value_counts(normalize=True).between(1 / 3 - 0.05, 1 / 3 + 0.05).all()


def test_the_release_folder_loads_offline_with_datasets(two_builds: tuple[Path, Path], tmp_path: Path) -> None:
    hub = two_builds[0] / "10_publish" / "hub"
    expected = {
        "fa": len(_sample(two_builds, "05_instantiate/examples")),
        "fa-names": len(_sample(two_builds, "06_names/examples")),
        "en": len(_sample(two_builds, "07_translate/examples")),
    }
    loaded = load_release_offline(hub, expected, tmp_path)
    assert {name: entry["rows"] for name, entry in loaded.items()} == expected
    assert loaded["fa"]["features"]["answer_info"]["ans0"] == {
        "feature": {"dtype": "string", "_type": "Value"},
        "_type": "List",
    }
