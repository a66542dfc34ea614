"""The stage contract (docs/architecture.md §9): a stage is one module and one entry in a pipeline, an input file one
declaration; the flow, the manifest, the configuration, the audit, the funnel and the card pick them up with nothing
else touched."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.audit.audit import audit_text
from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.config import ConfigError, load_config
from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import StageOutput, sha256_file
from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.core.stage import Input, Pipeline, Stage, Table, finish
from tests.extra_stage import STAGE, ContextLengthParams
from tests.helpers import without_review

WITH_EXTRA = PIPELINE.inserted(STAGE, before="09_statistics")
"""The one entry: the extra stage, before statistics (whose funnel it adds a step to)."""
LIMITS = "category,max_words\nGender,200\n"


def _config(sample_copy: Path, section: str, limits: str | None = LIMITS) -> Path:
    """The sample's configuration, without its review round (a pipeline given to a build is the one it runs), with
    ``section`` added and, unless None, the extra stage's input file."""
    config = sample_copy / "configs" / "sample.toml"
    text = without_review(config.read_text(encoding="utf-8"))
    if limits is not None:
        (sample_copy / "annotations" / "context_limits.csv").write_text(limits, encoding="utf-8")
    if limits is not None and "context_limits" not in text:
        text = text.replace("[inputs]\n", '[inputs]\ncontext_limits = "../annotations/context_limits.csv"\n')
    config.write_text(text + f"\n{section}\n", encoding="utf-8")
    return config


def test_an_added_stage_runs_is_recorded_audited_and_counted(
    prefect_server: None, sample_copy: Path, tmp_path: Path
) -> None:
    config = _config(sample_copy, "[context_length]\nmax_words = 70")
    run = Path(build_pbbq(config=str(config), run_id="extra", outputs=str(tmp_path / "outputs"), pipeline=WITH_EXTRA))
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert [s["folder"] for s in manifest["stages"]] == [s.folder for s in WITH_EXTRA]  # the flow ran it, in order
    entry = next(s for s in manifest["stages"] if s["folder"] == "08_context_length")
    english = next(
        a for s in manifest["stages"] for a in s["artifacts"] if a["path"] == "07_translate/examples.parquet"
    )
    limits = sha256_file(sample_copy / "annotations" / "context_limits.csv")
    # the input hashes come from the declarations: another stage's table, and the new input file
    assert entry["inputs"] == {"examples": english["sha256"], "limits": limits}
    assert (
        manifest["inputs"]["context_limits"]["sha256"] == limits and manifest["inputs"]["context_limits"]["rows"] == 1
    )
    assert entry["drops"] == ["dropped"] and entry["words"][2] == "English contexts over the length limit"
    assert manifest["parameters"]["context_length"] == {"max_words": 70}

    folder = run / "08_context_length"
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    lengths = pd.read_parquet(folder / "lengths.parquet")
    english = pd.read_parquet(run / "07_translate" / "examples.parquet")
    limit = english["category"].map({"Gender": 200}).fillna(70).to_numpy()
    too_long = int((lengths["words"].to_numpy() > limit).sum())
    assert too_long > 0 and len(pd.read_parquet(folder / "dropped.parquet")) == too_long
    # the contract wrote the report's common part the stage left out
    assert report["stage"] == "context_length" and report["parameters"] == {"max_words": 70}
    assert report["dropped"] == {"total": too_long, "by_reason": {"context_too_long": too_long}}

    funnel = pd.read_parquet(run / "09_statistics" / "funnel.parquet")
    assert funnel.iloc[-1].tolist() == ["en_short_contexts", len(lengths) - too_long]
    card = (run / "10_publish" / "hub" / "README.md").read_text(encoding="utf-8")
    assert f"| English examples with a short context | {len(lengths) - too_long:,} |" in card

    text = audit_text(run)
    assert f"{too_long} English contexts over the length limit" in text
    assert "context too long" in text


def test_an_added_stage_brings_its_configuration_section(sample_copy: Path) -> None:
    assert load_config(_config(sample_copy, ""), WITH_EXTRA).params("context_length") == ContextLengthParams()
    with pytest.raises(ConfigError, match=r"\[context_length\] max_words = 0 is outside 1 … ∞"):
        load_config(_config(sample_copy, "[context_length]\nmax_words = 0"), WITH_EXTRA)


def test_an_added_input_is_a_configuration_key_checked_as_it_loads(sample_copy: Path, tmp_path: Path) -> None:
    from pbbq.flows.build_inputs import load_build_inputs

    with pytest.raises(ConfigError, match=r"\[inputs\] is missing context_limits"):
        load_config(_config(sample_copy, "", limits=None), WITH_EXTRA)
    build = load_config(_config(sample_copy, "", limits="category,max_words\nGender,0\n"), WITH_EXTRA)
    with pytest.raises(InputError, match=r"context_limits.csv, row 2: max_words '0' is not a positive number"):
        load_build_inputs(build, tmp_path / "outputs", log=print)


def test_without_the_entry_its_section_and_input_are_typos(sample_copy: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[inputs\] has unknown key\(s\) context_limits"):
        load_config(_config(sample_copy, ""))
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(_config(sample_copy, "[context_length]\nmax_words = 70"))


def test_a_pipeline_is_a_value_its_stages_in_order() -> None:
    assert len(PIPELINE) == 11 and STAGE not in PIPELINE.stages  # adding a stage made a new value
    assert [s.folder for s in WITH_EXTRA][7:10] == ["08_diversity", "08_context_length", "09_statistics"]
    assert {source.name for source in WITH_EXTRA.inputs()} - {s.name for s in PIPELINE.inputs()} == {"context_limits"}
    with pytest.raises(ValueError, match="stage 06_names reads 05_instantiate, not a stage before it"):
        Pipeline(tuple(s for s in PIPELINE if s.folder != "05_instantiate"))
    with pytest.raises(ValueError, match="08_context_length appears twice"):
        WITH_EXTRA.inserted(STAGE, before="10_publish")


def test_a_stage_must_write_what_it_declares() -> None:
    output = StageOutput(tables={"examples": pd.DataFrame()}, schemas={}, report={})
    with pytest.raises(ValueError, match=r"08_context_length: tables \['dropped', 'lengths'\] missing"):
        finish(STAGE, output, ContextLengthParams())
    with pytest.raises(ValueError, match="drop table"):
        Stage("99_x", "x", len, inputs={"a": Input("a")}, outputs={}, drops=("dropped",))
    assert STAGE.upstream == {"07_translate"}
    assert Stage("99_x", "x", len, inputs={"t": Table("05_instantiate", "examples")}, outputs={}).upstream == {
        "05_instantiate"
    }
