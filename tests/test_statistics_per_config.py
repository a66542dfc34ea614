"""The statistics stage counts and checks one config at a time (docs/scale.md, "Memory"): each config's rows on
their own, and the tables are those of the whole stacked table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import pbbq.tasks.statistics
from pbbq.tasks.core.schemas import EXAMPLE, example_configs
from pbbq.tasks.core.soundness import soundness
from pbbq.tasks.statistics import _rows_where, distribution, statistics, table1
from pbbq.tasks.text.categories import CATEGORIES
from tests.bbq_records import make_records


def _examples() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The three configs of the BBQ records as a stage loads them (Arrow-backed strings), one name-proxy row in a
    category of its own (Table 1 lists it for every config), and their templates."""
    examples = pd.concat(make_records().values(), ignore_index=True)
    examples.loc[examples.index[example_configs(examples) == "fa-names"][0], "category"] = "Zeta"
    examples = pa.Table.from_pandas(examples, schema=EXAMPLE, preserve_index=False).to_pandas()
    templates = pd.DataFrame({"template_id": examples["template_id"].unique(), "kept": True})
    templates["allowed_pairs"] = [[] for _ in range(len(templates))]
    return examples, templates


def test_each_config_is_checked_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    examples, templates = _examples()
    checked: list[set[str]] = []

    def recorded(frame: pd.DataFrame, *args: object) -> pd.DataFrame:
        checked.append(set(example_configs(frame)))
        return soundness(frame, *args)

    monkeypatch.setattr(pbbq.tasks.statistics, "soundness", recorded)
    statistics(templates, examples)
    assert checked == [{"fa"}, {"fa-names"}, {"en"}]


def test_the_tables_are_those_of_the_whole_table() -> None:
    examples, templates = _examples()
    tables = statistics(templates, examples).tables
    pd.testing.assert_frame_equal(tables["table1"], table1(examples, CATEGORIES))
    assert "Zeta" in set(tables["table1"].query("config == 'en'")["category"])
    pd.testing.assert_frame_equal(tables["distribution"], distribution(examples))
    assert tables["distribution"]["config"].tolist() != sorted(tables["distribution"]["config"])  # per dimension
    pd.testing.assert_frame_equal(tables["soundness"], soundness(examples, templates))
    assert tables["soundness"].query("check == 'gender_added' and config == 'en'")["examples"].item() > 0


def test_no_examples_give_the_empty_tables() -> None:
    examples, templates = _examples()
    empty = examples.iloc[:0]
    tables = statistics(templates, empty).tables
    pd.testing.assert_frame_equal(tables["table1"], table1(empty, CATEGORIES))
    pd.testing.assert_frame_equal(tables["distribution"], distribution(empty))
    pd.testing.assert_frame_equal(tables["soundness"], soundness(empty, templates))


def test_a_configs_rows_are_a_slice_when_they_are_one_block_and_taken_otherwise() -> None:
    frame = pd.DataFrame({"config": ["fa", "fa", "en", "en", "fa"], "n": range(5)}, index=[10, 11, 12, 13, 14])
    block = (frame["config"] == "en").to_numpy()
    scattered = (frame["config"] == "fa").to_numpy()
    pd.testing.assert_frame_equal(_rows_where(frame, block), frame[block])
    pd.testing.assert_frame_equal(_rows_where(frame, scattered), frame[scattered])
    assert _rows_where(frame, np.zeros(5, dtype=bool)).empty
