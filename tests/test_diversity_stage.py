"""The diversity stage as the flow runs it: Table 2 per config, with the BERTScore column computed from a
local model when one is configured (a tiny BERT built here), and marked not computed otherwise."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tasks.diversity import DiversityParams, diversity
from tasks.instantiate import InstantiateParams, instantiate
from tests.test_stages import PHRASES, _template


@pytest.fixture(scope="module")
def examples() -> pd.DataFrame:
    templates = pd.DataFrame([_template("T1", "S1", category="Age"), _template("T2", "S2", category="Gender")])
    persian = instantiate(templates, InstantiateParams(PHRASES))["examples"]
    english = persian.assign(
        lang="en", context="An old man and a young man were in the park " + persian.index.astype(str)
    )
    return pd.concat([persian, english], ignore_index=True)


def test_without_a_model_the_column_is_not_computed(examples: pd.DataFrame) -> None:
    output = diversity(examples, DiversityParams())
    table = output["table2"]
    assert set(table["config"]) == {"fa", "en"}
    assert table["homogenization"].isna().all() and table[["ngd", "ttr", "self_bleu"]].notna().all().all()
    assert output.report["homogenization"] == {"computed_rows": 0, "not_computed_rows": len(table)}
    assert set(output.files) == {"table2.md"} | {
        f"diversity_{m}.png" for m in ("ngd", "ttr", "self_bleu", "homogenization")
    }
    assert output.files["diversity_ngd.png"].startswith(b"\x89PNG")


def test_with_a_local_model_the_column_is_computed(examples: pd.DataFrame, tmp_path: Path) -> None:
    for module in ("torch", "transformers", "bert_score", "tokenizers"):
        pytest.importorskip(module)
    from benchmarks.homogenization import build_tiny_bert

    model = str(build_tiny_bert(sorted(set(examples["context"])), tmp_path / "tiny"))
    params = DiversityParams(
        homogenization_model=model,
        homogenization_model_en=model,
        homogenization_num_layers=2,
        homogenization_max_pairs=50,
    )
    table = diversity(examples, params)["table2"]
    assert table["homogenization"].between(-1, 1).all()
    assert table["homogenization_note"].str.contains("50").any()  # a seeded sample of 50 pairs, said in the note
    assert diversity(examples, params)["table2"].equals(table)  # the sample is seeded
