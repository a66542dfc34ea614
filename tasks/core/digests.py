"""What a cache key reads of a stage's inputs: a content digest of each argument, and of each key's rows of a table."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .artifacts import parquet_bytes, sha256_file


def input_digest(value: Any) -> Any:
    """A JSON-able, content-derived stand-in for a task input."""
    if isinstance(value, pd.DataFrame):
        table = pa.Table.from_pandas(value, preserve_index=False)
        return {"table": hashlib.sha256(parquet_bytes(table.replace_schema_metadata(None))).hexdigest()}
    if hasattr(value, "cache_identity"):
        return {type(value).__name__: input_digest(value.cache_identity())}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__name__: input_digest(dataclasses.asdict(value))}
    if isinstance(value, dict):
        return {str(k): input_digest(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [input_digest(v) for v in value]
    if isinstance(value, Path):
        return {"file": str(value), "sha256": sha256_file(value) if value.is_file() else None}
    return value


def row_hashes(frame: pd.DataFrame, key: str) -> dict[str, str]:
    """Per value of ``key``: a sha256 of the Arrow schema of ``frame`` and of its rows of ``frame``, in their order
    (:func:`_feed`). The table is sorted by key once; each key's bytes are ranges of its columns' buffers, the same
    wherever its rows were."""
    if frame.empty:
        return {}
    keys = frame[key].astype(str).to_numpy()
    order = np.argsort(keys, kind="stable")
    table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None).take(order)
    table = table.combine_chunks()
    bounds = np.r_[np.flatnonzero(np.r_[True, keys[order][1:] != keys[order][:-1]]), len(keys)]
    digests = [hashlib.sha256(str(table.schema).encode("utf-8")) for _ in bounds[:-1]]
    for column in table.columns:
        _feed(digests, column.chunk(0) if column.num_chunks else pa.array([], column.type), bounds)
    return {str(keys[order[start]]): digest.hexdigest() for start, digest in zip(bounds[:-1], digests, strict=True)}


def _feed(digests: list[Any], array: pa.Array, bounds: np.ndarray) -> None:
    """Add to ``digests[i]`` the rows ``bounds[i]`` to ``bounds[i + 1]`` of ``array``: their count, validity and
    values (a string's or a list's length, then its bytes or items; a struct's fields in turn), each part's size
    given by those before it, so that different rows never give the same bytes. A type of another layout adds the
    Arrow IPC of its rows, taken into buffers of their own."""
    rows = np.diff(bounds)
    valid: np.ndarray = np.ones(len(array), dtype=np.uint8)
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
    kind = array.type
    for i, digest in enumerate(digests):
        digest.update(int(rows[i]).to_bytes(8, "little"))
        digest.update(valid[bounds[i] : bounds[i + 1]])
    if pa.types.is_null(kind):
        return
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32 if pa.types.is_string(kind) else np.int64)
        offsets = offsets[array.offset : array.offset + len(array) + 1]
        data = array.buffers()[2]
        values = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
        lengths = np.diff(offsets).astype(np.int64)
        for i, digest in enumerate(digests):
            digest.update(lengths[bounds[i] : bounds[i + 1]])
            digest.update(values[offsets[bounds[i]] : offsets[bounds[i + 1]]])
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = array.offsets.to_numpy()
        lengths = np.diff(offsets).astype(np.int64)
        for i, digest in enumerate(digests):
            digest.update(lengths[bounds[i] : bounds[i + 1]])
        _feed(digests, array.values, offsets[bounds])
    elif pa.types.is_struct(kind):
        for field_index in range(kind.num_fields):
            _feed(digests, array.field(field_index), bounds)
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        filled = array.fill_null(False if pa.types.is_boolean(kind) else 0)
        values = np.ascontiguousarray(filled.to_numpy(zero_copy_only=False))
        for i, digest in enumerate(digests):
            digest.update(values[bounds[i] : bounds[i + 1]])
    else:
        for i, digest in enumerate(digests):
            sink = pa.BufferOutputStream()
            rows_of = pa.table({"rows": array.slice(bounds[i], rows[i]).take(np.arange(rows[i]))})
            with pa.ipc.new_stream(sink, rows_of.schema) as writer:
                writer.write_table(rows_of)
            digest.update(sink.getvalue())
