"""The stage contract (docs/architecture.md §9): a stage is one module and one entry in ``PIPELINE``; the flow, the
manifest, the configuration, the audit, the funnel and the card pick it up with nothing else touched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.audit.audit import audit_text
from pbbq.flows.build_pbbq import build_pbbq
from pbbq.flows.config import ConfigError, load_config
from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.stage import Input, Stage, Table, finish
from tests.extra_stage import STAGE, ContextLengthParams


@pytest.fixture
def extra_stage() -> Iterator[Stage]:
    """The one entry: the extra stage, before statistics (whose funnel it adds a step to)."""
    PIPELINE.insert(next(i for i, s in enumerate(PIPELINE) if s.folder == "09_statistics"), STAGE)
    yield STAGE
    PIPELINE.remove(STAGE)


def _config(sample_copy: Path, section: str) -> Path:
    config = sample_copy / "configs" / "sample.toml"
    config.write_text(config.read_text(encoding="utf-8") + f"\n{section}\n", encoding="utf-8")
    return config


def test_an_added_stage_runs_is_recorded_audited_and_counted(
    prefect_server: None, sample_copy: Path, tmp_path: Path, extra_stage: Stage
) -> None:
    config = _config(sample_copy, "[context_length]\nmax_words = 70")
    run = Path(build_pbbq(config=str(config), run_id="extra", outputs=str(tmp_path / "outputs")))
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert [s["folder"] for s in manifest["stages"]] == [s.folder for s in PIPELINE]  # the flow ran it, in order
    entry = next(s for s in manifest["stages"] if s["folder"] == "08_context_length")
    english = next(
        a for s in manifest["stages"] for a in s["artifacts"] if a["path"] == "07_translate/examples.parquet"
    )
    assert entry["inputs"] == {"examples": english["sha256"]}  # the input hash comes from the declaration
    assert entry["drops"] == ["dropped"] and entry["words"][2] == "English contexts over the length limit"
    assert manifest["parameters"]["context_length"] == {"max_words": 70}

    folder = run / "08_context_length"
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    lengths = pd.read_parquet(folder / "lengths.parquet")
    too_long = int((lengths["words"] > 70).sum())
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


def test_an_added_stage_brings_its_configuration_section(sample_copy: Path, extra_stage: Stage) -> None:
    assert load_config(_config(sample_copy, "")).context_length == ContextLengthParams()
    with pytest.raises(ConfigError, match=r"\[context_length\] max_words = 0 is outside 1 … ∞"):
        load_config(_config(sample_copy, "[context_length]\nmax_words = 0"))


def test_without_the_entry_its_section_is_a_typo(sample_copy: Path) -> None:
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(_config(sample_copy, "[context_length]\nmax_words = 70"))


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
