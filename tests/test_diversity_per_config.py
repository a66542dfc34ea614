"""The diversity stage measures the instantiated contexts one config at a time (docs/scale.md, "Memory"), each
config holding only the columns its units come from."""

from __future__ import annotations

import pandas as pd
import pytest

import pbbq.tasks.diversity
from tests.diversity_support import diversity_table, make_examples


def test_each_config_holds_only_its_units_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    examples = make_examples()
    measured: list[tuple[list[str], set[str]]] = []
    group_rows = pbbq.tasks.diversity._group_rows

    def recorded(groups: pd.DataFrame, *args: object) -> list[dict[str, object]]:
        rows = examples.loc[groups.index]
        measured.append((list(groups.columns), set(zip(rows["lang"], rows["variant"], strict=True))))
        return group_rows(groups, *args)

    monkeypatch.setattr(pbbq.tasks.diversity, "_group_rows", recorded)
    table = diversity_table(examples)
    assert [columns for columns, _ in measured] == [["category", "lang", "context"]] * 3
    assert [rows for _, rows in measured] == [
        {("fa", "original")},
        {("fa", "names-7271"), ("fa", "names-861")},
        {("en", "original")},
    ]
    assert table["config"].unique().tolist() == ["fa", "fa-names", "en"]
