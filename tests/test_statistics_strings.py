"""The statistics stage counts and checks the text columns as they come: the same tables and report on the
Arrow-backed strings a parquet file loads as as on Python strings (``object``)."""

import pandas as pd
import pyarrow as pa

from pbbq.tasks.core.schemas import EXAMPLE
from pbbq.tasks.statistics import statistics
from tests.bbq_records import make_records


def test_statistics_same_on_arrow_strings_and_python_strings() -> None:
    examples = pd.concat(make_records().values(), ignore_index=True)
    arrow = pa.Table.from_pandas(examples, schema=EXAMPLE, preserve_index=False).to_pandas()  # as a stage loads it
    assert isinstance(arrow["lang"].dtype, pd.StringDtype)
    templates = pd.DataFrame({"template_id": examples["template_id"].unique(), "kept": True})
    templates["allowed_pairs"] = [[] for _ in range(len(templates))]
    plain = arrow.astype({name: object for name, dtype in arrow.dtypes.items() if isinstance(dtype, pd.StringDtype)})
    one, other = statistics(templates, arrow), statistics(templates, plain)
    for name in one.tables:
        pd.testing.assert_frame_equal(one.tables[name], other.tables[name], check_dtype=False)
    assert one.report == other.report
