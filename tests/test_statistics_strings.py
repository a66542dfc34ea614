"""The statistics stage reads its text columns as Python strings once: the same tables and report as on the
Arrow-backed strings a parquet file loads as."""

import pandas as pd
import pyarrow as pa

from pbbq.tasks.core.schemas import EXAMPLE
from pbbq.tasks.statistics import python_strings, statistics
from tests.bbq_records import make_records


def test_python_strings_converts_only_text_columns() -> None:
    frame = pd.DataFrame({"lang": pd.array(["fa", None], dtype="str"), "label": [0, 1], "roles": [{"a": 1}, {}]})
    plain = python_strings(frame)
    assert plain["lang"].dtype == object and plain["lang"].iloc[0] == "fa" and pd.isna(plain["lang"].iloc[1])
    assert plain["label"].dtype == frame["label"].dtype and plain["roles"].tolist() == frame["roles"].tolist()


def test_statistics_same_on_arrow_strings_and_python_strings() -> None:
    examples = pd.concat(make_records().values(), ignore_index=True)
    arrow = pa.Table.from_pandas(examples, schema=EXAMPLE, preserve_index=False).to_pandas()  # as a stage loads it
    assert isinstance(arrow["lang"].dtype, pd.StringDtype)
    templates = pd.DataFrame({"template_id": examples["template_id"].unique(), "kept": True})
    templates["allowed_pairs"] = [[] for _ in range(len(templates))]
    one, other = statistics(templates, arrow), statistics(templates, python_strings(arrow))
    for name in one.tables:
        pd.testing.assert_frame_equal(one.tables[name], other.tables[name], check_dtype=False)
    assert one.report == other.report
