"""The stage cache key: the code part follows imports, so editing a helper module recomputes exactly the stages
that use it; the input part is the tables' content."""

from __future__ import annotations

import pickle
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pandas as pd
import pyarrow as pa

from pbbq.tasks.core.artifacts import FILE_MODE, REPO_ROOT, ArtifactStore, StageOutput, sha256_file
from pbbq.tasks.core.caching import StageInputsAndCode
from pbbq.tasks.core.code_hash import data_files, module_closure, stage_code_hash
from pbbq.tasks.core.digests import input_digest, row_hashes
from pbbq.tasks.core.stored import StoredInput, StoredStage
from pbbq.tasks.survey_filter import survey_filter
from tests.helpers import stage_function, write_module


def test_editing_a_helper_recomputes_the_dependent_stage_only(tmp_path: Path) -> None:
    write_module(tmp_path, "pbbq.tasks.text", "def tokens(s):\n    return s.split()\n")
    write_module(tmp_path, "pbbq.tasks.metric", "from pbbq.tasks.text import tokens\n")
    write_module(tmp_path, "pbbq.tasks.diversity", "import numpy\nfrom pbbq.tasks import metric\n")
    write_module(tmp_path, "pbbq.tasks.survey", "from .core.schemas import X\n")
    write_module(tmp_path, "pbbq.tasks.core.schemas", "X = 1\n")
    assert list(module_closure("pbbq.tasks.diversity", tmp_path)) == [
        "pbbq.tasks",
        "pbbq.tasks.diversity",
        "pbbq.tasks.metric",
        "pbbq.tasks.text",
    ]
    assert list(module_closure("pbbq.tasks.survey", tmp_path)) == ["pbbq.tasks.core.schemas", "pbbq.tasks.survey"]
    diversity, survey = stage_function("pbbq.tasks.diversity"), stage_function("pbbq.tasks.survey")
    before = stage_code_hash(diversity, tmp_path), stage_code_hash(survey, tmp_path)
    write_module(tmp_path, "pbbq.tasks.text", "def tokens(s):\n    return s.lower().split()\n")  # two modules away
    after = stage_code_hash(diversity, tmp_path), stage_code_hash(survey, tmp_path)
    assert after[0] != before[0] and after[1] == before[1]
    write_module(tmp_path, "pbbq.tasks.core.schemas", "X = 2\n")  # reached by a relative import
    assert stage_code_hash(survey, tmp_path) != after[1]


def test_a_package_that_finds_its_modules_uses_them_all_and_their_data_files(tmp_path: Path) -> None:
    """The languages package imports no language module by name (it finds them with pkgutil), and a language's word
    lists are data files beside its module: both are part of the code of a stage that uses the package."""
    package = tmp_path / "tasks" / "langs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import pkgutil\n\nFOUND = [m.name for m in pkgutil.iter_modules(__path__)]\n")
    (package / "xx.py").write_text("WORDS = 'xx.toml'\n")
    (package / "xx.toml").write_text('words = ["a"]\n')
    write_module(tmp_path, "pbbq.tasks.stage", "from .langs import FOUND\n")
    assert "pbbq.tasks.langs.xx" in module_closure("pbbq.tasks.stage", tmp_path)
    stage = stage_function("pbbq.tasks.stage")
    before = stage_code_hash(stage, tmp_path)
    (package / "xx.toml").write_text('words = ["b"]\n')
    assert stage_code_hash(stage, tmp_path) != before


def test_the_real_stages_cover_the_modules_they_use() -> None:
    languages = {"pbbq.tasks.text.languages", "pbbq.tasks.text.languages.fa", "pbbq.tasks.text.languages.en"}
    assert {*languages, "pbbq.tasks.core.schemas"} <= set(module_closure("pbbq.tasks.diversity"))
    folder = REPO_ROOT / "tasks" / "text" / "languages"
    assert data_files(folder / "fa.py") == [folder / "fa.toml"] and data_files(folder / "__init__.py") == []
    assert {
        "pbbq.tasks.text.cues",
        "pbbq.tasks.names.draw",
        "pbbq.tasks.names.patterns",
        "pbbq.tasks.names.tables",
    } <= set(module_closure("pbbq.tasks.names"))
    assert "pbbq.tasks.text.cues" in module_closure("pbbq.tasks.instantiate")
    assert "pbbq.tasks.names" not in module_closure("pbbq.tasks.survey_filter")


def test_a_table_is_keyed_by_its_content_not_its_index() -> None:
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1, 2]})
    assert input_digest(frame) == input_digest(frame.set_axis([5, 9]))
    assert input_digest(frame) != input_digest(frame.assign(b=[1, 3]))


def test_a_keys_row_hash_is_its_rows_wherever_they_are_and_any_changed_cell_changes_it() -> None:
    """A split stage's part is kept by the hash of its key's rows: the same whatever the other keys' rows are and
    wherever its rows sit, different for any cell changed (a string, a list's item, a struct's field, a flag, a
    null), for its rows' order and for a value moved from one cell to the next."""
    frame = pd.DataFrame(
        {
            "template_id": ["b", "a", "b", "c", "a"],
            "text": ["x", "yz", "", None, "w"],
            "items": [["p"], [], ["q", "r"], None, ["s"]],
            "info": [{"k": "1", "v": [1]}, {"k": "2", "v": []}, {"k": None, "v": [2, 3]}, None, {"k": "4", "v": [4]}],
            "n": [1, 2, 3, None, 5],
            "flag": [True, False, None, True, True],
        }
    )
    hashes = row_hashes(frame, "template_id")
    assert hashes.keys() == {"a", "b", "c"}
    moved = pd.concat([frame.iloc[[3, 1]], frame.iloc[[4, 0, 2]]], ignore_index=True)  # c, a, a, b, b
    assert row_hashes(moved, "template_id") == hashes
    assert row_hashes(frame[frame["template_id"] != "c"], "template_id") == {k: hashes[k] for k in ("a", "b")}
    changes = {
        "text": frame.assign(text=["x", "yz", "", None, "v"]),
        "a string split otherwise": frame.assign(text=["x", "y", "z", None, "w"]),
        "list item": frame.assign(items=[["p"], [], ["q", "r"], None, ["t"]]),
        "list split otherwise": frame.assign(items=[["p"], ["s"], ["q", "r"], None, []]),
        "struct field": frame.assign(info=[*frame["info"][:4], {"k": "4", "v": [5]}]),
        "null": frame.assign(n=[1, 2, 3, None, None]),
        "flag": frame.assign(flag=[True, False, None, True, False]),
        "order": frame.iloc[[0, 4, 2, 3, 1]],
    }
    for change, changed in changes.items():
        again = row_hashes(changed, "template_id")
        assert again["a"] != hashes["a"] and again["c"] == hashes["c"], change


def test_a_table_already_written_is_keyed_by_its_file_hash_alone() -> None:
    """The runner passes earlier stages' tables as :class:`StoredInput` (their files' hashes and where to load
    them): the key takes the hashes as they are, never the frames, so a rebuild neither loads nor serializes
    those tables only to key them, and a changed table (a changed hash) changes it."""
    context = cast(Any, SimpleNamespace(task=SimpleNamespace(fn=survey_filter)))
    policy = StageInputsAndCode(code=(survey_filter,))

    def key(digest: str, frame: pd.DataFrame) -> str | None:
        return policy.compute_key(context, {"examples": StoredInput(((digest, {"t": frame}, "t"),)), "n": 3}, {})

    frame = pd.DataFrame({"a": ["x", "y"]})
    assert key("aa", frame) == key("aa", frame.assign(a=["changed", "y"]))
    assert key("aa", frame) != key("bb", frame)
    assert policy.compute_key(context, {"examples": frame}, {}) != policy.compute_key(
        context, {"examples": frame.assign(a=["changed", "y"])}, {}
    )  # a table no stage wrote: keyed by its content


def _output() -> StageOutput:
    examples = pd.DataFrame({"example_id": ["e1", "e2"], "ids": [["r1"], []]})
    table = pa.schema([("example_id", pa.string()), ("ids", pa.list_(pa.string()))])
    return StageOutput({"examples": examples}, {"examples": table}, {"counts": {"in": 2}}, csv=("examples",))


def test_a_stored_stage_is_a_record_of_hashes_and_its_frames_load_only_when_read(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    output = _output()
    stored = StoredStage.keep(output, store)
    assert [(f.name, f.rows) for f in stored.files] == [("examples.parquet", 2), ("examples.csv", 2)]
    assert all(sha256_file(store.file(f.sha256)) == f.sha256 for f in stored.files)
    assert stored.tables(store)["examples"] is output["examples"]  # the run that computed it keeps its frames
    record = pickle.loads(pickle.dumps(stored))  # what Prefect persists: no frame in it
    assert len(pickle.dumps(stored)) < len(pickle.dumps(output["examples"])) + 1000
    tables = record.tables(store)
    assert not tables._loaded
    pd.testing.assert_frame_equal(tables["examples"], output["examples"])
    assert tables["examples"]["ids"].tolist() == [["r1"], []]  # the frame as the stage made it, lists and all
    assert record.complete(store)
    store.file(stored.frames["examples"]).unlink()
    assert not record.complete(store)  # a store cleaned by hand: the runner computes the stage again


def test_a_file_is_placed_as_a_copy_never_a_hard_link(tmp_path: Path) -> None:
    """A run folder is a place a user edits: an edit there must not reach the store (issue 35, item 1)."""
    store = ArtifactStore(tmp_path / "store")
    digest = store.put(b"table bytes")
    placed = tmp_path / "run" / "a.parquet"
    store.place(digest, placed)
    assert placed.read_bytes() == b"table bytes" and placed.stat().st_ino != store.file(digest).stat().st_ino
    assert store.file(digest).stat().st_nlink == 1
    assert stat.S_IMODE(placed.stat().st_mode) == FILE_MODE
    placed.write_bytes(b"edited in place")
    assert store.read(digest) == b"table bytes"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["a.parquet"]  # no temporary left


def test_a_costly_file_is_made_once_per_key(tmp_path: Path) -> None:
    """A cached stage's ``report.json`` (megabytes of JSON for the names stage) is encoded once, then placed by
    reference from the store like its tables."""
    store = ArtifactStore(tmp_path / "store")
    made: list[str] = []

    def make(text: str) -> bytes:
        made.append(text)
        return text.encode()

    first = store.memo("report of run A, cached", lambda: make("{a}"))
    assert store.memo("report of run A, cached", lambda: make("{changed}")) == first
    assert store.file(first).read_bytes() == b"{a}" and made == ["{a}"]
    assert store.file(store.memo("report of run A, computed", lambda: make("{b}"))).read_bytes() == b"{b}"
