"""The publish stage: the release folder, its dataset card, and the upload against a local fake Hub
(tests/fakes/hub_server.py) through the real huggingface_hub client."""

from __future__ import annotations

import hashlib
import json
import logging
import traceback
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from uuid import UUID

import datasets
import huggingface_hub.constants
import pandas as pd
import pyarrow.parquet as pq
import pytest
from huggingface_hub import CommitOperationAdd, DatasetCard, HfApi
from prefect import flow
from prefect.artifacts import Artifact

from pbbq.flows.cli import main
from pbbq.flows.pipeline import funnel_labels
from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.evaluation.lm_eval_task import task_name, utils_source
from pbbq.tasks.publish import ARTIFACT_KEY, PublishParams, create_release_artifact
from pbbq.tasks.publish.dataset_card import CardParams, features_yaml, size_category
from pbbq.tasks.publish.hub import PublishError, upload_release
from pbbq.tasks.publish.release import RELEASE, ReleaseError, ReleaseFolder, split_configs
from pbbq.tasks.statistics import table1
from tests.fakes.hub_server import FakeHub
from tests.helpers import load_release_offline
from tests.release_support import (
    BUILD,
    FUNNEL,
    build_release,
    make_configs,
    make_examples,
    publish_stage,
    run_inputs,
    write_inputs,
)

# huggingface_hub 2.4 itself uploads LFS files with httpx2's deprecated ``data=`` argument (lfs.py)
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_test-TOKEN-secret-0000"  # fake, shaped unlike a real token
REPO = "pbbq-tests/pbbq"
TABLE2 = pd.DataFrame(
    {
        "config": ["fa", "fa"],
        "category": ["Age", "Average"],
        "n_units": [12, 12],
        "ngd": [0.7812, 0.7812],
        "ttr": [0.5, 0.5],
        "self_bleu": [0.25, 0.25],
        "homogenization": [float("nan"), float("nan")],
        "homogenization_note": ["no homogenization model given for this language"] * 2,
    }
)


def release(
    tmp_path: Path,
    configs: dict[str, pd.DataFrame] | None = None,
    *,
    out: str = "publish",
    table2: pd.DataFrame | None = None,
    shard_rows: int = 10,
    transcript: bool = True,
) -> ReleaseFolder:
    manifest, transcript_path = write_inputs(tmp_path)
    configs = configs if configs is not None else make_configs()
    return build_release(
        tmp_path / out,
        configs,
        table1=table1(configs["fa"]),
        table2=table2,
        funnel=FUNNEL,
        manifest_path=manifest,
        transcript_path=transcript_path if transcript else None,
        card=CardParams(build_id=BUILD, repo_id=REPO, funnel_labels=funnel_labels()),
        shard_rows=shard_rows,
    )


def run_stage(
    tmp_path: Path,
    examples: pd.DataFrame,
    params: PublishParams,
    *,
    table2: pd.DataFrame | None = None,
    manifest: Path | None = None,
    endpoint: str | None = None,
) -> StageOutput:
    """publish_stage as the flow calls it, on hand-made examples, into ``tmp_path/10_publish``."""
    return publish_stage(
        tmp_path / "10_publish",
        examples,
        table1=table1(examples),
        table2=table2,
        funnel=FUNNEL,
        manifest_path=manifest,
        transcript_path=None,
        build_id=BUILD,
        build_config="configs/sample.toml",
        params=params,
        endpoint=endpoint,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A fake Hub that expects TOKEN, reached through HF_ENDPOINT with the Xet path off."""
    with FakeHub(token=TOKEN) as fake:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        # huggingface_hub reads these at import: patch the constants too, so nothing can reach the real Hub.
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", fake.url)
        yield fake


def upload(hub: FakeHub, folder: ReleaseFolder, *, tag: str | None = None, private: bool = True) -> object:
    assert folder.manifest_sha256 is not None
    return upload_release(
        folder.path,
        REPO,
        private=private,
        build_id=BUILD,
        manifest_sha256=folder.manifest_sha256,
        endpoint=hub.url,
        tag=tag,
    )


# ------------------------------------------------------------------------------------------- release folder


def test_release_folder_holds_sorted_typed_shards(tmp_path: Path) -> None:
    folder = release(tmp_path)
    files = snapshot(folder.path)
    assert sorted(path for path in files if path.startswith("data/")) == [
        "data/en/test-00000-of-00002.parquet",
        "data/en/test-00001-of-00002.parquet",
        "data/fa-names/test-00000-of-00003.parquet",
        "data/fa-names/test-00001-of-00003.parquet",
        "data/fa-names/test-00002-of-00003.parquet",
        "data/fa/test-00000-of-00003.parquet",
        "data/fa/test-00001-of-00003.parquet",
        "data/fa/test-00002-of-00003.parquet",
    ]
    assert folder.configs == {"fa": 30, "fa-names": 25, "en": 20}
    for name, frame in make_configs().items():
        shards = sorted(folder.path.glob(f"data/{name}/*.parquet"))
        tables = [pq.read_table(shard) for shard in shards]
        assert all(table.schema.equals(RELEASE, check_metadata=False) for table in tables)
        ids = [example_id for table in tables for example_id in table.column("example_id").to_pylist()]
        assert ids == sorted(frame["example_id"])
        first = tables[0].to_pylist()[0]
        assert set(first["answer_info"]) == {"ans0", "ans1", "ans2"}
        assert [first[f"ans{k}"] for k in range(3)] == [first["answer_info"][f"ans{k}"][0] for k in range(3)]
        assert isinstance(first["category"], str)
    assert files["manifest.json"] == (tmp_path / "run" / "manifest.json").read_bytes()
    assert files["transcript.jsonl"] == (tmp_path / "run" / "transcript.jsonl").read_bytes()
    assert {file.path: file.sha256 for file in folder.files} == {
        path: hashlib.sha256(data).hexdigest() for path, data in files.items()
    }


def test_the_release_carries_its_lm_eval_task(tmp_path: Path) -> None:
    folder = release(tmp_path)
    tasks = {path.name for path in (folder.path / "lm_eval").iterdir()}
    categories = {name: sorted(frame["category"].unique()) for name, frame in make_configs().items()}
    expected = {f"{task_name(config)}.yaml" for config in categories}
    expected |= {f"{task_name(config, generate=True)}.yaml" for config in categories}
    expected |= {f"{task_name(config, category)}.yaml" for config, names in categories.items() for category in names}
    assert {name for name in tasks if name.endswith(".yaml")} == expected
    assert "pbbq_fa_names_socio_economic_status.yaml" in expected
    assert (folder.path / "lm_eval" / "utils.py").read_text(encoding="utf-8") == utils_source(list(categories))
    listed = {file.path for file in folder.files if file.path.startswith("lm_eval/")}
    assert listed == {f"lm_eval/{name}" for name in tasks} and {"lm_eval/README.md", "lm_eval/utils.py"} <= listed
    config_task = (folder.path / "lm_eval" / "pbbq_fa_names.yaml").read_text(encoding="utf-8")
    assert 'config: "fa-names"' in config_task and "include: _pbbq_mc_template_yaml" in config_task


def test_same_inputs_give_the_same_bytes_and_a_rebuild_leaves_no_stale_shard(tmp_path: Path) -> None:
    first = snapshot(release(tmp_path, out="a").path)
    second = snapshot(release(tmp_path, out="b").path)
    assert first == second
    rebuilt = release(tmp_path, out="a", shard_rows=1000)
    assert sorted(path for path in snapshot(rebuilt.path) if path.startswith("data/fa/")) == [
        "data/fa/test-00000-of-00001.parquet"
    ]
    assert [path.name for path in (tmp_path / "a").iterdir()] == ["hub"]


def test_invalid_configs_are_refused_and_leave_no_folder(tmp_path: Path) -> None:
    duplicated = make_examples(4)
    duplicated.loc[1, "example_id"] = duplicated.loc[0, "example_id"]
    for configs, message in (
        ({"fa": duplicated}, "duplicate example_id"),
        ({"Fa_Names": make_examples(3)}, "config name"),
        ({}, "nothing to publish"),
    ):
        with pytest.raises(ReleaseError, match=message):
            build_release(
                tmp_path / "bad",
                configs,
                table1=table1(make_examples(3)),
                funnel=FUNNEL,
                card=CardParams(build_id=BUILD),
            )
    assert not (tmp_path / "bad").exists() or list((tmp_path / "bad").iterdir()) == []


def test_split_configs_by_language_and_variant() -> None:
    examples = pd.concat(
        [make_examples(3), make_examples(2, variant="names-7271"), make_examples(2, variant="names-861")],
        ignore_index=True,
    )
    configs = split_configs(pd.concat([examples, make_examples(4, lang="en")], ignore_index=True))
    assert {name: len(frame) for name, frame in configs.items()} == {"en": 4, "fa": 3, "fa-names": 4}


# ----------------------------------------------------------------------------------------------- the card


def test_card_yaml_round_trips(tmp_path: Path) -> None:
    folder = release(tmp_path)
    card = DatasetCard.load(folder.path / "README.md")
    data = card.data.to_dict()
    assert data["configs"] == [
        {"config_name": "fa", "data_files": [{"split": "test", "path": "data/fa/test-*.parquet"}], "default": True},
        {"config_name": "fa-names", "data_files": [{"split": "test", "path": "data/fa-names/test-*.parquet"}]},
        {"config_name": "en", "data_files": [{"split": "test", "path": "data/en/test-*.parquet"}]},
    ]
    infos = {info["config_name"]: info for info in data["dataset_info"]}
    assert set(infos) == {"fa", "fa-names", "en"}
    for name, rows in folder.configs.items():
        assert infos[name]["features"] == features_yaml(RELEASE)
        [split] = infos[name]["splits"]
        assert split["name"] == "test" and split["num_examples"] == rows and split["num_bytes"] > 0
    answer_info = next(f for f in infos["fa"]["features"] if f["name"] == "answer_info")
    assert answer_info == {"name": "answer_info", "struct": [{"name": f"ans{i}", "list": "string"} for i in range(3)]}
    roles = next(f for f in infos["fa"]["features"] if f["name"] == "answer_roles")
    assert roles == {"name": "answer_roles", "struct": [{"name": f"ans{i}", "dtype": "string"} for i in range(3)]}
    assert data["license"] == "cc-by-4.0"
    assert data["language"] == ["fa", "en"]
    assert data["task_categories"] == ["question-answering", "multiple-choice"]
    assert data["size_categories"] == "n<1K"
    assert str(card) == (folder.path / "README.md").read_text(encoding="utf-8")


def test_card_body_reports_this_build(tmp_path: Path) -> None:
    folder = release(tmp_path)
    text = (folder.path / "README.md").read_text(encoding="utf-8")
    assert f"`manifest.json` (sha256 `{folder.manifest_sha256}`)" in text
    for expected in (
        "Content warning",
        "## Intended use",
        "## Prohibited and out-of-scope uses",
        "| Templates that passed the annotation gate | 4 |",
        "| Published in `fa-names` | 25 |",
        "| **Total** | **3** | **30** |",
        "Not computed in this build",
        "| `answer_info` | `struct<ans0: list<item: string>, ans1: list<item: string>, ans2: list<item: string>>` |",
        "Δ_bias = Acc(Q_bias) − Acc(Q_counter)",
        "PBBQ_LLM_MODE=replay pbbq build --config configs/sample.toml",
        "Farsi, Farhan and Bali, Shayan",
        f"build `{BUILD}`",
        f'load_dataset("{REPO}", "fa", split="test")',
    ):
        assert expected in text, expected
    with_table2 = (release(tmp_path, out="t2", table2=TABLE2).path / "README.md").read_text(encoding="utf-8")
    # no category has a BERTScore: its column is left out and a sentence says why, not an empty column
    assert "| Age | 12 | 0.7812 | 0.5000 | 0.2500 |\n" in with_table2
    assert "BERTScore ↓" not in with_table2 and "| not computed |" not in with_table2
    assert (
        "The BERTScore column is left out: no category has it in this build (no homogenization model given for "
        "this language)." in with_table2
    )
    assert "| **Average** | **12** |" in with_table2
    assert "Not computed in this build" not in with_table2


def test_size_categories() -> None:
    assert [size_category(n) for n in (0, 999, 1_000, 37_742, 113_226, 2_000_000)] == [
        "n<1K",
        "n<1K",
        "1K<n<10K",
        "10K<n<100K",
        "100K<n<1M",
        "1M<n<10M",
    ]


def test_load_dataset_offline_reads_every_config_with_declared_features(tmp_path: Path) -> None:
    folder = release(tmp_path)
    loaded = load_release_offline(folder.path, folder.configs, tmp_path)
    declared = datasets.Features.from_arrow_schema(RELEASE).to_dict()
    for name, frame in make_configs().items():
        assert loaded[name]["rows"] == len(frame)
        assert loaded[name]["features"] == declared
        assert loaded[name]["ids"] == sorted(frame["example_id"])
        assert set(loaded[name]["first"]) == {"ans0", "ans1", "ans2"}


# ------------------------------------------------------------------------------------------------- upload


def release_commits(hub: FakeHub) -> list:
    """The commits of the test repo after the Hub's own initial commit."""
    commits = hub.repo(REPO).commits
    assert commits[0].message == "initial commit"
    return commits[1:]


def test_one_commit_holds_every_file_of_the_release(tmp_path: Path, hub: FakeHub) -> None:
    folder = release(tmp_path)
    result = upload(hub, folder, tag="v1")
    [commit] = release_commits(hub)
    assert result.committed and result.commit_oid == commit.oid and result.tag == "v1"
    assert result.repo_url == f"{hub.url}/datasets/{REPO}"
    assert BUILD in commit.message and folder.manifest_sha256 in commit.message
    assert hub.repo(REPO).files() == {".gitattributes": hub.repo(REPO).commits[0].files[".gitattributes"].content} | (
        snapshot(folder.path)
    )
    assert {path for path, stored in commit.files.items() if stored.lfs} == {
        file.path for file in folder.files if file.path.endswith(".parquet")
    }
    assert hub.repo(REPO).tags == {"v1": commit.oid}
    assert hub.repo(REPO).private
    assert hub.calls["commit"] == 1 and hub.calls["validate_yaml"] == 1 and hub.calls["lfs_put"] == 8


def test_the_tag_defaults_to_the_build_id(tmp_path: Path, hub: FakeHub) -> None:
    result = upload(hub, release(tmp_path))
    assert result.tag == BUILD and hub.repo(REPO).tags == {BUILD: result.commit_oid}


@pytest.mark.parametrize(
    ("endpoint", "status", "nth", "message"),
    [
        ("lfs_put", 403, 2, "Request has expired"),
        ("commit", 500, 1, "Internal error while committing"),
        ("preupload", 403, 1, "You have no write access to this repository"),
    ],
)
def test_a_failure_mid_upload_leaves_no_commit_and_the_folder_intact(
    tmp_path: Path, hub: FakeHub, endpoint: str, status: int, nth: int, message: str
) -> None:
    folder = release(tmp_path)
    before = snapshot(folder.path)
    hub.fail(endpoint, status=status, message=message, nth=nth)
    with pytest.raises(PublishError, match=message) as failure:
        upload(hub, folder, tag="v1")
    assert str(status) in str(failure.value)
    assert release_commits(hub) == [] and hub.repo(REPO).tags == {}
    assert set(hub.repo(REPO).files()) == {".gitattributes"}
    assert snapshot(folder.path) == before
    result = upload(hub, folder, tag="v1")
    assert [commit.oid for commit in release_commits(hub)] == [result.commit_oid]


def test_the_token_reaches_no_artifact_log_or_error(
    tmp_path: Path, hub: FakeHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    params = PublishParams(repo_id=REPO, dry_run=False, tag="v1")
    configs = make_configs()
    examples = pd.concat(configs.values(), ignore_index=True)
    stage_inputs = {**run_inputs(tmp_path, table1(configs["fa"])), "endpoint": hub.url}
    output = publish_stage(tmp_path / "ok", examples, params=params, **stage_inputs)
    hub.fail("commit", status=500, message="commit refused", echo_authorization=True)
    with pytest.raises(PublishError) as failure:
        publish_stage(
            tmp_path / "failed", make_examples(12, salt="x"), params=replace(params, tag="v2"), **stage_inputs
        )
    error_text = "".join(traceback.format_exception(failure.value))
    assert "commit refused" in error_text and "[REDACTED]" in error_text
    assert hub.calls["commit"] == 2
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    for text in (error_text, caplog.text, json.dumps(output.report, default=str), written.decode("utf-8", "replace")):
        assert TOKEN not in text
    assert TOKEN.encode() not in written


def test_a_second_publish_of_the_same_build_makes_no_commit(tmp_path: Path, hub: FakeHub) -> None:
    folder = release(tmp_path)
    first = upload(hub, folder, tag="v1")
    second = upload(hub, folder, tag="v1")
    assert not second.committed and second.commit_oid == first.commit_oid
    assert len(release_commits(hub)) == 1 and hub.calls["commit"] == 1 and hub.calls["tag"] == 1
    assert hub.repo(REPO).tags == {"v1": first.commit_oid}


def test_an_unchanged_release_whose_tagging_failed_is_tagged_without_a_new_commit(tmp_path: Path, hub: FakeHub) -> None:
    folder = release(tmp_path)
    hub.fail("tag", status=500, message="tag service unavailable")
    with pytest.raises(PublishError, match="tag service unavailable"):
        upload(hub, folder, tag="v1")
    [commit] = release_commits(hub)
    result = upload(hub, folder, tag="v1")
    assert not result.committed and result.commit_oid == commit.oid
    assert hub.repo(REPO).tags == {"v1": commit.oid} and len(release_commits(hub)) == 1


def test_a_tag_names_one_build(tmp_path: Path, hub: FakeHub) -> None:
    upload(hub, release(tmp_path), tag="v1")
    before = hub.repo(REPO).files()
    changed = release(tmp_path, make_configs(salt="changed"), out="changed")
    with pytest.raises(PublishError, match="tag 'v1' exists already"):
        upload(hub, changed, tag="v1")
    assert len(release_commits(hub)) == 1 and hub.repo(REPO).files() == before


def test_a_new_release_replaces_the_files_of_the_last_one(tmp_path: Path, hub: FakeHub) -> None:
    first = release(tmp_path)
    upload(hub, first, tag="v1")
    HfApi(endpoint=hub.url).create_commit(
        REPO,
        [CommitOperationAdd(path_in_repo="notes/curators.md", path_or_fileobj=b"kept by hand\n")],
        commit_message="a file the builder does not own",
        repo_type="dataset",
    )
    smaller = release(tmp_path, {"fa": make_examples(30, salt="v2")}, out="v2", shard_rows=100, transcript=False)
    result = upload(hub, smaller, tag="v2")
    old_data = {file.path for file in first.files if file.path.startswith("data/")}
    # the tasks of the configs the new release no longer has go too; the shared ones are replaced
    old_tasks = {file.path for file in first.files if file.path.startswith("lm_eval/")}
    new_tasks = {file.path for file in smaller.files if file.path.startswith("lm_eval/")}
    assert "lm_eval/pbbq_en.yaml" in old_tasks - new_tasks and "lm_eval/utils.py" in new_tasks
    assert result.committed and set(result.deleted) == old_data | (old_tasks - new_tasks) | {"transcript.jsonl"}
    files = hub.repo(REPO).files()
    assert set(files) == {".gitattributes", "notes/curators.md", *snapshot(smaller.path)}
    assert hub.repo(REPO).tags["v1"] != hub.repo(REPO).tags["v2"] == result.commit_oid


def test_a_private_release_is_not_published_into_a_public_repo(tmp_path: Path, hub: FakeHub) -> None:
    HfApi(endpoint=hub.url).create_repo(REPO, repo_type="dataset", private=False)
    with pytest.raises(PublishError, match="is public"):
        upload(hub, release(tmp_path), private=True)
    assert release_commits(hub) == []


def test_no_token_is_a_clear_error(tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    with pytest.raises(PublishError, match="no Hugging Face token"):
        upload(hub, release(tmp_path))
    assert hub.requests == []


def test_a_manifest_that_changed_since_the_release_is_refused(tmp_path: Path, hub: FakeHub) -> None:
    folder = release(tmp_path)
    (folder.path / "manifest.json").write_text("{}\n", encoding="utf-8")
    with pytest.raises(PublishError, match="does not have the sha256"):
        upload(hub, folder)
    assert hub.requests == []


# -------------------------------------------------------------------------------------------------- stage


def test_a_dry_run_writes_the_folder_and_uploads_nothing(tmp_path: Path, hub: FakeHub) -> None:
    configs = make_configs()
    output = run_stage(tmp_path, pd.concat(configs.values(), ignore_index=True), PublishParams(), endpoint=hub.url)
    assert hub.requests == []
    report = output.report
    assert report["dry_run"] and report["upload"] is None
    assert report["link"] == (tmp_path / "10_publish" / "hub").resolve().as_uri()
    assert report["configs"] == {"fa": 30, "fa-names": 25, "en": 20}
    assert report["counts"] == {"in": 75, "out": 75}
    files = output["release_files"]
    assert list(files.columns) == ["path", "sha256", "bytes", "rows"]
    # the card names the build, so it is listed in the report; the table holds what depends on the data only
    on_disk = set(snapshot(tmp_path / "10_publish" / "hub"))
    assert set(files["path"]) == on_disk - {"README.md"}
    assert [entry["path"] for entry in report["build_named_files"]] == ["README.md"]


def test_the_stage_links_the_tagged_release(tmp_path: Path, hub: FakeHub) -> None:
    manifest, _ = write_inputs(tmp_path)
    output = run_stage(
        tmp_path,
        make_examples(12),
        PublishParams(repo_id=REPO, dry_run=False),
        table2=TABLE2,
        manifest=manifest,
        endpoint=hub.url,
    )
    upload_report = output.report["upload"]
    assert upload_report["committed"] and upload_report["tag"] == BUILD
    assert output.report["link"] == f"{hub.url}/datasets/{REPO}/tree/{BUILD}"
    assert "transcript.jsonl" not in hub.repo(REPO).files()


def test_publish_params_are_checked() -> None:
    with pytest.raises(ValueError, match="repo_id is required"):
        PublishParams(dry_run=False)
    with pytest.raises(ValueError, match="namespace/name"):
        PublishParams(repo_id="no-namespace")
    assert PublishParams().dry_run and PublishParams().private and PublishParams().license == "cc-by-4.0"


def test_the_release_link_artifact_points_at_the_folder_in_a_dry_run(tmp_path: Path, prefect_server: None) -> None:
    """The flow's call: a link artifact to the local release folder (slow: starts the session's Prefect server)."""
    output = run_stage(tmp_path, make_examples(12), PublishParams())

    @flow
    def link_release() -> UUID:
        return create_release_artifact(output.report)

    artifact_id = link_release()
    artifact = Artifact.get(ARTIFACT_KEY)
    assert artifact is not None and artifact.id == artifact_id and artifact.type == "markdown"
    assert (tmp_path / "10_publish" / "hub").resolve().as_uri() in str(artifact.data)
    assert "fa: 12" in str(artifact.description)


def test_the_sample_build_publishes_in_one_commit_and_fails_cleanly(
    prefect_server: None, hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flow end to end against the fake Hub: `pbbq build --sample --repo-id … --upload`."""
    outputs = tmp_path / "outputs"
    command = ["build", "--sample", "--outputs", str(outputs), "--repo-id", REPO, "--upload"]
    assert main([*command, "--run-id", "first"]) == 0
    [commit] = release_commits(hub)
    assert "first" in commit.message
    folder = outputs / "first" / "10_publish" / "hub"
    assert hub.repo(REPO).files() == {".gitattributes": hub.repo(REPO).commits[0].files[".gitattributes"].content} | (
        snapshot(folder)
    )
    report = json.loads((outputs / "first" / "10_publish" / "report.json").read_text(encoding="utf-8"))
    assert report["upload"]["committed"] and report["link"].startswith(hub.url)

    hub.fail("commit", status=500, message="Internal error while committing", nth=1)
    capsys.readouterr()
    assert main([*command, "--run-id", "second"]) == 1
    assert "Internal error while committing" in capsys.readouterr().err
    assert len(release_commits(hub)) == 1  # the Hub is unchanged
    assert (outputs / "second" / "10_publish" / "hub" / "README.md").is_file()  # the local release is kept
    manifest = json.loads((outputs / "second" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "failed" and "Internal error while committing" in manifest["error"]
    for path in outputs.rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path
