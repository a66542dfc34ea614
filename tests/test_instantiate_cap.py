"""``[build] max_examples_per_template`` on PBBQ's path (issue 35): each template's examples are estimated before
any is built, and a template past the cap is refused with one line naming the templates file, its row and the
estimate; under the cap the estimate is what is built."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.config import RunOptions, load_config
from pbbq.tasks.core.example_cap import ExampleCap
from pbbq.tasks.core.inputs import InputError, load_questionnaire, load_templates, spreadsheet_row, swap_roles
from pbbq.tasks.instantiate import InstantiateParams, instantiate, template_tables

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "annotations" / "templates.csv"
PARAMS = InstantiateParams(unknown_phrases=("نمی‌دانم",))


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sample's templates, each with both continuations (as stage 04 leaves them), and its stereotypes."""
    stereotypes = load_questionnaire(REPO / "survey" / "questionnaire.csv")
    templates = load_templates(TEMPLATES, stereotypes["stereotype_id"])
    templates = templates.merge(stereotypes[["stereotype_id", "category"]], on="stereotype_id", how="left")
    continuation = "{stereo} دیر رسید و {nonstereo} زود."
    templates["disambiguated_fa"] = continuation
    templates["disambiguated_counter_biased_fa"] = swap_roles(continuation)
    return templates, stereotypes


def test_a_template_at_the_cap_is_built() -> None:
    templates, stereotypes = _tables()
    built = template_tables(templates, stereotypes, PARAMS)["examples"].groupby("template_id").size()
    largest = int(built.max())
    assert largest > 12
    template_tables(templates, stereotypes, PARAMS, ExampleCap(largest, TEMPLATES, "templates"))  # not refused


def test_a_template_past_the_cap_is_refused_naming_file_row_and_estimate() -> None:
    templates, stereotypes = _tables()
    built = template_tables(templates, stereotypes, PARAMS)["examples"].groupby("template_id").size()
    largest = built.idxmax()
    row = spreadsheet_row(int(templates.index[templates["template_id"] == largest][0]))
    with pytest.raises(InputError) as error:
        instantiate(templates, stereotypes, PARAMS, ExampleCap(int(built.max()) - 1, TEMPLATES, "templates"))
    message = str(error.value)
    assert message.startswith(f"{TEMPLATES}, row {row}: template {largest!r} would build {built.max():,} examples (")
    assert "entity pairs ×" in message and "lexical variants × 12)" in message
    assert f"more than [build] max_examples_per_template = {built.max() - 1:,}" in message


def test_the_cap_of_a_pbbq_build_names_its_templates_file() -> None:
    config = load_config(REPO / "configs" / "sample.toml")
    cap = replace(config, running=RunOptions(max_examples_per_template=7)).example_cap()
    assert (cap.max_examples_per_template, cap.sheet, cap.input_name) == (7, TEMPLATES, "templates")
