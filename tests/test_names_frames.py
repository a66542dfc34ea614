"""How the names stage reads its input rows and builds its output tables from them: the rows as
``to_dict("records")`` gives them, and each output table taken from the input by row number."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa

from pbbq.tasks.names.prepare import row_records
from pbbq.tasks.names.variants import rows_at


def _input() -> pd.DataFrame:
    """Arrow-backed strings (one missing), integers and Python objects, as the instantiate stage's examples."""
    return pd.DataFrame(
        {
            "example_id": pd.Series(["a", "b", None], dtype=pd.StringDtype("pyarrow", na_value=math.nan)),
            "label": [0, 2, 1],
            "answer_info": [{"ans0": ["x", "t"]}, {"ans0": ["y", "u"]}, None],
            "llm_request_ids": [["r1"], [], None],
        }
    )


def test_records_are_the_rows_to_dict_gives_with_the_same_python_types() -> None:
    frame = _input()
    expected = frame.to_dict("records")
    got = list(row_records(frame))
    assert [{k: repr(v) for k, v in row.items()} for row in got] == [
        {k: repr(v) for k, v in row.items()} for row in expected
    ]
    assert [[type(v) for v in row.values()] for row in got] == [[type(v) for v in row.values()] for row in expected]


def test_rows_at_takes_the_rows_in_the_order_given_repeats_included_with_their_new_values() -> None:
    frame = _input()
    taken = rows_at(frame, [2, 0, 2], ["example_id", "label", "reason"], {"reason": ["p", "q", "r"]})
    assert list(taken.columns) == ["example_id", "label", "reason"]
    assert taken["label"].tolist() == [1, 0, 1]
    assert taken["reason"].tolist() == ["p", "q", "r"]
    assert list(taken.index) == [0, 1, 2]
    assert taken["example_id"].dtype == frame["example_id"].dtype
    assert pa.Table.from_pandas(taken, preserve_index=False).column("example_id").to_pylist() == [None, "a", None]


def test_rows_at_no_position_is_the_empty_frame_of_the_columns() -> None:
    empty = rows_at(_input(), [], ["example_id", "reason"], {})
    pd.testing.assert_frame_equal(empty, pd.DataFrame([], columns=["example_id", "reason"]))
