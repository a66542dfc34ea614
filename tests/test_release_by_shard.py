"""A config's shards are converted one shard at a time (issue 35: the 100 × 100 blow-up's 481,056 ``en-names``
rows were converted whole and then sorted, two copies of the config): never the config's whole table, and the same
shards, bytes and size as cutting the whole config's table sorted by example_id."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pbbq.tasks.core.artifacts import parquet_bytes
from pbbq.tasks.core.schemas import EXAMPLE, to_arrow
from pbbq.tasks.publish import release
from pbbq.tasks.publish.release import RELEASE, data_part, split_configs
from tests.release_support import make_configs

SHARD_ROWS = 7


def _examples() -> pd.DataFrame:
    """Every config stacked as a stage reads them (text columns as Arrow strings), the configs' rows interleaved,
    so that a config's rows are not one block."""
    stacked = pd.concat(make_configs().values(), ignore_index=True)
    examples = pa.Table.from_pandas(stacked, schema=EXAMPLE, preserve_index=False).to_pandas()
    return examples.iloc[list(range(0, len(examples), 2)) + list(range(1, len(examples), 2))].reset_index(drop=True)


def _whole(frame: pd.DataFrame) -> pa.Table:
    """The config's table as the release was made from before: converted whole, sorted by example_id."""
    table = to_arrow(frame, RELEASE, "whole").replace_schema_metadata(None)
    return table.take(pa.compute.sort_indices(table["example_id"]))


@pytest.mark.parametrize("interleaved", [False, True])
def test_shards_are_the_whole_configs_sorted_table_cut(interleaved: bool) -> None:
    examples = _examples() if interleaved else pd.concat(make_configs().values(), ignore_index=True)
    configs = split_configs(examples)
    data = data_part(configs, shard_rows=SHARD_ROWS)
    for info in data.infos:
        whole = _whole(configs[info.name])
        paths = sorted(path for path in data.data if path.startswith(f"data/{info.name}/"))
        assert len(paths) == -(-len(whole) // SHARD_ROWS) > 1
        read = [pq.read_table(io.BytesIO(data.data[path])) for path in paths]
        assert all(pq.ParquetFile(io.BytesIO(data.data[path])).metadata.num_row_groups == 1 for path in paths)
        assert pa.concat_tables(read).equals(whole)
        start = 0
        for path, table in zip(paths, read, strict=True):  # the same bytes as the whole table's slices
            assert data.data[path] == parquet_bytes(whole.slice(start, len(table)))
            start += len(table)
        ordered = configs[info.name].sort_values("example_id", kind="stable").reset_index(drop=True)
        assert info.num_bytes == to_arrow(ordered, RELEASE, info.name).nbytes


def test_no_conversion_makes_a_configs_whole_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every conversion to Arrow is of one shard's rows, or of some columns (never all) of the config's."""
    converted: list[tuple[int, int]] = []

    def recording(frame: pd.DataFrame, schema: pa.Schema, table: str) -> pa.Table:
        converted.append((len(frame), len(schema)))
        return to_arrow(frame, schema, table)

    monkeypatch.setattr(release, "to_arrow", recording)
    configs = split_configs(pd.concat(make_configs().values(), ignore_index=True))
    data_part(configs, shard_rows=SHARD_ROWS)
    assert converted and max(rows for rows, _ in converted) > SHARD_ROWS
    assert all(rows <= SHARD_ROWS or columns < len(RELEASE) for rows, columns in converted)
