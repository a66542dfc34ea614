"""Publishing a build (docs/architecture.md §1, publish): the release's data part and the publish stage.

A build publishes in two stages: :data:`RELEASE_DATA` (``10_data``), cached on the example tables, writes the
release's data part (:func:`pbbq.tasks.publish.release.data_part`: the parquet shards of every config and the
lm-eval task); :data:`STAGE` (``10_publish``), run every build, takes those files by reference into the release
folder with the run's manifest, transcript and dataset card
(:func:`pbbq.tasks.publish.release.write_release`) and, unless a dry run, uploads it as one tagged Hub commit
(:func:`pbbq.tasks.publish.hub.upload_release`).

A build whose inputs are synthetic (``pbbq synth``) or whose LLM answers are stand-ins says so in its card and
is not uploaded (synthetic ones only with ``force_synthetic``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import pandas as pd
from prefect.artifacts import create_link_artifact

from ..core.artifacts import StageOutput
from ..core.stage import Configs, ReleaseConfig, Report, RunValue, Stage, Table
from ..kappa_gate import GateParams
from ..llm import transcript_header
from ..review.report import card_section
from .dataset_card import CardBody, CardParams, ConfigInfo
from .hub import PublishError, upload_release
from .release import (
    RELEASE_FILES,
    ReleaseError,
    ReleaseFile,
    RunInputs,
    data_part,
    file_table,
    link_or_copy,
    split_configs,
    write_release,
)

ARTIFACT_KEY = "pbbq-release"
SYNTHETIC_ID_PREFIX = "SYNTH-"
"""The id prefix of synthetic inputs (``pbbq synth``): examples with such a stereotype id are synthetic."""


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


BUILD_NAMED_FILES = ("README.md", "manifest.json")
"""Release files that carry the build's id (the card, the run's manifest): listed in the report, not in the
``release_files`` table, whose bytes then depend only on the data, as every stage's tables do."""


def _synthetic_ids(examples: pd.DataFrame) -> bool:
    """Whether any example comes from a synthetic stereotype (``pbbq synth``'s ids)."""
    return bool(examples["stereotype_id"].astype(str).str.startswith(SYNTHETIC_ID_PREFIX).any())


def release_data(examples: pd.DataFrame, configs: Sequence[str] = ()) -> StageOutput:
    """The release's data part as a cached stage (:func:`data_part` of :func:`split_configs`): its files in its
    folder at their paths in the release, so that a rebuild takes them by reference from the cache; its table
    lists them, its report holds each config as the card describes it and whether the examples are synthetic by
    their ids. What depends on the run (the card, the manifest, the transcript) is :func:`publish`'s."""
    data = data_part(split_configs(examples, configs))
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


@dataclass(frozen=True, kw_only=True)
class PublishRun(RunInputs):
    """What publishing takes from the run besides the release's data: what the release folder takes
    (:class:`~pbbq.tasks.publish.release.RunInputs`), the build's id and configuration, the stage's parameters, what
    the card says of the funnel, the gate and the names, and the Hub's URL. :func:`publish` takes these as
    keyword arguments (its stage inputs) and builds this once."""

    build_id: str
    build_config: str
    params: PublishParams
    funnel_labels: Mapping[str, str] | None = None
    gate: GateParams | None = None
    endpoint: str | None = None
    card_body: CardBody | None = None
    release_configs: Mapping[str, ReleaseConfig] | None = None
    """The configs as the pipeline declares them (what the card says each holds)."""
    review: Mapping[str, Any] | None = None
    """The review stage's report, when the build took review decisions (``[review]``)."""

    def card(self) -> CardParams:
        """The dataset card's parameters for this run."""
        body, gate = self.card_body, self.gate
        chosen: dict[str, Any] = {"pretty_name": body.pretty_name} if body else {}  # else CardParams' defaults
        if gate:
            chosen |= {"min_kappa": gate.min_kappa, "min_relevance": gate.min_relevance}
        return CardParams(
            build_id=self.build_id,
            build_config=self.build_config,
            repo_id=self.params.repo_id,
            license=self.params.license,
            funnel_labels=dict(self.funnel_labels or {}),
            transcript_header=None if self.transcript_path is None else transcript_header(self.transcript_path),
            body=body,
            release_configs=dict(self.release_configs or {}),
            review=card_section(self.review) if self.review else "",
            **chosen,
        )


@dataclass(frozen=True)
class _DataPart:
    """A release's data part as :func:`_publish` takes it: its files and configs, where their bytes are (the data
    stage's folder, each file taken by reference) and the examples it was made from (how many, whether synthetic
    by id)."""

    files: Sequence[ReleaseFile]
    infos: Sequence[ConfigInfo]
    source: Path
    examples_in: int
    synthetic_ids: bool

    def place(self, path: str, target: Path) -> None:
        """Put the data file ``path`` at ``target``."""
        link_or_copy(self.source / path, target)


def publish(out_dir: Path, release: Mapping[str, Any], release_files: pd.DataFrame, **run: Any) -> StageOutput:
    """The publish stage of a build: the release folder under ``out_dir`` from the data part that
    :data:`RELEASE_DATA` wrote in its folder beside ``out_dir`` in the same run (``release``: its report,
    ``release_files``: its table), each file taken by reference, with this run's manifest, transcript and card
    (``run``: the fields of :class:`PublishRun`); uploaded unless ``params.dry_run``. Not a cached task: the upload
    has side effects, and the folder belongs to this run. Returns the release's file table and a report whose
    ``link`` is the release on the Hub, or the local folder in a dry run."""
    folder = out_dir.parent / RELEASE_DATA.folder
    files = tuple(
        ReleaseFile(row.path, row.sha256, int(row.bytes), None if pd.isna(row.rows) else int(row.rows))
        for row in release_files.itertuples(index=False)
    )
    infos = tuple(
        ConfigInfo(**{**info, "langs": tuple(info["langs"]), "variants": tuple(info["variants"])})
        for info in release["configs"]
    )
    data = _DataPart(files, infos, folder, int(release["counts"]["in"]), bool(release["synthetic_ids"]))
    return _publish(out_dir, data, PublishRun(**run))


def _publish(out_dir: Path, data: _DataPart, run: PublishRun) -> StageOutput:
    """The release folder from its data part (as :func:`~pbbq.tasks.publish.release.write_release` takes it), the
    upload and the stage's output."""
    params, card = run.params, run.card()
    synthetic = params.synthetic or data.synthetic_ids
    stand_in = card.transcript_header is not None and card.transcript_header.get("stand_in") is True
    release = write_release(
        out_dir, data.files, data.infos, data.place, run, card=card, synthetic=synthetic, stand_in=stand_in
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
            build_id=run.build_id,
            manifest_sha256=release.manifest_sha256,
            endpoint=run.endpoint,
            tag=params.tag,
            files={file.path: file.sha256 for file in release.files},
        )
    published = sum(release.configs.values())
    files = release.file_table()
    names_the_build = files["path"].isin(BUILD_NAMED_FILES)
    report: dict[str, Any] = {
        "stage": "publish",
        "parameters": asdict(params),
        "counts": {"in": data.examples_in, "out": published},
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
    created = create_link_artifact(
        link=report["link"],
        link_text=f"PBBQ {where}",
        key=ARTIFACT_KEY,
        description=f"PBBQ {where}; examples per config: {configs}",
    )
    return cast(UUID, created)  # Prefect's async_dispatch: called outside an event loop, the sync call's UUID


RELEASE_DATA = Stage(
    "10_data",
    "release_data",
    release_data,
    inputs={"examples": Configs(), "configs": Configs(names=True)},
    outputs={"release_files": RELEASE_FILES},
    words=("examples", "released rows", "not released"),
)
"""The release's data part, cached on the example tables (the publish stage places its files by reference)."""

STAGE = Stage(
    "10_publish",
    "publish",
    publish,
    inputs={
        "release": Report(RELEASE_DATA.folder, dict),
        "release_files": Table(RELEASE_DATA.folder, "release_files"),
        "table1": Table("09_statistics", "table1"),
        "table2": Table("08_diversity", "table2"),
        "funnel": Table("09_statistics", "funnel"),
        "proxy_strength": Table("06_names", "proxy_strength"),
        "funnel_labels": RunValue("funnel_labels"),
        "release_configs": Configs(declared=True),
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
