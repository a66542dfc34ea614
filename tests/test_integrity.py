"""Trust nothing unchecked (issue 35, items 1, 2 and 9): a run takes checked copies of the content store's files,
never hard links; a damaged store file is computed again with a warning; ``pbbq verify``, ``pbbq audit`` and
publish find a run or a release that is not what its manifest says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pbbq.flows.audit.audit import audit_text
from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import REPO_ROOT, ArtifactStore, StageOutput, sha256_file
from pbbq.tasks.core.run_folder import RunExistsError, RunFolder
from pbbq.tasks.core.stored import LazyTables, StoredStage
from pbbq.tasks.evaluation.evaluate import EvaluateError, resolve_release, task_folder
from pbbq.tasks.publish.hub import PublishError, upload_release
from tests.fakes.hub_server import FakeHub

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

EN = "10_publish/hub/data/en/test-00000-of-00001.parquet"
TOKEN = "hf_test-TOKEN-secret-0000"


def _labels_to_zero(path: Path) -> None:
    """Rewrite a parquet file in place (the same inode), every ``label`` 0: what a user's script may do."""
    table = pq.read_table(path)
    index = table.schema.get_field_index("label")
    table = table.set_column(index, "label", pa.array([0] * table.num_rows, table.schema.field("label").type))
    with path.open("r+b") as handle:
        handle.truncate(0)
        pq.write_table(table, handle)


def _build(outputs: Path, run_id: str) -> Path:
    from pbbq.flows.build_pbbq import build_pbbq

    return Path(build_pbbq(run_id=run_id, outputs=str(outputs)))


@pytest.fixture(scope="module")
def sample_build(prefect_server: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The sample built once (``first``) into an outputs folder of this module's."""
    outputs = tmp_path_factory.mktemp("outputs")
    yield outputs, _build(outputs, "first")
    shutil.rmtree(outputs, ignore_errors=True)


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def _listed(run: Path, path: str) -> str:
    manifest = _manifest(run)
    files = [*manifest["files"], *(a for s in manifest["stages"] for a in s["artifacts"])]
    return next(f["sha256"] for f in files if f["path"] == path)


def test_an_edited_release_reaches_neither_the_store_nor_the_next_release(sample_build: tuple[Path, Path]) -> None:
    outputs, first = sample_build
    original = _listed(first, EN)
    _labels_to_zero(first / EN)
    second = _build(outputs, "edited")
    assert sha256_file(second / EN) == original == _listed(second, EN)
    assert set(pq.read_table(second / EN)["label"].to_pylist()) != {0}
    from pbbq.tasks.core.verification import verify_folder  # new in issue 35: the checks above fail without it

    assert verify_folder(second).ok and verify_folder(second / "10_publish" / "hub").ok
    found = verify_folder(first)
    assert {m.path for m in found.mismatches} == {EN, EN.replace("10_publish/hub", "10_data")}
    assert {m.kind for m in found.mismatches} == {"size"}
    assert [m.path for m in verify_folder(first / "10_publish" / "hub").mismatches] == [EN.split("hub/")[1]]
    assert any("TAMPERED" in line and EN in line for line in audit_text(first).splitlines())
    assert "files: all" in audit_text(second)


def test_a_truncated_store_file_is_computed_again_with_a_warning(sample_build: tuple[Path, Path]) -> None:
    outputs, first = sample_build
    digest = _listed(first, EN)
    stored = outputs / ".cache" / "stage-files" / digest
    data = stored.read_bytes()
    stored.write_bytes(data[: len(data) // 2])
    leftover = stored.with_name(f".{digest}.{_dead_pid()}-k1lled00.tmp")  # what a SIGKILL mid-write leaves
    leftover.write_bytes(b"\0" * 6_800_000)
    third = _build(outputs, "truncated")
    assert not leftover.exists()
    assert sha256_file(third / EN) == digest and sha256_file(stored) == digest
    from pbbq.tasks.core.verification import verify_folder

    assert verify_folder(third).ok
    warnings = _manifest(third)["warnings"]
    assert any(w.startswith("10_data: computed again") and digest in w for w in warnings), warnings


def test_pbbq_verify_names_each_file_that_differs_and_exits_non_zero(
    sample_build: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, first = sample_build
    run = tmp_path / "run"
    shutil.copytree(first, run)
    (run / "10_publish" / "hub" / "README.md").write_text("# another card\n", encoding="utf-8")  # a replaced card
    (run / "02_survey" / "report.json").unlink()
    (run / "01_crawl" / "planted.csv").write_text("x\n", encoding="utf-8")
    assert main(["verify", str(run)]) == 1
    out = capsys.readouterr().out
    assert "10_publish/hub/README.md: sha256:" in out
    assert "02_survey/report.json: missing" in out and "01_crawl/planted.csv: extra" in out
    (run / "audit.html").write_text("written by pbbq audit", encoding="utf-8")  # not the build's: left out
    manifest = _manifest(run)
    manifest["parameters"]["stages"] = {}  # a replaced manifest
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert main(["verify", str(run)]) == 1
    out = capsys.readouterr().out
    assert "manifest.json: sha256: differs from the release's copy" in out and "audit.html" not in out


def test_a_release_whose_manifest_was_replaced_fails_against_its_card(
    sample_build: tuple[Path, Path], tmp_path: Path
) -> None:
    _, first = sample_build
    release = tmp_path / "release"
    shutil.copytree(first / "10_publish" / "hub", release)
    manifest = _manifest(release)
    manifest["warnings"] = []
    (release / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    from pbbq.tasks.core.verification import verify_folder

    found = [m for m in verify_folder(release).mismatches if not m.path.startswith("data/en/")]  # edited above
    assert [(m.path, m.kind) for m in found] == [("manifest.json", "sha256")]
    assert "the dataset card names" in found[0].detail


def test_publish_refuses_a_release_that_differs_from_its_manifest(
    sample_build: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, first = sample_build
    release = tmp_path / "release"
    shutil.copytree(first / "10_publish" / "hub", release)
    _labels_to_zero(release / "data" / "fa" / "test-00000-of-00001.parquet")
    with FakeHub(token=TOKEN) as hub:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
        with pytest.raises(
            PublishError,
            match=r"data/fa/test-00000-of-00001.parquet: sha256.*nothing was uploaded|"
            r"nothing was uploaded.*data/fa/test-00000-of-00001.parquet: sha256",
        ):
            upload_release(
                release,
                "pbbq-tests/pbbq",
                private=True,
                build_id="first",
                manifest_sha256=sha256_file(release / "manifest.json"),
                endpoint=hub.url,
                tag=None,
            )
        assert hub.requests == []


# ------------------------------------------------------------------------------------- the store, in small


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_only_a_dead_process_temporary_files_are_removed(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    digest = store.put(b"kept")
    dead = [
        tmp_path / "store" / f".{digest}.{_dead_pid()}-abcd1234.tmp",
        tmp_path / "store" / "memo" / f".{_dead_pid()}-abcd1234.tmp.jsonl.gz",
    ]
    live = tmp_path / "store" / f".{digest}.{os.getpid()}-abcd1234.tmp"  # a live build's, being written
    other = tmp_path / "store" / ".not-ours.tmp"
    for path in (*dead, live, other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    assert sorted(store.remove_leftovers()) == sorted(dead)
    assert live.exists() and other.exists() and store.read(digest) == b"kept"


def test_a_damaged_frame_is_refused_when_read_and_removed(tmp_path: Path) -> None:
    from pbbq.tasks.core.artifacts import DamagedStoreFile

    store = ArtifactStore(tmp_path / "store")
    output = StageOutput({"t": pd.DataFrame({"a": [1, 2]})}, {"t": pa.schema([("a", pa.int64())])}, {})
    stored = StoredStage.keep(output, store)
    frame = store.file(stored.frames["t"])
    frame.write_bytes(frame.read_bytes()[:-1])
    assert any("bytes, not the" in problem for problem in stored.damaged(store))  # its size, without reading it
    assert not frame.exists() and not stored.complete(store)
    digest = store.put(b"frame bytes")
    store.file(digest).write_bytes(b"frame byteZ")  # same size, other bytes
    with pytest.raises(DamagedStoreFile, match="does not have the sha256"):
        LazyTables({"t": digest}, store)["t"]
    assert not store.has(digest)
    assert store.put(b"frame bytes") == digest and store.read(digest) == b"frame bytes"


def test_a_damaged_store_file_is_never_placed(tmp_path: Path) -> None:
    from pbbq.tasks.core.artifacts import DamagedStoreFile

    store = ArtifactStore(tmp_path / "store")
    digest = store.put(b"table bytes")
    store.file(digest).write_bytes(b"table")
    with pytest.raises(DamagedStoreFile):
        store.place(digest, tmp_path / "run" / "a.parquet")
    assert not (tmp_path / "run" / "a.parquet").exists() and list((tmp_path / "run").iterdir()) == []
    assert store.recall("key") is None
    store.remember("key", store.put(b"memo"))
    store.file(sha := store.recall("key") or "").write_bytes(b"memO")
    assert store.recall("key") is None and not store.has(sha)  # a memo whose file is damaged is made again


# ------------------------------------------------------------------------------------------------ evaluate


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """A release folder (data, lm_eval, manifest listing them, card naming the manifest), no build needed."""
    from tests.bbq_records import write_run

    return write_run(tmp_path / "build") / "10_publish" / "hub"


def test_evaluation_is_keyed_by_the_data_it_reads(release: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    _labels_to_zero(copy / "data" / "en" / "test-00000-of-00001.parquet")
    original, edited = (resolve_release(str(folder), tmp_path) for folder in (release, copy))
    assert edited.sha256 != original.sha256  # a cached score of the original is never this copy's
    from pbbq.tasks.evaluation.evaluate import check_release

    assert check_release(original) == []
    with pytest.raises(EvaluateError, match=r"data/en/test-00000-of-00001.parquet: sha256.*--unverified"):
        check_release(edited)
    (warning,) = check_release(edited, unverified=True)
    assert "NOT VERIFIED" in warning and "configs scored: en, fa, fa-names" in warning


@pytest.mark.parametrize("damage", ["deleted", "unparseable"])
def test_a_release_without_a_valid_manifest_is_refused_unless_unverified(
    release: Path, tmp_path: Path, damage: str
) -> None:
    from pbbq.tasks.evaluation.evaluate import check_release

    if damage == "deleted":
        (release / "manifest.json").unlink()
    else:
        (release / "manifest.json").write_text("{not json", encoding="utf-8")
    found = resolve_release(str(release), tmp_path)
    with pytest.raises(EvaluateError, match=r"manifest.*--unverified"):
        check_release(found)
    assert "NOT VERIFIED" in check_release(found, unverified=True)[0]


def test_a_deleted_config_is_named(release: Path, tmp_path: Path) -> None:
    from pbbq.tasks.evaluation.evaluate import check_release

    shutil.rmtree(release / "data" / "en")
    found = resolve_release(str(release), tmp_path)
    with pytest.raises(EvaluateError, match=r"data/en/test-00000-of-00001.parquet: missing"):
        check_release(found)
    assert "configs scored: fa, fa-names" in check_release(found, unverified=True)[0]


def test_the_release_task_code_runs_only_when_it_is_the_builders(release: Path, tmp_path: Path) -> None:
    found = resolve_release(str(release), tmp_path)
    assert task_folder(found, tmp_path / "eval") == (release / "lm_eval", None)
    utils = release / "lm_eval" / "utils.py"
    utils.write_text(utils.read_text(encoding="utf-8") + "\nimport os\nos.environ['PWNED'] = '1'\n", encoding="utf-8")
    folder, note = task_folder(found, tmp_path / "eval")
    assert folder == tmp_path / "eval" / "lm_eval" and note is not None and "utils.py" in note
    assert "PWNED" not in (folder / "utils.py").read_text(encoding="utf-8")


def test_a_duplicate_eval_id_is_named_as_such(tmp_path: Path) -> None:
    RunFolder.create(tmp_path, "eval-1", {}, id_option="--eval-id")
    with pytest.raises(RunExistsError, match="choose another --eval-id"):
        RunFolder.create(tmp_path, "eval-1", {}, id_option="--eval-id")
    source = (REPO_ROOT / "flows" / "evaluate_pbbq.py").read_text(encoding="utf-8")
    assert 'id_option="--eval-id"' in source
