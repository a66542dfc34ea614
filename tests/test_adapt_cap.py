"""Bounded work from a sheet (issue 35 item 3): each template's examples are estimated before any is built, and a
row past ``[build] max_examples_per_template`` is refused in seconds with one line naming the sheet, its row and
the estimate; under the cap the estimate is what is built."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.sheet_blowup import ROW, blown_up_sheet, english_config
from pbbq.flows.cli import main
from pbbq.flows.config import ConfigError, load_config
from pbbq.tasks.adapt import adapt_instantiate
from pbbq.tasks.adapt.bbq_format import load_bbq_proper_names, load_bbq_templates, load_bbq_vocabulary
from pbbq.tasks.adapt.generate import AdaptInstantiateParams, estimate
from pbbq.tasks.adapt.sheet import apply_classes, load_reviewed_sheet, review_sheet
from pbbq.tasks.core.example_cap import MAX_EXAMPLES_PER_TEMPLATE, ExampleCap
from pbbq.tasks.core.inputs import InputError
from tests.adapt_support import BBQ, NATIONALITY, RELIGION, SAMPLE_VOCABULARY, VOCABULARY

SHEET_ROW = 13
"""The spreadsheet row of :data:`benchmarks.sheet_blowup.ROW` in the sample sheet."""


def _templates(sheet: Path) -> pd.DataFrame:
    built, _ = apply_classes(load_reviewed_sheet(sheet))
    return built[built["template_id"] == ROW].reset_index(drop=True)


def test_a_row_asking_for_a_billion_examples_is_refused_in_seconds(tmp_path: Path) -> None:
    sheet = blown_up_sheet(8000, tmp_path / "sheet.csv")  # 8000 × 8000 words: 1,024,000,000 examples
    started = time.perf_counter()
    with pytest.raises(InputError) as error:
        adapt_instantiate(
            _templates(sheet),
            load_bbq_vocabulary(SAMPLE_VOCABULARY),
            AdaptInstantiateParams(),
            cap=ExampleCap(sheet=sheet),
        )
    assert time.perf_counter() - started < 20
    assert str(error.value) == (
        f"{sheet}, row {SHEET_ROW}: template 'PK-NA-1' would build 1,024,000,000 examples (4 pairs in their orders × "
        f"64,000,000 lexical variants × 4), more than [build] max_examples_per_template = {MAX_EXAMPLES_PER_TEMPLATE:,}"
        " (the names stage and each translation multiply it again)"
    )


@pytest.mark.parametrize(("cap", "built"), [(143, False), (144, True)])
def test_the_cap_is_the_estimate_built(tmp_path: Path, cap: int, built: bool) -> None:
    templates = _templates(blown_up_sheet(3, tmp_path / "sheet.csv"))  # 4 fillings × 9 variants × 4 = 144
    arguments = (templates, load_bbq_vocabulary(SAMPLE_VOCABULARY), AdaptInstantiateParams())
    if not built:
        with pytest.raises(InputError, match="would build 144 examples"):
            adapt_instantiate(*arguments, cap=ExampleCap(cap))
        return
    assert len(adapt_instantiate(*arguments, cap=ExampleCap(cap))["examples"]) == 144


@pytest.mark.parametrize(
    "path", [NATIONALITY, RELIGION, BBQ / "templates-Disability_status.csv", BBQ / "templates-SES.csv"]
)
def test_the_estimate_is_what_bbq_templates_build(path: Path) -> None:
    built, _ = apply_classes(review_sheet(load_bbq_templates(path)).assign(**{"class": "DT"}))
    vocabulary, names = load_bbq_vocabulary(VOCABULARY), load_bbq_proper_names(BBQ / "vocabulary_proper_names.csv")
    output = adapt_instantiate(built, vocabulary, AdaptInstantiateParams(), names)
    counted = output["examples"].groupby("template_id").size()
    dropped = output["dropped_examples"].groupby("template_id").size()
    for _, template in built.iterrows():
        made = counted.get(template.template_id, 0) + dropped.get(template.template_id, 0)
        assert estimate(template, vocabulary, names).examples == made, template.template_id


def test_the_cap_is_a_build_option(tmp_path: Path) -> None:
    sheet = blown_up_sheet(2, tmp_path / "sheet.csv")
    assert load_config(english_config(sheet, tmp_path / "a.toml", 7)).running.max_examples_per_template == 7
    assert load_config(english_config(sheet, tmp_path / "b.toml", None)).running.max_examples_per_template == 100_000
    with pytest.raises(ConfigError, match=r"\[build\] max_examples_per_template = 0 is outside 1 … ∞"):
        load_config(english_config(sheet, tmp_path / "c.toml", 0))


def test_a_build_of_a_blown_up_row_fails_in_one_line(
    prefect_server: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sheet = blown_up_sheet(8000, tmp_path / "sheet.csv")
    config = english_config(sheet, tmp_path / "build.toml", None)
    started = time.perf_counter()
    assert main(["build", "--config", str(config), "--outputs", str(tmp_path / "out"), "--run-id", "r"]) == 1
    assert time.perf_counter() - started < 120
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"pbbq: error: {sheet}, row {SHEET_ROW}: template 'PK-NA-1' would build 1,024,000,000")
