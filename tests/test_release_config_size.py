"""A config's size in the dataset card (``num_bytes``) is its rows' size as the release schema holds them, the same
whichever way the rows are put in example_id order."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from pbbq.tasks.core.schemas import EXAMPLE, to_arrow
from pbbq.tasks.publish.release import RELEASE, data_part, split_configs
from tests.release_support import make_configs


def test_a_configs_size_is_that_of_its_rows_converted_in_example_id_order() -> None:
    stacked = pd.concat(make_configs().values(), ignore_index=True)
    examples = pa.Table.from_pandas(stacked, schema=EXAMPLE, preserve_index=False).to_pandas()  # as a stage loads it
    configs = split_configs(examples)
    infos = data_part(configs).infos
    assert [info.name for info in infos] == ["fa", "fa-names", "en"]
    for info in infos:
        ordered = configs[info.name].sort_values("example_id", kind="stable").reset_index(drop=True)
        assert info.num_bytes == to_arrow(ordered, RELEASE, info.name).nbytes
