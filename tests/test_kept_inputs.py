"""A rebuild does not read the build inputs an earlier build loaded and checked: the stages' cache keys take each
input's key (its file's hash, its loader's code, the keys of the inputs it is checked against), and a stage that
runs loads the table then (``KeptInput``)."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.build_inputs import load_build_inputs
from pbbq.flows.config import load_config
from pbbq.tasks.core.digests import input_digest
from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.core.stored import KeptInput, loaded


def test_a_rebuild_reads_no_input_an_earlier_build_checked(sample_copy: Path, tmp_path: Path) -> None:
    build = load_config(sample_copy / "configs" / "sample.toml")
    outputs = tmp_path / "outputs"
    first = load_build_inputs(build, outputs, log=print)
    assert first.kept and all(handle.loaded() for handle in first.kept.values())  # checked when first seen
    again = load_build_inputs(build, outputs, log=print)
    assert again.kept.keys() == first.kept.keys()
    assert not any(handle.loaded() for handle in again.kept.values())
    assert again.files == first.files and again.warnings == first.warnings  # the rows and warnings kept
    assert [h.key for h in again.kept.values()] == [h.key for h in first.kept.values()]
    pd.testing.assert_frame_equal(again.tables["templates"], first.tables["templates"])  # loaded when read
    assert again.kept["templates"].loaded()


def test_an_input_changed_into_a_bad_one_stops_the_build_though_its_last_version_was_kept(
    sample_copy: Path, tmp_path: Path
) -> None:
    build = load_config(sample_copy / "configs" / "sample.toml")
    load_build_inputs(build, tmp_path / "outputs", log=print)
    templates = sample_copy / "annotations" / "templates.csv"
    templates.write_text(templates.read_text(encoding="utf-8").replace("template_id", "template", 1), "utf-8")
    with pytest.raises(InputError, match=r"templates\.csv"):
        load_build_inputs(build, tmp_path / "outputs", log=print)


def _refuse(path: Path | None) -> None:
    raise AssertionError(f"{path} was read")


def test_a_kept_input_keys_a_stage_by_its_key_without_reading_it(tmp_path: Path) -> None:
    unread = KeptInput("k1", _refuse, tmp_path / "never.csv")
    assert input_digest({"templates": unread}) == {"templates": {"KeptInput": {"input": "k1"}}}
    assert not unread.loaded()
    copied = pickle.loads(pickle.dumps(unread))  # to a Dask worker: how to load it, never a lock
    assert copied.key == "k1" and not copied.loaded()


def test_a_kept_input_is_loaded_once_with_its_needs_tables(tmp_path: Path) -> None:
    calls: list[Path | None] = []
    lock = threading.Lock()

    def load(path: Path | None, *needs: pd.DataFrame) -> pd.DataFrame:
        with lock:
            calls.append(path)
        return pd.DataFrame({"n": [len(needs[0]) if needs else 0]})

    need = KeptInput("need", load, tmp_path / "a.csv")
    handle = KeptInput("input", load, tmp_path / "b.csv", (need,))
    threads = [threading.Thread(target=handle.load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [tmp_path / "a.csv", tmp_path / "b.csv"]
    assert loaded(handle)["n"].tolist() == [1] and loaded("as it is") == "as it is"
