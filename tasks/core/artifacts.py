"""The run folder and what goes in it (docs/architecture.md §5).

A run writes ``outputs/<run_id>/``, one folder per stage (``02_survey/`` ...), each with its tables as parquet
and a ``report.json``, and a ``manifest.json`` that lists every artifact with its sha256 and row count, the
inputs' hashes, the parameters and the code version. Every file is written to a temporary name in the same
folder and renamed, so a killed run never leaves a half-written file, and a run never writes outside its own
folder, so a failed run leaves earlier runs untouched.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .schemas import to_arrow

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository this code runs from; the bundled sample and the prompts live here."""


@dataclass
class StageOutput:
    """What a stage returns: its tables (each with its schema) and its report.

    ``report`` holds counts in and out, drops per reason, every dropped id with its reason and the
    parameters; the run folder adds the file hashes and whether the stage was recomputed.
    """

    tables: Mapping[str, pd.DataFrame]
    """By name; a cached stage's are loaded only when read (:class:`~.caching.LazyTables`)."""
    schemas: dict[str, pa.Schema]
    report: dict[str, Any]
    csv: tuple[str, ...] = ()
    """Tables also written as CSV, for people to open in a spreadsheet (a review sheet)."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Other files of the stage's folder by name (a Markdown table, a chart)."""

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables[name]


def count_reasons(reasons: pd.Series) -> dict[str, int]:
    """Drops per reason, sorted by reason so the report is stable."""
    return {str(k): int(v) for k, v in sorted(reasons.value_counts().items())}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()
"""The mode of every file a run writes: what ``open()`` would give under the user's umask (0644 by default),
not ``mkstemp``'s private 0600, so another user or a web server can read a published folder."""


def atomic_write_bytes(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and an atomic rename; ``sync``: on
    disk before the rename (off only for a file whose loss in a crash costs nothing but time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, FILE_MODE)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            if sync:
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""Cell beginnings a spreadsheet may run as a formula (OWASP, CSV injection)."""


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A table for a CSV people open in a spreadsheet: every text cell that starts like a formula is prefixed
    with ``'`` (OWASP's rule), so it shows as text; :func:`from_spreadsheet` undoes it."""
    safe = frame.copy()
    for column in safe.columns:
        if pd.api.types.is_object_dtype(safe[column]) or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = safe[column].map(
                lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v
            )
    return safe


def from_spreadsheet(value: str) -> str:
    """A cell as :func:`spreadsheet_safe` wrote it, back as it was."""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_START) else value


def parquet_bytes(table: pa.Table) -> bytes:
    """Parquet of ``table``, deterministic for the same table and library versions. A table with no rows has no
    row group (pyarrow would write one of 0 rows, whose size ``datasets`` takes as its batch size and fails)."""
    buffer = io.BytesIO()
    if table.num_rows:
        pq.write_table(table, buffer, compression="zstd")
    else:
        pq.ParquetWriter(buffer, table.schema, compression="zstd").close()
    return buffer.getvalue()


def json_text(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True, default=str) + "\n"


def write_json(path: Path, payload: Any) -> str:
    data = json_text(payload).encode("utf-8")
    atomic_write_bytes(path, data)
    return sha256_bytes(data)


@dataclass(frozen=True)
class StageFile:
    """One file of a stage's folder as :func:`stage_files` lists it: its name, how to make its bytes, its rows."""

    name: str
    data: Callable[[], bytes]
    rows: int | None


def stage_files(output: StageOutput) -> Iterator[StageFile]:
    """The files of a stage's folder but its report, in the manifest's order: each table's parquet (checked against
    its schema) and, for a table people open, its CSV; then the stage's other files by name."""
    for name, frame in output.tables.items():
        schema = output.schemas[name]
        yield StageFile(f"{name}.parquet", partial(_parquet_of, frame, schema, name), len(frame))
        if name in output.csv:
            yield StageFile(f"{name}.csv", partial(_csv_of, frame), len(frame))
    for name, data in sorted(output.files.items()):
        yield StageFile(name, partial(bytes, data), None)


def _parquet_of(frame: pd.DataFrame, schema: pa.Schema, name: str) -> bytes:
    return parquet_bytes(to_arrow(frame, schema, name))


def _csv_of(frame: pd.DataFrame) -> bytes:
    return spreadsheet_safe(frame).to_csv(index=False).encode("utf-8")


@dataclass(frozen=True)
class StoredFile:
    """A file of a stage's folder kept in an :class:`ArtifactStore`: its name in the folder, its sha256 (its name in
    the store) and its rows (None for a file that is no table)."""

    name: str
    sha256: str
    rows: int | None


@dataclass(frozen=True)
class ArtifactStore:
    """A content-addressed folder (docs/architecture.md §5): each file named by its sha256 and written once. The
    stage cache keeps a stage's files here, and a run takes them by reference (a hard link, or a copy where a link
    cannot be made), so a rebuild neither reads nor writes a cached stage's tables again."""

    path: Path

    def file(self, sha256: str) -> Path:
        return self.path / sha256

    def has(self, sha256: str) -> bool:
        return self.file(sha256).is_file()

    def put(self, data: bytes) -> str:
        """Keep ``data`` (once); returns its sha256."""
        digest = sha256_bytes(data)
        if not self.has(digest):
            atomic_write_bytes(self.file(digest), data)
        return digest

    def _note(self, key: str) -> Path:
        return self.path / "memo" / sha256_bytes(key.encode("utf-8"))

    def recall(self, key: str) -> str | None:
        """The sha256 of the file kept under ``key`` (:meth:`remember`), or None when there is none (or the file
        was removed from the store)."""
        note = self._note(key)
        known = note.read_text(encoding="ascii") if note.is_file() else ""
        return known if known and self.has(known) else None

    def remember(self, key: str, digest: str) -> str:
        """Note that ``key``, a key that determines the content of the stored file ``digest``, names it; returns
        ``digest``. The note is not synced to disk: one a crash loses or leaves empty only means making the file
        again, and :meth:`recall` checks the file it names."""
        atomic_write_bytes(self._note(key), digest.encode("ascii"), sync=False)
        return digest

    def memo(self, key: str, make: Callable[[], bytes]) -> str:
        """The sha256 of the file ``make()`` gives, made and kept the first time ``key`` is asked for: a file whose
        content ``key`` determines but which costs to make (a large report's JSON)."""
        return self.recall(key) or self.remember(key, self.put(make()))

    def memo_written(self, key: str, name: str, write: Callable[[Path], str]) -> str:
        """:meth:`memo` of a file too large to hold in memory: ``write(path)`` writes it at ``path`` (a scratch path
        in the store ending in ``name``) and returns its sha256; the file is then renamed to that name."""
        known = self.recall(key)
        if known:
            return known
        scratch = self.path / f".{uuid.uuid4().hex[:8]}.{name}"
        try:
            digest = write(scratch)
            os.chmod(scratch, FILE_MODE)
            os.replace(scratch, self.file(digest))
        finally:
            scratch.unlink(missing_ok=True)
        return self.remember(key, digest)

    def place(self, sha256: str, target: Path) -> None:
        """Put the stored file ``sha256`` at ``target`` as one atomic rename: a hard link to it, or a copy on
        another file system (or one that has no hard links)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            try:
                os.link(self.file(sha256), temporary)
            except OSError:
                shutil.copyfile(self.file(sha256), temporary)
                os.chmod(temporary, FILE_MODE)
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


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


REPLACEABLE = ("incomplete", "failed")
"""Statuses of a run whose id a new build may take: its folder is replaced (its finished stages come back from
the result cache)."""
LEFTOVERS = (".*.tmp", ".hub-*")
"""What a killed process leaves in a run: the atomic writer's temporary files, publish's staging folder."""
KILL_HOOK = "PBBQ_TEST_KILL_IN"
"""Fault injection for tests/test_killed_runs.py: a build whose environment names a stage folder here is killed
(SIGKILL) half-way through writing that stage, after its first file."""


def _kill_hook(folder: str) -> None:
    """Die here (SIGKILL) if the environment's :data:`KILL_HOOK` names ``folder``: a file of it is written."""
    if os.environ.get(KILL_HOOK) == folder:
        os.kill(os.getpid(), signal.SIGKILL)


def leftovers(run: Path) -> list[Path]:
    """Temporary files and folders a killed process left in ``run``."""
    return sorted({path for pattern in LEFTOVERS for path in run.rglob(pattern)})


def mark_incomplete(run: Path) -> bool:
    """If ``run`` reads ``incomplete`` (``running`` in its manifest, its process gone), say so in its manifest
    and remove its leftovers; True when it did."""
    path = run / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if manifest.get("status") != "running" or run_status(manifest) != "incomplete":
        return False
    for leftover in leftovers(run):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)
        else:  # a file, or a link (to a folder too): the link goes, never what it points to
            leftover.unlink(missing_ok=True)
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
        cls, outputs: Path, run_id: str | None, parameters: Mapping[str, Any], process: Mapping[str, str] | None = None
    ) -> RunFolder:
        """Make the run's folder and write its manifest with status ``running`` (and who runs it), so that a
        run whose process dies reads ``incomplete``, never as no run at all."""
        run_id = check_run_id(run_id) if run_id is not None else new_run_id()
        path = outputs / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            status = _status_of(path)
            if status not in REPLACEABLE:
                raise RunExistsError(f"run folder {path} exists already ({status}); choose another --run-id") from None
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
    def recording(self) -> Iterator[RunFolder]:
        """Write the manifest when the run ends: ``completed``, or ``failed`` with the error, keeping every
        stage that finished before the failure."""
        try:
            yield self
        except BaseException as exc:
            log = self.path / "error.log"
            atomic_write_bytes(log, "".join(traceback.format_exception(exc)).encode("utf-8"))
            self.record_file(log)
            exc.add_note(f"traceback: {log}")
            self.write_manifest("failed", error=f"{type(exc).__name__}: {exc}")
            raise
        self.write_manifest("completed")
