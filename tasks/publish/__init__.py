"""Publishing a build (docs/architecture.md §1, publish): a release folder, and one Hub commit per release.

The release folder (``<out_dir>/hub/``) is what the Hub repository will hold:

- ``data/<config>/test-0000i-of-0000N.parquet`` per config (``fa``, ``fa-names``, ``en``, ...), rows sorted by
  ``example_id``, split into N files of at most ``shard_rows`` rows. The schema is explicit and is
  :data:`RELEASE`: every column of the example table (``pbbq.tasks.core.schemas.EXAMPLE``), typed, ``answer_info`` a
  struct, categories plain strings. No column is held back: ``llm_request_ids`` and ``source_example_id`` are
  provenance that the shipped transcript and the other configs resolve, and ``stereo_entity`` /
  ``nonstereo_entity`` let a user analyse by group without parsing text.
- ``lm_eval/``: the release's lm-evaluation-harness task (:mod:`pbbq.tasks.evaluation.lm_eval_task`), a YAML per config
  and category and the ``utils.py`` they name, so ``lm_eval --include_path <release>/lm_eval --tasks pbbq_fa`` scores
  a model on this folder as the PBBQ paper did (§4).
- ``manifest.json`` (the run's manifest) and ``transcript.jsonl`` (the recorded LLM answers), when given.
- ``README.md``, the dataset card (:mod:`pbbq.tasks.publish.dataset_card`).

The same inputs give the same bytes (parquet as :func:`pbbq.tasks.core.artifacts.parquet_bytes` writes it, without the
pandas metadata; no timestamp in the card). The folder is written under a temporary name and swapped in, so a
killed run never leaves a half-written release.

Upload (:func:`upload_release`) makes ONE commit holding every file of the folder, with the build id and the
manifest's sha256 in its message, and tags it (the tag defaults to the build id). Files of the release's own
paths (``data/``, ``lm_eval/``, ``README.md``, ``manifest.json``, ``transcript.jsonl``) that the Hub holds but the
folder does not, e.g. a shard of an earlier, larger release, are deleted in the same commit; other files are left
alone.
A failure anywhere before the commit leaves the repository's history as it was; the local folder is never
touched by an upload.

Publishing an unchanged release again makes NO commit: when the Hub's files already equal the folder's, the
head commit is the release; it is tagged if the tag is missing, and the call reports ``committed=False``.
huggingface_hub would also skip an empty commit on its own (after uploading nothing), but deciding from the
file listing first lets the tag rule be checked before anything changes. A release tag names one build: if the
tag exists on another commit, or the files differ from what it tagged, the upload is refused before any change.

The token is never a parameter: huggingface_hub reads ``HF_TOKEN`` or its own login. It is scrubbed from every
error this module raises, and never written to a file or a log.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pandas as pd
import pyarrow as pa
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, get_token
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils.sha import git_hash
from prefect.artifacts import create_link_artifact

from ..core.artifacts import FILE_MODE, StageOutput, atomic_write_bytes, parquet_bytes, sha256_bytes, sha256_file
from ..core.redaction import REDACTED
from ..core.schemas import EXAMPLE, example_configs, to_arrow
from ..core.stage import Configs, Report, RunValue, Stage, Table
from ..evaluation.lm_eval_task import task_files
from ..kappa_gate import GateParams
from ..llm import transcript_header
from .dataset_card import STAND_IN_NOTE, CardBody, CardParams, ConfigInfo, card_with_note, render_card

log = logging.getLogger(__name__)

RELEASE: pa.Schema = EXAMPLE
"""The schema of every published parquet file: the example table as it is (see the module docstring)."""

RELEASE_FILES = pa.schema([("path", pa.string()), ("sha256", pa.string()), ("bytes", pa.int64()), ("rows", pa.int64())])
SHARD_ROWS = 100_000
CONFIG_ORDER = ("fa", "fa-names", "en", "en-names")
CONFIG_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MANAGED_FILES = frozenset({"README.md", "manifest.json", "transcript.jsonl"})
MANAGED_PREFIX = "data/"
TASK_FOLDER = "lm_eval"
MANAGED_PREFIXES = (MANAGED_PREFIX, f"{TASK_FOLDER}/")
REPO_TYPE = "dataset"
REVISION = "main"
ARTIFACT_KEY = "pbbq-release"
_TOKEN_LIKE = re.compile(r"hf_[A-Za-z0-9]{8,}")
SYNTHETIC_ID_PREFIX = "SYNTH-"
"""The id prefix of synthetic inputs (``pbbq synth``): examples with such a stereotype id are synthetic."""
SYNTHETIC_NOTE = (
    "> **SYNTHETIC — NOT PBBQ DATA.** This build was made from synthetic inputs (`pbbq synth`): placeholder\n"
    "> stereotypes, survey answers, templates, ratings and LLM answers. Its examples say nothing about any group\n"
    "> or model; do not publish, cite or evaluate with it.\n"
)


class ReleaseError(ValueError):
    """The tables cannot be made into a release (no config, a bad config name, an empty config, duplicate ids)."""


class PublishError(RuntimeError):
    """The upload to the Hub failed or was refused; the message carries the Hub's own and never the token."""


@dataclass(frozen=True)
class ReleaseFile:
    path: str
    sha256: str
    bytes: int
    rows: int | None


@dataclass(frozen=True)
class ReleaseFolder:
    """A written release: its folder (the future repository root), its files and the rows per config."""

    path: Path
    files: tuple[ReleaseFile, ...]
    configs: dict[str, int]
    manifest_sha256: str | None

    def file_table(self) -> pd.DataFrame:
        """One row per file (path, sha256, bytes, rows), for the stage's table and the audit."""
        return file_table(self.files)


def file_table(files: Sequence[ReleaseFile]) -> pd.DataFrame:
    """One row per release file (path, sha256, bytes, rows): :data:`RELEASE_FILES`."""
    return pd.DataFrame([asdict(file) for file in files], columns=RELEASE_FILES.names).astype({"rows": "Int64"})


@dataclass(frozen=True)
class UploadResult:
    """What the Hub holds after an upload: the commit of the release, whether it was made now, and its tag."""

    repo_url: str
    commit_oid: str
    committed: bool
    tag: str
    deleted: tuple[str, ...]

    @property
    def release_url(self) -> str:
        return f"{self.repo_url}/tree/{self.tag}"


@dataclass(frozen=True)
class PublishParams:
    """The publish stage's parameters. ``dry_run`` (the default) writes the release folder and uploads nothing;
    ``tag`` defaults to the build id."""

    repo_id: str | None = None
    dry_run: bool = True
    private: bool = True
    tag: str | None = None
    license: str = "cc-by-4.0"
    synthetic: bool = False
    """The inputs are synthetic (``pbbq synth`` sets it; so do ``SYNTH-`` stereotype ids): the card says so, and
    nothing is uploaded unless ``force_synthetic``."""
    force_synthetic: bool = False

    def __post_init__(self) -> None:
        if not self.dry_run and not self.repo_id:
            raise ValueError("publish: repo_id is required unless dry_run is true")
        if self.repo_id is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repo_id):
            raise ValueError(f"publish: repo_id {self.repo_id!r} is not of the form 'namespace/name'")
        if not self.license:
            raise ValueError("publish: license must not be empty")


# --------------------------------------------------------------------------------------------- release folder


def split_configs(examples: pd.DataFrame, configs: Sequence[str] = ()) -> dict[str, pd.DataFrame]:
    """The examples of each published config (``fa``, ``fa-names``, ``en``, ...), by language and variant; each of
    ``configs`` is there even with no examples (a stage that kept nothing gives an empty config)."""
    names = example_configs(examples)
    return {str(name): examples[names == name].reset_index(drop=True) for name in sorted({*names.unique(), *configs})}


def _config_key(name: str) -> tuple[int, str]:
    return (CONFIG_ORDER.index(name) if name in CONFIG_ORDER else len(CONFIG_ORDER), name)


def _config_table(name: str, frame: pd.DataFrame) -> pa.Table:
    """The config's rows as an Arrow table of the release schema, sorted by example_id."""
    if not CONFIG_NAME.fullmatch(name):
        raise ReleaseError(f"config name {name!r}: use lowercase letters, digits and single dashes")
    duplicated = frame["example_id"][frame["example_id"].duplicated()]
    if not duplicated.empty:
        raise ReleaseError(f"config {name!r}: duplicate example_id(s) {sorted(duplicated.unique())[:5]}")
    ordered = frame.sort_values("example_id", kind="stable").reset_index(drop=True)
    return to_arrow(ordered, RELEASE, f"release config {name}").replace_schema_metadata(None)


def _shards(table: pa.Table, shard_rows: int) -> list[pa.Table]:
    """``table`` cut into the fewest slices of at most ``shard_rows`` rows, of (nearly) equal size; an empty table
    is one empty shard, so that its config loads (with no rows)."""
    count = max(1, math.ceil(table.num_rows / shard_rows))
    size = math.ceil(table.num_rows / count)
    return [table.slice(index * size, size) for index in range(count)]


def _swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` by the complete folder ``staging``: at every moment one complete version is there."""
    if target.exists():
        retired = target.with_name(f".{target.name}-old-{uuid.uuid4().hex[:8]}")
        os.replace(target, retired)
        os.replace(staging, target)
        shutil.rmtree(retired)
    else:
        os.replace(staging, target)


@dataclass(frozen=True)
class ReleaseData:
    """What of a release depends only on the example tables: its data files (the parquet shards of every config and
    the lm-eval task) by path, listed in ``files``, and each config as the card describes it."""

    data: dict[str, bytes]
    files: tuple[ReleaseFile, ...]
    infos: tuple[ConfigInfo, ...]


def release_data(configs: Mapping[str, pd.DataFrame], shard_rows: int = SHARD_ROWS) -> ReleaseData:
    """The data part of a release: each config's rows as parquet shards of at most ``shard_rows`` rows
    (``data/<config>/test-…``) and the lm-eval task of the configs with examples (``lm_eval/``; no build id in it)."""
    if not configs:
        raise ReleaseError("nothing to publish: no config has examples")
    if shard_rows < 1:
        raise ReleaseError(f"shard_rows must be at least 1, not {shard_rows}")
    data: dict[str, bytes] = {}
    files: list[ReleaseFile] = []
    infos: list[ConfigInfo] = []
    for name in sorted(configs, key=_config_key):
        table = _config_table(name, configs[name])
        shards = _shards(table, shard_rows)
        for index, shard in enumerate(shards):
            path = f"data/{name}/test-{index:05d}-of-{len(shards):05d}.parquet"
            data[path] = parquet_bytes(shard)
            files.append(ReleaseFile(path, sha256_bytes(data[path]), len(data[path]), shard.num_rows))
        frame = configs[name]
        infos.append(
            ConfigInfo(
                name=name,
                rows=len(frame),
                data_files=f"data/{name}/test-*.parquet",
                langs=tuple(sorted(frame["lang"].unique())),
                variants=tuple(sorted(frame["variant"].unique())),
                num_bytes=table.nbytes,
                download_size=sum(file.bytes for file in files if file.path.startswith(f"data/{name}/")),
            )
        )
    categories = {
        name: sorted(configs[name]["category"].unique())
        for name in sorted(configs, key=_config_key)
        if not configs[name].empty  # an empty config has nothing to score: no task
    }
    for name, task in (task_files(categories) if categories else {}).items():
        path = f"{TASK_FOLDER}/{name}"
        data[path] = task
        files.append(ReleaseFile(path, sha256_bytes(task), len(task), None))
    return ReleaseData(data, tuple(files), tuple(infos))


def link_or_copy(source: Path, target: Path) -> None:
    """Put the file ``source`` at ``target`` by reference: a hard link, or a copy on another file system."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
        os.chmod(target, FILE_MODE)


def build_release(
    out_dir: Path,
    configs: Mapping[str, pd.DataFrame],
    *,
    table1: pd.DataFrame,
    table2: pd.DataFrame | None,
    funnel: pd.DataFrame,
    manifest_path: Path | None,
    transcript_path: Path | None,
    card: CardParams,
    shard_rows: int = SHARD_ROWS,
    synthetic: bool = False,
    stand_in: bool = False,
    proxy_strength: pd.DataFrame | None = None,
) -> ReleaseFolder:
    """Write the release folder ``out_dir/hub/`` (parquet per config, the lm-eval task, manifest, transcript,
    dataset card; a ``synthetic`` build's card opens with :data:`SYNTHETIC_NOTE`, a ``stand_in`` one's with
    :data:`~pbbq.tasks.publish.dataset_card.STAND_IN_NOTE`): :func:`release_data`, then :func:`write_release`."""
    data = release_data(configs, shard_rows)
    return write_release(
        out_dir,
        data.files,
        data.infos,
        lambda path, target: atomic_write_bytes(target, data.data[path]),
        table1=table1,
        table2=table2,
        funnel=funnel,
        manifest_path=manifest_path,
        transcript_path=transcript_path,
        card=card,
        synthetic=synthetic,
        stand_in=stand_in,
        proxy_strength=proxy_strength,
    )


def write_release(
    out_dir: Path,
    files: Sequence[ReleaseFile],
    infos: Sequence[ConfigInfo],
    place: Callable[[str, Path], None],
    *,
    table1: pd.DataFrame,
    table2: pd.DataFrame | None,
    funnel: pd.DataFrame,
    manifest_path: Path | None,
    transcript_path: Path | None,
    card: CardParams,
    synthetic: bool = False,
    stand_in: bool = False,
    proxy_strength: pd.DataFrame | None = None,
    transcript_sha256: str | None = None,
) -> ReleaseFolder:
    """Write the release folder ``out_dir/hub/`` from its data part (``files``, each put at its path by ``place``,
    and ``infos``, :func:`release_data`), the run's manifest and transcript (each placed by reference;
    ``transcript_sha256``: the transcript's hash when the run has it, else it is read) and the dataset card, under a
    temporary name swapped in whole."""
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = out_dir / f".hub-{uuid.uuid4().hex[:12]}"
    staging.mkdir()  # under the umask like the files in it (mkdtemp's 0700 would keep the release private)
    try:
        listed = list(files)
        for file in files:
            place(file.path, staging / file.path)
        manifest_sha256 = None
        known = {"transcript.jsonl": transcript_sha256}
        for source, path in ((manifest_path, "manifest.json"), (transcript_path, "transcript.jsonl")):
            if source is not None:
                link_or_copy(source, staging / path)
                digest = known.get(path) or sha256_file(staging / path)
                listed.append(ReleaseFile(path, digest, (staging / path).stat().st_size, None))
                if path == "manifest.json":
                    manifest_sha256 = digest
        readme = render_card(
            list(infos),
            RELEASE,
            table1=table1,
            table2=table2,
            funnel=funnel,
            manifest_sha256=manifest_sha256,
            has_transcript=transcript_path is not None,
            card=card,
            proxy_strength=proxy_strength,
        )
        text = synthetic_card(str(readme)) if synthetic else str(readme)
        data = (card_with_note(text, STAND_IN_NOTE) if stand_in else text).encode("utf-8")
        atomic_write_bytes(staging / "README.md", data)
        listed.append(ReleaseFile("README.md", sha256_bytes(data), len(data), None))
        _swap_in(staging, out_dir / "hub")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ReleaseFolder(
        path=out_dir / "hub",
        files=tuple(sorted(listed, key=lambda file: file.path)),
        configs={info.name: info.rows for info in infos},
        manifest_sha256=manifest_sha256,
    )


def synthetic_card(card: str) -> str:
    """The dataset card with :data:`SYNTHETIC_NOTE` first after its YAML header."""
    return card_with_note(card, SYNTHETIC_NOTE)


# ----------------------------------------------------------------------------------------------------- upload


def scrub(text: str, token: str | None) -> str:
    """``text`` with the token, and anything shaped like a Hub token, replaced by ``[REDACTED]``."""
    if token:
        text = text.replace(token, REDACTED)
    return _TOKEN_LIKE.sub(REDACTED, text)


def _error_text(exc: BaseException) -> str:
    """The messages of an exception and of its causes (huggingface_hub wraps the Hub's error in its own)."""
    messages: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(messages) < 5:
        message = str(current).strip() or type(current).__name__
        if message not in messages:
            messages.append(message)
        current = current.__cause__ or current.__context__
    return " <- ".join(messages)


def _release_files(folder: Path) -> dict[str, Path]:
    """Every file of the release folder by its path in the repository."""
    files = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
    if "README.md" not in files or not any(path.startswith(MANAGED_PREFIX) for path in files):
        raise PublishError(f"{folder} is not a release folder (README.md and data/ expected)")
    return files


def _managed(path: str) -> bool:
    return path in MANAGED_FILES or path.startswith(MANAGED_PREFIXES)


def _same(remote: RepoFile | None, local: Path) -> bool:
    """Whether the Hub's file has the local file's content (LFS: sha256; regular: git blob sha1)."""
    if remote is None or remote.size != local.stat().st_size:
        return False
    if remote.lfs is not None:
        return remote.lfs.sha256 == sha256_file(local)
    return remote.blob_id == git_hash(local.read_bytes())


def _commit_text(build_id: str, manifest_sha256: str, files: Mapping[str, Path]) -> tuple[str, str]:
    message = f"PBBQ release of build {build_id} (manifest sha256 {manifest_sha256})"
    configs = sorted({path.split("/")[1] for path in files if path.startswith(MANAGED_PREFIX)}, key=_config_key)
    description = "\n".join(
        [
            f"Build: {build_id}",
            f"Manifest sha256: {manifest_sha256}",
            f"Configs: {', '.join(configs)}",
            f"Files: {len(files)}",
        ]
    )
    return message, description


def _upload(
    api: HfApi, folder: Path, repo_id: str, *, private: bool, build_id: str, manifest_sha256: str, tag: str
) -> UploadResult:
    local = _release_files(folder)
    repo_url = str(api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True))
    info = api.dataset_info(repo_id)
    if private and info.private is False:
        raise PublishError(
            f"{repo_id} exists and is public, but a private release was asked for: make the repository private "
            "on the Hub first, or publish with private = false"
        )
    head: str | None = info.sha
    tagged = next(
        (ref.target_commit for ref in api.list_repo_refs(repo_id, repo_type=REPO_TYPE).tags if ref.name == tag), None
    )
    remote = {}
    if head is not None:
        listing = api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=head, recursive=True)
        remote = {entry.path: entry for entry in listing if isinstance(entry, RepoFile)}
    stale = tuple(sorted(path for path in remote if _managed(path) and path not in local))
    unchanged = head is not None and not stale and all(_same(remote.get(path), file) for path, file in local.items())
    if tagged is not None and not (tagged == head and unchanged):
        raise PublishError(
            f"tag {tag!r} exists already on {repo_id} (commit {tagged[:12]}) and does not name this release; "
            "a release tag names one build: publish with another tag"
        )
    if unchanged and head is not None:
        log.info("%s already holds this release at commit %s: no new commit", repo_id, head)
        commit_oid, committed = head, False
    else:
        message, description = _commit_text(build_id, manifest_sha256, local)
        operations: list[CommitOperationAdd | CommitOperationDelete] = [
            CommitOperationAdd(path_in_repo=path, path_or_fileobj=file) for path, file in local.items()
        ]
        operations += [CommitOperationDelete(path_in_repo=path) for path in stale]
        commit = api.create_commit(
            repo_id,
            operations,
            commit_message=message,
            commit_description=description,
            repo_type=REPO_TYPE,
            revision=REVISION,
            parent_commit=head,
        )
        commit_oid, committed = commit.oid, commit.oid != head
        log.info("committed %d file(s) to %s as %s (%d deleted)", len(local), repo_id, commit_oid, len(stale))
    if tagged is None:
        api.create_tag(repo_id, tag=tag, tag_message=f"PBBQ build {build_id}", revision=commit_oid, repo_type=REPO_TYPE)
        log.info("tagged %s of %s as %s", commit_oid, repo_id, tag)
    return UploadResult(repo_url=repo_url, commit_oid=commit_oid, committed=committed, tag=tag, deleted=stale)


def upload_release(
    folder: Path,
    repo_id: str,
    *,
    private: bool,
    build_id: str,
    manifest_sha256: str,
    endpoint: str | None = None,
    tag: str | None,
) -> UploadResult:
    """Publish the release folder to the dataset repository ``repo_id`` as one commit, tagged ``tag`` (default:
    the build id). ``endpoint`` is the Hub's URL (default: ``HF_ENDPOINT`` or huggingface.co). The folder must
    hold the ``manifest.json`` whose sha256 is ``manifest_sha256``. Raises :class:`PublishError`."""
    token = get_token()
    if token is None:
        raise PublishError("no Hugging Face token: set HF_TOKEN or log in with `hf auth login`")
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise PublishError(f"{folder} has no manifest.json; a published release always carries its manifest")
    if sha256_file(manifest) != manifest_sha256:
        raise PublishError(f"{manifest} does not have the sha256 {manifest_sha256} it was published with")
    api = HfApi(endpoint=endpoint, library_name="pbbq-builder")
    try:
        return _upload(
            api,
            folder,
            repo_id,
            private=private,
            build_id=build_id,
            manifest_sha256=manifest_sha256,
            tag=tag or build_id,
        )
    except PublishError as exc:
        raise PublishError(scrub(str(exc), token)) from None
    except Exception as exc:
        # Any failure of the client (HfHubHTTPError, the RuntimeError it wraps a failed LFS upload in, a
        # ValueError for invalid card metadata, a connection error) becomes one error whose text is scrubbed;
        # ``from None`` keeps the unscrubbed original out of tracebacks.
        raise PublishError(f"publishing to {repo_id} failed: {scrub(_error_text(exc), token)}") from None


# ------------------------------------------------------------------------------------------------------ stage


BUILD_NAMED_FILES = ("README.md", "manifest.json")
"""Release files that carry the build's id (the card, the run's manifest): listed in the report, not in the
``release_files`` table, whose bytes then depend only on the data, as every stage's tables do."""


def _synthetic_ids(examples: pd.DataFrame) -> bool:
    """Whether any example comes from a synthetic stereotype (``pbbq synth``'s ids)."""
    return bool(examples["stereotype_id"].astype(str).str.startswith(SYNTHETIC_ID_PREFIX).any())


def release_data_stage(examples: pd.DataFrame, configs: Sequence[str] = ()) -> StageOutput:
    """The release's data part as a cached stage (:func:`release_data` of :func:`split_configs`): its files in its
    folder at their paths in the release, so that a rebuild takes them by reference from the cache; its table
    lists them, its report holds each config as the card describes it and whether the examples are synthetic by
    their ids. What depends on the run (the card, the manifest, the transcript) is :func:`publish_release`'s."""
    data = release_data(split_configs(examples, configs))
    report: dict[str, Any] = {
        "stage": "release_data",
        "counts": {"in": len(examples), "out": sum(info.rows for info in data.infos)},
        "dropped": {"total": 0, "by_reason": {}},
        "configs": [asdict(info) for info in data.infos],
        "synthetic_ids": _synthetic_ids(examples),
    }
    return StageOutput(
        tables={"release_files": file_table(data.files)},
        schemas={"release_files": RELEASE_FILES},
        report=report,
        files=dict(data.data),
    )


def publish_release(
    out_dir: Path,
    release: Mapping[str, Any],
    release_files: pd.DataFrame,
    *,
    table1: pd.DataFrame,
    table2: pd.DataFrame | None,
    funnel: pd.DataFrame,
    manifest_path: Path | None,
    transcript_path: Path | None,
    build_id: str,
    build_config: str,
    params: PublishParams,
    funnel_labels: Mapping[str, str] | None = None,
    gate: GateParams | None = None,
    endpoint: str | None = None,
    proxy_strength: pd.DataFrame | None = None,
    card_body: CardBody | None = None,
    transcript_sha256: str | None = None,
) -> StageOutput:
    """The publish stage of a build: the release folder under ``out_dir`` from the data part that
    :data:`RELEASE_DATA` wrote in its folder beside ``out_dir`` in the same run (``release``: its report,
    ``release_files``: its table), each file taken by reference, with this run's manifest, transcript (its hash
    ``transcript_sha256`` as the run recorded it) and card; uploaded unless ``params.dry_run`` (:func:`publish_stage`
    says the rest)."""
    folder = out_dir.parent / RELEASE_DATA.folder
    files = tuple(
        ReleaseFile(row.path, row.sha256, int(row.bytes), None if pd.isna(row.rows) else int(row.rows))
        for row in release_files.itertuples(index=False)
    )
    infos = tuple(
        ConfigInfo(**{**info, "langs": tuple(info["langs"]), "variants": tuple(info["variants"])})
        for info in release["configs"]
    )
    return _publish(
        out_dir,
        (files, infos, lambda path, target: link_or_copy(folder / path, target)),
        int(release["counts"]["in"]),
        bool(release["synthetic_ids"]),
        table1=table1,
        table2=table2,
        funnel=funnel,
        manifest_path=manifest_path,
        transcript_path=transcript_path,
        card=_card(build_id, build_config, params, funnel_labels, gate, transcript_path, card_body),
        params=params,
        build_id=build_id,
        endpoint=endpoint,
        proxy_strength=proxy_strength,
        transcript_sha256=transcript_sha256,
    )


def publish_stage(
    out_dir: Path,
    examples: pd.DataFrame,
    *,
    table1: pd.DataFrame,
    table2: pd.DataFrame | None,
    funnel: pd.DataFrame,
    manifest_path: Path | None,
    transcript_path: Path | None,
    build_id: str,
    build_config: str,
    params: PublishParams,
    funnel_labels: Mapping[str, str] | None = None,
    gate: GateParams | None = None,
    endpoint: str | None = None,
    configs: Sequence[str] = (),
    proxy_strength: pd.DataFrame | None = None,
    card_body: CardBody | None = None,
) -> StageOutput:
    """Publish in one call: write the release folder under ``out_dir`` and, unless ``params.dry_run``, upload it
    (a build runs the same in two stages, :func:`release_data_stage` and :func:`publish_release`).

    ``examples`` holds the examples of every config (split by :func:`split_configs`); each of ``configs`` is
    published even when the build kept none of its examples. Not a cached task: the upload has side effects, and
    the folder belongs to this run. Returns the release's file table and a report whose ``link`` is the release
    on the Hub, or the local folder in a dry run."""
    data = release_data(split_configs(examples, configs))
    return _publish(
        out_dir,
        (data.files, data.infos, lambda path, target: atomic_write_bytes(target, data.data[path])),
        len(examples),
        _synthetic_ids(examples),
        table1=table1,
        table2=table2,
        funnel=funnel,
        manifest_path=manifest_path,
        transcript_path=transcript_path,
        card=_card(build_id, build_config, params, funnel_labels, gate, transcript_path, card_body),
        params=params,
        build_id=build_id,
        endpoint=endpoint,
        proxy_strength=proxy_strength,
    )


def _card(
    build_id: str,
    build_config: str,
    params: PublishParams,
    funnel_labels: Mapping[str, str] | None,
    gate: GateParams | None,
    transcript_path: Path | None,
    card_body: CardBody | None,
) -> CardParams:
    return CardParams(
        build_id=build_id,
        build_config=build_config,
        repo_id=params.repo_id,
        license=params.license,
        funnel_labels=dict(funnel_labels or {}),
        transcript_header=None if transcript_path is None else transcript_header(transcript_path),
        body=card_body,
        **({"pretty_name": card_body.pretty_name} if card_body else {}),
        **({"min_kappa": gate.min_kappa, "min_relevance": gate.min_relevance} if gate else {}),
    )


def _publish(
    out_dir: Path,
    data: tuple[Sequence[ReleaseFile], Sequence[ConfigInfo], Callable[[str, Path], None]],
    examples_in: int,
    synthetic_ids: bool,
    *,
    table1: pd.DataFrame,
    table2: pd.DataFrame | None,
    funnel: pd.DataFrame,
    manifest_path: Path | None,
    transcript_path: Path | None,
    card: CardParams,
    params: PublishParams,
    build_id: str,
    endpoint: str | None,
    proxy_strength: pd.DataFrame | None,
    transcript_sha256: str | None = None,
) -> StageOutput:
    """The release folder from its data part (``data``: files, configs and how to place a file, as
    :func:`write_release` takes them), the upload and the stage's output."""
    synthetic = params.synthetic or synthetic_ids
    stand_in = card.transcript_header is not None and card.transcript_header.get("stand_in") is True
    release = write_release(
        out_dir,
        *data,
        table1=table1,
        table2=table2,
        funnel=funnel,
        manifest_path=manifest_path,
        transcript_path=transcript_path,
        card=card,
        synthetic=synthetic,
        stand_in=stand_in,
        proxy_strength=proxy_strength,
        transcript_sha256=transcript_sha256,
    )
    upload = None
    if not params.dry_run:
        if stand_in:
            raise PublishError(
                f"publish: this build's LLM answers are STAND-IN placeholders (--stand-in) and it is not uploaded "
                f"(release folder {release.path}); build in replay, auto or live mode to publish"
            )
        if synthetic and not params.force_synthetic:
            raise PublishError(
                f"publish: this build is SYNTHETIC (pbbq synth inputs) and is not uploaded (release folder "
                f"{release.path}); set [publish] force_synthetic = true to upload it anyway"
            )
        if params.repo_id is None or release.manifest_sha256 is None:
            raise ReleaseError("publish: uploading needs a repo_id and the run's manifest.json (manifest_path)")
        upload = upload_release(
            release.path,
            params.repo_id,
            private=params.private,
            build_id=build_id,
            manifest_sha256=release.manifest_sha256,
            endpoint=endpoint,
            tag=params.tag,
        )
    published = sum(release.configs.values())
    files = release.file_table()
    names_the_build = files["path"].isin(BUILD_NAMED_FILES)
    report: dict[str, Any] = {
        "stage": "publish",
        "parameters": asdict(params),
        "counts": {"in": examples_in, "out": published},
        "dropped": {"total": 0, "by_reason": {}},
        "configs": release.configs,
        "folder": str(release.path),
        "manifest_sha256": release.manifest_sha256,
        "dry_run": params.dry_run,
        "synthetic": synthetic,
        "stand_in": stand_in,
        "upload": None if upload is None else {**asdict(upload), "release_url": upload.release_url},
        "link": release.path.resolve().as_uri() if upload is None else upload.release_url,
        "build_named_files": files[names_the_build].astype(object).to_dict(orient="records"),
    }
    return StageOutput(
        tables={"release_files": files[~names_the_build]}, schemas={"release_files": RELEASE_FILES}, report=report
    )


def create_release_artifact(report: Mapping[str, Any]) -> UUID:
    """A Prefect link artifact to the release: the Hub tree of its tag, or the local folder in a dry run."""
    where = "local release folder (dry run)" if report["dry_run"] else "release on the Hugging Face Hub"
    configs = ", ".join(f"{name}: {rows:,}" for name, rows in report["configs"].items())
    return create_link_artifact(
        link=report["link"],
        link_text=f"PBBQ {where}",
        key=ARTIFACT_KEY,
        description=f"PBBQ {where}; examples per config: {configs}",
    )


RELEASE_DATA = Stage(
    "10_data",
    "release_data",
    release_data_stage,
    inputs={"examples": Configs(), "configs": Configs(names=True)},
    outputs={"release_files": RELEASE_FILES},
    words=("examples", "released rows", "not released"),
)
"""The release's data part, cached on the example tables (the publish stage places its files by reference)."""

STAGE = Stage(
    "10_publish",
    "publish",
    publish_release,
    inputs={
        "release": Report(RELEASE_DATA.folder, dict),
        "release_files": Table(RELEASE_DATA.folder, "release_files"),
        "table1": Table("09_statistics", "table1"),
        "table2": Table("08_diversity", "table2"),
        "funnel": Table("09_statistics", "funnel"),
        "proxy_strength": Table("06_names", "proxy_strength"),
        "funnel_labels": RunValue("funnel_labels"),
        "gate": RunValue("gate"),
        "out_dir": RunValue("out_dir"),
        "transcript_path": RunValue("transcript_path"),
        "transcript_sha256": RunValue("transcript_sha256"),
        "manifest_path": RunValue("manifest_path"),
        "build_id": RunValue("build_id"),
        "build_config": RunValue("build_config"),
    },
    outputs={"release_files": RELEASE_FILES},
    params=PublishParams,
    words=("examples", "published rows", "not published"),
    cached=False,
)
