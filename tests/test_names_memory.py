"""What the names stage holds once it returns (issue 35: memory stays bounded however large the product is): none
of the texts it rewrote (its memo goes with the run), no column of its parts it leaves out of its output, and one
object per distinct ``answer_info`` and request list of its variants; its frames are the ones the plain
take-and-assign construction gives."""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np
import pandas as pd

from pbbq.tasks.core.stage import ordered
from pbbq.tasks.names import names, patterns, prepare
from pbbq.tasks.names.params import NamesParams
from pbbq.tasks.names.variants import rows_at
from tests.names_support import example_frame, name_example, pin_table

MECHANICS = NamesParams(drop_weak_proxies=False)


def _examples() -> pd.DataFrame:
    """Two examples of one entity pair (they take the same names: equal options and ``answer_info``) and one of
    another pair."""
    return example_frame(
        name_example("ETH-01-T1-0a1b", "دانشجوی ترک", "دانشجوی فارس"),
        name_example("ETH-01-T1-0a1c", "دانشجوی ترک", "دانشجوی فارس", "یک دانشجوی ترک و یک دانشجوی فارس رفتند."),
        name_example("ETH-02-T1-0a1d", "مرد ترک", "زن فارس"),
    )


def test_no_text_the_stage_rewrote_outlives_it(monkeypatch: Any) -> None:
    made: list[weakref.ref[patterns.Rewrite]] = []

    def recorded(*arguments: Any) -> patterns.Rewrite:
        result = patterns.rewrite(*arguments)
        made.append(weakref.ref(result))
        return result

    monkeypatch.setattr(prepare, "rewrite", recorded)
    output = names(_examples(), pin_table(), MECHANICS)
    assert len(output.tables["examples"]) == 9 and made
    assert [ref() for ref in made if ref() is not None] == []


def _held(frame: pd.DataFrame) -> dict[str, int]:
    """Per NumPy dtype of ``frame``'s columns, how many values the arrays behind those columns hold."""
    bases: dict[int, tuple[str, int]] = {}
    for column in frame.columns:
        if isinstance(frame[column].dtype, np.dtype):
            values = frame[column].to_numpy()
            while isinstance(values.base, np.ndarray):
                values = values.base
            bases[id(values)] = (str(values.dtype), values.size)
    held: dict[str, int] = {}
    for dtype, size in bases.values():
        held[dtype] = held.get(dtype, 0) + size
    return held


def test_the_variants_hold_no_array_of_the_columns_they_leave_out() -> None:
    frame = names(_examples(), pin_table(), MECHANICS).tables["examples"]
    columns = frame.dtypes[[isinstance(dtype, np.dtype) for dtype in frame.dtypes]].astype(str)
    assert _held(frame) == {dtype: len(frame) * count for dtype, count in columns.value_counts().items()}


def test_variants_of_equal_answer_info_and_requests_share_one_object() -> None:
    variants = names(_examples(), pin_table(), MECHANICS).tables["examples"]
    for column in ("answer_info", "llm_request_ids"):
        values = variants[column].tolist()
        distinct = {repr(value) for value in values}
        assert len({id(value) for value in values}) == len(distinct) < len(values), column
    pair = variants[variants["template_id"] == "ETH-01-T1"]
    assert pair.groupby("variant")["ans0"].nunique().eq(1).all()  # the pair's examples took the same names


def _input() -> pd.DataFrame:
    """Arrow-backed strings (one missing), integers and Python objects, as the instantiate stage's examples."""
    return pd.DataFrame(
        {
            "example_id": pd.Series(["a", "b", None], dtype=pd.StringDtype("pyarrow", na_value=math.nan)),
            "label": [0, 2, 1],
            "target_loc": [1, 1, 0],
            "answer_info": [{"ans0": ["x", "t"]}, {"ans0": ["y", "u"]}, None],
            "llm_request_ids": [["r1"], [], None],
        }
    )


def test_rows_at_is_the_take_and_assign_construction() -> None:
    frame, positions = _input(), [2, 0, 2, 1]
    columns = ["example_id", "label", "answer_info", "absent", "reason", "llm_request_ids", "target_loc", "n"]
    values: dict[str, list[Any]] = {
        "reason": ["p", "q", None, "r"],
        "answer_info": [{"a": 1}, None, {"b": [2]}, {}],
        "n": [1, 2, 3, 4],
    }
    expected = frame.take(positions).reset_index(drop=True).reindex(columns=columns)
    for column, column_values in values.items():
        expected[column] = column_values
    pd.testing.assert_frame_equal(rows_at(frame, positions, columns, values), expected, check_exact=True)


def test_ordered_columns_are_the_ordered_frames_columns() -> None:
    frame = rows_at(_input(), [0, 1, 2], ["example_id", "label", "answer_info", "target_loc", "reason"], {})
    keys = [(1, "b"), (0, "z"), (1, "a")]
    columns = ["answer_info", "label", "example_id"]
    pd.testing.assert_frame_equal(ordered(frame, keys, columns), ordered(frame, keys)[columns], check_exact=True)
