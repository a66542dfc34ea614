"""A gate that keeps nothing is a result (docs/architecture.md §1, §3): every stage after it takes empty tables and
writes empty tables of its declared schemas, the release holds empty configs its card calls empty, and the run is
completed with a warning naming the stage, in its manifest and its audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pbbq.flows.audit.audit import audit_text
from pbbq.flows.audit.report import write_audit_html
from pbbq.flows.config import load_config
from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.example_cap import ExampleCap
from pbbq.tasks.core.inputs import load_inputs
from pbbq.tasks.core.schemas import SchemaError, empty_frame, to_arrow
from pbbq.tasks.core.stage import Sources, arguments, finish
from pbbq.tasks.kappa_gate import GateParams
from pbbq.tasks.llm import LLMConfig, open_llm
from pbbq.tasks.names import load_name_table
from pbbq.tasks.publish import RELEASE_DATA
from pbbq.tasks.publish.release import RELEASE
from pbbq.tasks.translate.glossary import load_glossary
from tests.helpers import stage_by_folder

AFTER_THE_GATES = [stage.folder for stage in PIPELINE if stage.folder >= "04"]
"""The stages that read only what the gates kept."""


def test_an_empty_frame_is_its_schemas_empty_table_whatever_dtypes_pandas_gave_it() -> None:
    # pandas gives a column mapped from nothing the dtype str, which Arrow cannot cast to a list
    frame = pd.DataFrame({"ids": pd.Series([], dtype="str"), "info": pd.Series([], dtype="float64")})
    schema = pa.schema([("ids", pa.list_(pa.string())), ("info", pa.struct([("text", pa.string())]))])
    assert to_arrow(frame, schema, "t").schema == schema


def test_a_value_arrow_cannot_cast_is_a_schema_error_naming_the_table() -> None:
    frame = pd.DataFrame({"ids": pd.Series(["a"], dtype="str")})
    with pytest.raises(SchemaError, match="table 'examples'"):
        to_arrow(frame, pa.schema([("ids", pa.list_(pa.string()))]), "examples")


@pytest.fixture(scope="module")
def sample_tables() -> dict[str, Any]:
    """The sample's inputs as a build loads them (the crawl's posts aside)."""
    build = load_config()
    tables: dict[str, Any] = load_inputs(build.inputs)
    tables["names"] = load_name_table(build.inputs["names"], tables["templates"])
    tables["glossary"] = load_glossary(build.inputs["glossary"])
    return tables


def _empty_outputs() -> dict[str, StageOutput]:
    """Every stage's output as a stage that kept nothing leaves it: each declared table empty (the crawl skipped)."""
    return {
        stage.folder: StageOutput(
            {name: empty_frame(schema) for name, schema in stage.outputs.items()},
            dict(stage.outputs),
            {"skipped": True} if stage.folder == "01_crawl" else {},
        )
        for stage in PIPELINE
    }


@pytest.mark.parametrize("folder", AFTER_THE_GATES)
def test_every_stage_after_the_gates_turns_empty_tables_into_empty_tables_of_its_schemas(
    folder: str, sample_tables: dict[str, Any], tmp_path: Path
) -> None:
    stage = stage_by_folder()[folder]
    params = load_config().params(stage.name) if stage.params else None
    replay = LLMConfig(provider="openai", model="replayed", mode="replay", store_path=tmp_path / "store.sqlite")
    client = open_llm(replay, None)
    run_values = {
        "out_dir": lambda: tmp_path / "10_publish",
        "transcript_path": lambda: None,
        "transcript_sha256": lambda: None,
        "manifest_path": lambda: None,
        "build_id": lambda: "empty",
        "build_config": lambda: "configs/sample.toml",
        "funnel_labels": dict,
        "gate": GateParams,
        "extra_funnel": list,
        "example_cap": ExampleCap,
    }
    outputs = _empty_outputs()
    if RELEASE_DATA.folder in stage.upstream:  # publish places the files its data stage wrote beside it
        release = stage_by_folder()[RELEASE_DATA.folder]
        found = arguments(release, None, Sources(sample_tables, outputs, lambda: client, run_values))
        outputs[release.folder] = finish(release, release.run(**found), None)
        for name, data in outputs[release.folder].files.items():
            (tmp_path / release.folder / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / release.folder / name).write_bytes(data)
    found = arguments(stage, params, Sources(sample_tables, outputs, lambda: client, run_values))
    output = finish(stage, stage.run(**found), params)
    for name, frame in output.tables.items():
        assert to_arrow(frame, output.schemas[name], name).schema == stage.outputs[name]
    assert output.report["counts"]["in"] == 0 and output.report["counts"]["out"] == 0
    assert stage.kept_nothing(output.report) is None  # it had nothing: the gate before it is the one named


def test_an_empty_release_holds_every_config_empty_and_its_card_says_so(
    sample_tables: dict[str, Any], tmp_path: Path
) -> None:
    test_every_stage_after_the_gates_turns_empty_tables_into_empty_tables_of_its_schemas(
        "10_publish", sample_tables, tmp_path
    )
    hub = tmp_path / "10_publish" / "hub"
    for config in tuple(PIPELINE.configs):
        shard = hub / "data" / config / "test-00000-of-00001.parquet"
        assert pq.read_metadata(shard).num_rows == 0 and pq.read_schema(shard) == RELEASE
    card = (hub / "README.md").read_text(encoding="utf-8")
    assert "**This release is empty: no config holds any example.**" in card
    assert not (hub / "lm_eval").exists()  # nothing to score


def test_a_gate_that_keeps_nothing_is_named_with_its_drops(sample_tables: dict[str, Any]) -> None:
    stage = stage_by_folder()["02_survey"]
    params = type(load_config().params(stage.name))(threshold=1.0)
    output = finish(stage, stage.run(sample_tables["questionnaire"], sample_tables["responses"], params), params)
    assert stage.kept_nothing(output.report) == (
        "02_survey kept nothing: 48 stereotypes surveyed, 0 accepted "
        "(stereotypes the survey did not accept: acceptance_at_or_below_1 48)"
    )
    assert stage.kept_nothing({"counts": {"in": 48, "out": 39}}) is None


def _declared_schemas(config: Path) -> dict[str, pa.Schema]:
    """Every table the configuration's pipeline declares (the sample's has its review stage)."""
    pipeline = load_config(config).pipeline
    return {
        f"{stage.folder}/{name}.parquet": schema for stage in pipeline for name, schema in stage.outputs.items()
    } | {
        f"{folder}/data/{config}/test-00000-of-00001.parquet": RELEASE
        for config in tuple(PIPELINE.configs)
        for folder in ("10_publish/hub", RELEASE_DATA.folder)
    }


@pytest.mark.parametrize(
    ("section", "line", "gate"),
    [
        ("survey_filter", "threshold = 1.0", "02_survey"),
        ("kappa_gate", "min_relevance = 3.0", "03_kappa_gate"),
    ],
)
def test_a_build_whose_gate_keeps_nothing_completes_empty_and_says_so(
    prefect_server: None, sample_copy: Path, tmp_path: Path, section: str, line: str, gate: str
) -> None:
    from pbbq.flows.build_pbbq import build_pbbq

    config = sample_copy / "configs" / "sample.toml"
    key = line.split(" = ")[0]
    text = "\n".join(
        line if raw.startswith(f"{key} ") else raw for raw in config.read_text(encoding="utf-8").splitlines()
    )
    assert f"\n{line}\n" in text
    config.write_text(text + "\n", encoding="utf-8")
    run = Path(build_pbbq(config=str(config), run_id="empty", outputs=str(tmp_path / "outputs")))

    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "completed"
    warning = next(w for w in manifest["warnings"] if w.startswith(f"{gate} kept nothing: "))
    written = _declared_schemas(config)
    for path in sorted(run.rglob("*.parquet")):
        relative = path.relative_to(run).as_posix()
        assert pq.read_schema(path).remove_metadata() == written.pop(relative), relative
    assert not written  # every declared table was written
    for relative in [r for r in _declared_schemas(config) if r.startswith(("05_", "06_", "07_", "10_publish/hub"))]:
        assert pq.read_metadata(run / relative).num_rows == 0, relative

    subject, about = warning.split(" ", 1)
    assert f"warning ({subject}): {about}" in audit_text(run)
    page = write_audit_html(run).read_text(encoding="utf-8")
    assert f"{subject}: {about}" in page and page.count("<svg") == 2  # acceptance and kappa; the rest said empty


def test_a_config_a_stage_emptied_is_published_empty_beside_the_others(tmp_path: Path) -> None:
    from pbbq.tasks.publish.dataset_card import CardParams
    from pbbq.tasks.publish.release import split_configs
    from pbbq.tasks.statistics import table1
    from tests.bbq_records import make_records
    from tests.release_support import build_release

    records = make_records()
    examples = pd.concat([records["fa"], records["en"]], ignore_index=True)  # names kept nothing
    release = build_release(
        tmp_path,
        split_configs(examples, tuple(PIPELINE.configs)),
        table1=table1(examples),
        funnel=pd.DataFrame({"step": ["examples"], "count": [len(records["fa"])]}),
        card=CardParams(build_id="names-kept-nothing"),
    )
    assert release.configs == {"fa": len(records["fa"]), "fa-names": 0, "en": len(records["en"])}
    shard = pq.ParquetFile(release.path / "data" / "fa-names" / "test-00000-of-00001.parquet")
    assert shard.metadata.num_rows == 0 and shard.metadata.num_row_groups == 0  # datasets reads it as empty
    card = (release.path / "README.md").read_text(encoding="utf-8")
    assert "**`fa-names` holds no example.**" in card and "This release is empty" not in card
    tasks = sorted(path.name for path in (release.path / "lm_eval").glob("pbbq_*.yaml"))
    assert "pbbq_fa.yaml" in tasks and "pbbq_en.yaml" in tasks and not [t for t in tasks if "names" in t]
