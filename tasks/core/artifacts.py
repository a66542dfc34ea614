"""What a stage writes and how (docs/architecture.md §5): its output (tables, schemas, report), each table as
parquet (and a CSV for people, safe to open in a spreadsheet), every file written to a temporary name in its
folder and renamed, so a killed run never leaves a half-written file, its sha256, and the content store that
keeps a stage's files once by hash for every run that takes them by reference. The run folder and its manifest
are :mod:`pbbq.tasks.core.run_folder`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
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
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename is None:
            error.filename = str(path)  # write() and fsync() name no file (a full disk): the one being written
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
