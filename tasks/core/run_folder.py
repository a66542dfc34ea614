"""A run's folder and its manifest (docs/architecture.md §5): the folder made (or an incomplete one replaced),
every stage's files and report recorded with their hashes and rows, the manifest written as stages finish, a run
id checked, a killed run's leftovers found and its status read. How a file is written (atomically, hashed) is
:mod:`pbbq.tasks.core.artifacts`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .artifacts import (
    REPO_ROOT,
    ArtifactStore,
    StageOutput,
    StoredFile,
    atomic_write_bytes,
    json_text,
    sha256_bytes,
    sha256_file,
    stage_files,
    write_json,
)


@dataclass(frozen=True)
class Artifact:
    path: str
    sha256: str
    rows: int | None


@dataclass
class StageRecord:
    stage: str
    folder: str
    cached: bool
    inputs: dict[str, str]
    artifacts: list[Artifact]
    report: dict[str, Any]
    declared: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """One progress line for the terminal, e.g. ``02_survey  44 in → 38 kept, 6 dropped (recomputed)``; rows
        a stage set aside but did not drop (the names stage's examples no name table covers, which stay in fa) are
        ``not covered``; a stage that splits by template says how many of its templates and rows it computed
        (``05_instantiate  … (recomputed: 1 of 276 template_id, 142 of 39276 examples)``)."""
        counts = self.report.get("counts", {})
        dropped = self.report.get("dropped", {}).get("total", 0)
        not_covered = self.report.get("not_covered", {}).get("total", 0)
        how = "cached" if self.cached else "recomputed"
        parts = self.report.get("parts")
        if parts and not self.cached:
            computed, total = parts["rows"]
            how += f": {parts['computed']} of {parts['of']} {parts['key']}, {computed} of {total} {parts['table']}"
        left = [f"{dropped} dropped"] if dropped or not not_covered else []
        left += [f"{not_covered} not covered"] if not_covered else []
        return f"{self.folder:<16} {counts.get('in', '?')} in → {counts.get('out', '?')} out, {', '.join(left)} ({how})"


def code_version() -> dict[str, Any]:
    """The git commit (and whether the tree is dirty) plus a hash of the code's own source files."""
    digest = hashlib.sha256()
    for source in sorted([*REPO_ROOT.glob("pbbq/*.py"), *REPO_ROOT.glob("tasks/*.py"), *REPO_ROOT.glob("flows/*.py")]):
        digest.update(source.relative_to(REPO_ROOT).as_posix().encode())
        digest.update(source.read_bytes())
    version: dict[str, Any] = {"source_sha256": digest.hexdigest(), "git_commit": None, "git_dirty": None}
    if not (REPO_ROOT / ".git").exists():
        return version  # not a git checkout: the source hash alone identifies the code
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "pbbq", "tasks", "flows", "prompts"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        version.update(git_commit=commit, git_dirty=bool(status.strip()))
    except (OSError, subprocess.CalledProcessError) as exc:
        version["git_error"] = str(exc)  # git missing or failing: the source hash still identifies the code
    return version


def display_path(path: Path) -> str:
    """A path as the manifest shows it: relative to the repository when inside it, so that a published
    manifest does not carry the builder's home folder."""
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def new_run_id() -> str:
    """A sortable, unique run id: UTC time of the start and a short random suffix."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def run_status(manifest: Mapping[str, Any]) -> str:
    """A run's status as an audit reads it: the manifest's, except that a ``running`` run whose process is gone
    from this machine is ``incomplete`` (killed, or its machine went down)."""
    status = manifest.get("status", "incomplete")
    process = manifest.get("process") or {}
    if status != "running" or process.get("host") != socket.gethostname():
        return status
    try:
        os.kill(int(process["pid"]), 0)
    except ProcessLookupError:
        return "incomplete"
    except PermissionError:
        return status  # alive, another user's
    return status


class RunExistsError(FileExistsError):
    """The run folder exists already; a run never writes into another run's folder."""


def refuse_kept_run(path: Path, id_option: str = "--run-id") -> None:
    """Raise :class:`RunExistsError` when ``path`` holds a run that is not built again (completed or running: not
    :data:`REPLACEABLE`); ``id_option``: the option that names the run. ``pbbq build`` asks before it starts its flow,
    so that the refusal is one line."""
    if path.exists() and (status := _status_of(path)) not in REPLACEABLE:
        raise RunExistsError(f"run folder {path} exists already ({status}); choose another {id_option}")


REPLACEABLE = ("incomplete", "failed")
"""Statuses of a run whose id a new build may take: its folder is replaced (its finished stages come back from
the result cache)."""
KILL_HOOK = "PBBQ_TEST_KILL_IN"
"""Fault injection for tests/test_killed_runs.py: a build whose environment names a stage folder here is killed
(SIGKILL) half-way through writing that stage, after its first file."""


def _kill_hook(folder: str) -> None:
    """Die here (SIGKILL) if the environment's :data:`KILL_HOOK` names ``folder``: a file of it is written."""
    if os.environ.get(KILL_HOOK) == folder:
        os.kill(os.getpid(), signal.SIGKILL)


def listed_files(manifest: Mapping[str, Any]) -> set[str]:
    """Every file a manifest lists, by path in its run: the stages' artifacts, the run-level files, itself."""
    stages = [artifact["path"] for stage in manifest.get("stages", []) for artifact in stage.get("artifacts", [])]
    return {"manifest.json", *stages, *(file["path"] for file in manifest.get("files", []))}


def discard_unlisted(run: Path, listed: set[str]) -> None:
    """Remove from a run that ended before it finished everything its manifest does not list (``listed``): the
    files of the stage it was writing, the atomic writer's temporary files (``.*.tmp``), publish's staging folder
    (``.hub-*``); then the folders left empty. A link goes, never what it points to."""
    for folder, folders, files in os.walk(run, topdown=False):  # never into a linked folder
        here = Path(folder)
        for name in [*files, *(f for f in folders if (here / f).is_symlink())]:
            if (here / name).relative_to(run).as_posix() not in listed:
                (here / name).unlink(missing_ok=True)
        if here != run and not any(here.iterdir()):
            here.rmdir()


def mark_incomplete(run: Path) -> bool:
    """If ``run`` reads ``incomplete`` (``running`` in its manifest, its process gone), say so in its manifest
    and remove what it does not list (:func:`discard_unlisted`); True when it did."""
    path = run / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if manifest.get("status") != "running" or run_status(manifest) != "incomplete":
        return False
    discard_unlisted(run, listed_files(manifest))
    manifest.update(status="incomplete", error="the build's process ended before the run finished (killed?)")
    write_json(path, manifest)
    return True


RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
"""A run id is one safe path component: letters, digits, ``-``, ``_``, ``.``; no leading dot."""


def check_run_id(run_id: str) -> str:
    """``run_id`` if it names one folder inside the outputs folder, else a ValueError saying why."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(
            f"run id {run_id!r} is not one safe folder name (letters, digits, '-', '_', '.', no leading dot, "
            "at most 128 characters)"
        )
    return run_id


def _status_of(run: Path) -> str:
    """The status of an existing folder: its manifest's as an audit reads it, ``incomplete`` for a folder with no
    manifest that holds nothing else, ``unknown`` for anything else."""
    try:
        return run_status(json.loads((run / "manifest.json").read_text(encoding="utf-8")))
    except FileNotFoundError:
        return "incomplete" if not any(run.iterdir()) else "unknown"
    except (OSError, ValueError):
        return "unknown"


def _stage_report(report: Mapping[str, Any], cached: bool, inputs: Mapping[str, str]) -> dict[str, Any]:
    """A stage's ``report.json``: its report, whether it was taken from the cache, the hashes of its inputs."""
    return {**report, "cached": cached, "inputs": dict(inputs)}


@dataclass
class RunFolder:
    """One run's folder, and the manifest it accumulates as stages finish."""

    path: Path
    run_id: str
    parameters: dict[str, Any]
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    stages: list[StageRecord] = field(default_factory=list)
    files: list[Artifact] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What a person should look at before trusting the run: inputs that read like instructions, and a stage that
    kept nothing (``NN_stage kept nothing: …``)."""
    process: dict[str, str] = field(default_factory=dict)
    """Who runs it besides the pid and host (the Prefect flow run id), kept in the manifest while it runs."""

    @classmethod
    def create(
        cls,
        outputs: Path,
        run_id: str | None,
        parameters: Mapping[str, Any],
        process: Mapping[str, str] | None = None,
        id_option: str = "--run-id",
    ) -> RunFolder:
        """Make the run's folder and write its manifest with status ``running`` (and who runs it), so that a
        run whose process dies reads ``incomplete``, never as no run at all; ``id_option``: the option that names
        the run, for the error of a folder that exists."""
        run_id = check_run_id(run_id) if run_id is not None else new_run_id()
        path = outputs / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            refuse_kept_run(path, id_option)
            shutil.rmtree(path)  # an incomplete or failed run of this id: built again from scratch
            path.mkdir()
        run = cls(path=path, run_id=run_id, parameters=dict(parameters), process=dict(process or {}))
        run.write_manifest("running")
        return run

    def record_input(self, name: str, path: Path, rows: int | None, sha256: str | None = None) -> str:
        """Note an input file of the run with its hash (``sha256`` when known already, else it is read); returns
        the hash."""
        digest = sha256 or sha256_file(path)
        self.inputs[name] = {"path": display_path(path), "sha256": digest, "rows": rows}
        return digest

    def record_file(self, path: Path, rows: int | None = None, sha256: str | None = None) -> Artifact:
        """Note a run-level file (outside the stage folders, e.g. the LLM transcript) in the manifest; ``sha256``:
        its hash when known already (a file placed from the artifact store), else it is read."""
        artifact = Artifact(path.relative_to(self.path).as_posix(), sha256 or sha256_file(path), rows)
        self.files.append(artifact)
        return artifact

    def record_tree(self, folder: Path, known: Mapping[str, str] | None = None) -> list[Artifact]:
        """Note every file under ``folder`` (written by a stage outside its tables, e.g. a release folder);
        ``known``: the hashes the stage had already, by path under ``folder`` (files it placed by reference), so
        those files are not read again."""
        known = known or {}
        return [
            self.record_file(path, sha256=known.get(path.relative_to(folder).as_posix()))
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        ]

    def sha256_of(self, path: Path) -> str:
        """The hash of a file: the one this run recorded for it (a run-level file, e.g. its transcript, whose
        hash the run took from the artifact store), else read."""
        where = path.relative_to(self.path).as_posix() if path.is_relative_to(self.path) else None
        return next((file.sha256 for file in reversed(self.files) if file.path == where), None) or sha256_file(path)

    def write_stage(
        self,
        folder: str,
        output: StageOutput,
        *,
        inputs: Mapping[str, str],
        cached: bool,
        declared: Mapping[str, Any] | None = None,
    ) -> StageRecord:
        """Write a stage's tables and report under ``<run>/<folder>/`` and add it to the manifest, with what its
        declaration tells an audit (``declared``: its drop tables and its words, :meth:`Stage.audit_view`)."""
        stage_dir = self.path / folder
        artifacts = []
        for file in stage_files(output):
            data = file.data()
            atomic_write_bytes(stage_dir / file.name, data)
            artifacts.append(Artifact(f"{folder}/{file.name}", sha256_bytes(data), file.rows))
            _kill_hook(folder)
        report = _stage_report(output.report, cached, inputs)
        digest = write_json(stage_dir / "report.json", report)
        return self._record_stage(
            folder, [*artifacts, Artifact(f"{folder}/report.json", digest, None)], report, declared
        )

    def link_stage(
        self,
        folder: str,
        files: Sequence[StoredFile],
        store: ArtifactStore,
        report: Mapping[str, Any],
        *,
        report_key: str,
        inputs: Mapping[str, str],
        cached: bool,
        declared: Mapping[str, Any] | None = None,
    ) -> StageRecord:
        """:meth:`write_stage` for a stage whose files are in ``store`` already (a cached stage, or one this run
        computed): each file placed by reference, its hash and rows from ``files``, never read or written again;
        its ``report.json`` too, made once per ``report_key`` (what determines ``report``), whether it was cached
        and its inputs."""
        artifacts = []
        for file in files:
            store.place(file.sha256, self.path / folder / file.name)
            artifacts.append(Artifact(f"{folder}/{file.name}", file.sha256, file.rows))
            _kill_hook(folder)
        full = _stage_report(report, cached, inputs)
        digest = store.memo(json_text([report_key, cached, dict(inputs)]), lambda: json_text(full).encode("utf-8"))
        store.place(digest, self.path / folder / "report.json")
        return self._record_stage(folder, [*artifacts, Artifact(f"{folder}/report.json", digest, None)], full, declared)

    def _record_stage(
        self, folder: str, artifacts: list[Artifact], report: dict[str, Any], declared: Mapping[str, Any] | None
    ) -> StageRecord:
        """Add the stage to the manifest (its ``report`` as :func:`_stage_report` made it)."""
        cached, inputs = report["cached"], report["inputs"]
        record = StageRecord(folder.split("_", 1)[-1], folder, cached, inputs, artifacts, report, dict(declared or {}))
        self.stages.append(record)
        return record

    def artifact_hash(self, folder: str, name: str) -> str:
        """The sha256 of a table another stage wrote in this run (the input hash of a later stage)."""
        wanted = f"{folder}/{name}.parquet"
        for record in self.stages:
            for artifact in record.artifacts:
                if artifact.path == wanted:
                    return artifact.sha256
        raise KeyError(wanted)

    def write_manifest(self, status: str, error: str | None = None, target: Path | None = None) -> Path:
        """Write the manifest with ``status`` to ``<run>/manifest.json``, or to ``target`` (the copy a release
        carries, so that the run's own manifest stays ``running`` while it publishes)."""
        manifest = {
            "run_id": self.run_id,
            "status": status,
            "error": error,
            **(
                {"process": {"pid": os.getpid(), "host": socket.gethostname(), **self.process}}
                if status == "running"
                else {}
            ),
            "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "code_version": code_version(),
            "parameters": self.parameters,
            "inputs": self.inputs,
            "warnings": self.warnings,
            "files": [artifact.__dict__ for artifact in self.files],
            "stages": [
                {
                    "stage": record.stage,
                    "folder": record.folder,
                    "cached": record.cached,
                    "inputs": record.inputs,
                    "artifacts": [artifact.__dict__ for artifact in record.artifacts],
                    **record.declared,
                }
                for record in self.stages
            ],
        }
        target = target or self.path / "manifest.json"
        write_json(target, manifest)
        return target

    @contextmanager
    def recording(self, stops: tuple[type[BaseException], ...] = (KeyboardInterrupt,)) -> Iterator[RunFolder]:
        """Write the manifest when the run ends: ``completed``; ``incomplete`` when it was stopped from outside
        (``stops``: SIGINT, and SIGTERM as the flow receives it; :meth:`stop`); or ``failed`` with the error,
        keeping every stage that finished before the failure, its traceback in ``error.log`` unless that cannot be
        written either (a full disk): the manifest says ``failed`` all the same."""
        try:
            yield self
        except stops as exc:
            number = getattr(exc, "signal", signal.SIGINT)  # Prefect's TerminationSignal carries its signal
            self.stop(f"cancelled by {signal.Signals(number).name} before it finished")
            raise
        except BaseException as exc:
            log = self.path / "error.log"
            try:
                atomic_write_bytes(log, "".join(traceback.format_exception(exc)).encode("utf-8"))
                kept = True
            except OSError:  # a full disk, likely the failure itself: no traceback kept, the manifest says failed
                kept = False
            if kept:
                self.record_file(log)
                exc.add_note(f"traceback: {log}")
            self.write_manifest("failed", error=f"{type(exc).__name__}: {exc}")
            raise
        self.write_manifest("completed")

    def stop(self, reason: str) -> None:
        """End the run ``incomplete`` with ``reason``: its manifest lists the stages written so far, and what it
        does not list (the stage being written, temporary files) is removed (:func:`discard_unlisted`)."""
        manifest = self.write_manifest("incomplete", error=reason)
        discard_unlisted(self.path, listed_files(json.loads(manifest.read_text(encoding="utf-8"))))
