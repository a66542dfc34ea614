"""A cached stage's record keeps the LLM requests its output used, so a rebuild makes its transcript without loading
the stage's frames."""

from __future__ import annotations

import pickle
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from pbbq.tasks.core.artifacts import ArtifactStore, StageOutput
from pbbq.tasks.core.stored import LazyTables, StoredStage


def test_a_stored_stage_keeps_the_requests_its_output_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ArtifactStore(tmp_path / "store")
    frame = pd.DataFrame({"request_id": ["r2", "r1", "r2"]})
    output = StageOutput({"attempts": frame}, {"attempts": pa.schema([("request_id", pa.string())])}, {})
    record = pickle.loads(pickle.dumps(StoredStage.keep(output, store, frame["request_id"])))  # as Prefect keeps it

    def unread(self: LazyTables, name: str) -> pd.DataFrame:
        raise AssertionError(f"frame {name} loaded")

    monkeypatch.setattr(LazyTables, "__getitem__", unread)
    assert record.request_ids(store) == ["r1", "r2"]
    assert record.complete(store)
    store.file(str(record.requests)).unlink()
    assert not record.complete(store)  # computed again, like a record whose frames are gone
    assert StoredStage.keep(output, store).request_ids(store) is None  # a stage that sends none
