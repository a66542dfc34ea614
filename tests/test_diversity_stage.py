"""The diversity stage as the flow runs it: the paper's Table 2 on the 04_disambiguate template texts and the
instance-level table per config, with the BERTScore column computed from a local model when one is configured
(a tiny BERT built here), and marked not computed otherwise."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pbbq.tasks.diversity.homogenization
from pbbq.tasks.core.schemas import to_arrow
from pbbq.tasks.diversity import DiversityParams, diversity, template_diversity_table
from tests.diversity_support import diversity_table, make_examples, make_templates

METRICS = ("ngd", "ttr", "self_bleu", "homogenization")


def test_without_a_model_both_tables_and_their_files() -> None:
    examples, templates = make_examples(), make_templates()
    output = diversity(examples, templates, DiversityParams())
    table, instances = output["table2"], output["table2_instances"]
    pd.testing.assert_frame_equal(table, template_diversity_table(templates))
    pd.testing.assert_frame_equal(instances, diversity_table(examples))
    assert table["category"].tolist() == ["Age", "Gender", "Religion", "Average", "Overall"]
    assert set(instances["config"]) == {"fa", "fa-names", "en"}
    for name, frame in output.tables.items():
        assert to_arrow(frame, output.schemas[name], name).num_rows == len(frame)
    assert output.csv == ("table2", "table2_instances")

    assert set(output.files) == {"table2.md", "table2_instances.md"} | {
        f"{prefix}_{metric}.png" for prefix in ("diversity", "diversity_instances") for metric in METRICS
    }
    template_md = output.files["table2.md"].decode("utf-8")
    assert template_md.startswith("## Table 2: diversity of the template texts (the paper's Table 2)\n")
    assert "| Category | # templates | # units |" in template_md
    instance_md = output.files["table2_instances.md"].decode("utf-8")
    assert instance_md.startswith("## Diversity of the instantiated contexts, per config (not the paper's Table 2)")
    assert "### fa-names" in instance_md
    assert output.files["diversity_ngd.png"] != output.files["diversity_instances_ngd.png"]

    report = output.report
    assert report["counts"] == {
        "in": len(examples),
        "out": 5 + 12,
        "templates": 5,
        "templates_used": 3,
        "templates_in_review": ["AGE-02-T1", "REL-02-T1"],
        "table2_rows": 5,
        "table2_instances_rows": 12,
    }
    assert report["homogenization"] == {"computed_rows": 0, "not_computed_rows": 17}
    assert [row["category"] for row in report["table2"]] == table["category"].tolist()
    assert report["table2"][0]["n_units"] == 2 and report["table2"][0]["homogenization"] is None
    assert len(report["table2_instances"]) == 12


def test_with_a_local_model_each_model_is_loaded_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for module in ("torch", "transformers", "bert_score", "tokenizers"):
        pytest.importorskip(module)
    from benchmarks.homogenization import build_tiny_bert

    examples, templates = make_examples(), make_templates()
    model = str(build_tiny_bert([*examples["context"], *templates["ambiguous_fa"], "فلانی"], tmp_path / "tiny"))
    loads: list[str] = []
    load = pbbq.tasks.diversity.homogenization._load_bertscore_model

    def counted(path: str, *args: object) -> object:
        loads.append(path)
        return load(path, *args)

    monkeypatch.setattr(pbbq.tasks.diversity.homogenization, "_load_bertscore_model", counted)
    params = DiversityParams(homogenization_model=model, homogenization_num_layers=2, homogenization_max_pairs=4)
    output = diversity(examples, templates, params)
    assert loads == [model]  # the Persian model, once for both tables; no English model configured
    table, instances = output["table2"], output["table2_instances"]
    assert table["homogenization"].between(-1, 1).all()
    assert table.set_index("category").loc["Overall", "homogenization_note"].endswith("4 of 10 pairs sampled (seed 0)")
    fa = instances[instances["config"] != "en"]
    assert fa.dropna(subset="self_bleu")["homogenization"].notna().all()
    assert instances.loc[instances["config"] == "en", "homogenization"].isna().all()
    again = diversity(examples, templates, params)
    pd.testing.assert_frame_equal(again["table2"], table)  # the pair sample is seeded
