"""What a stage writes and how (docs/architecture.md §5): its output (tables, schemas, report), each table as
parquet (and a CSV for people, safe to open in a spreadsheet), every file written to a temporary name in its
folder and renamed, so a killed run never leaves a half-written file, its sha256, and the content store that
keeps a stage's files once by hash for every run that takes a checked copy of them. The run folder and its manifest
are :mod:`pbbq.tasks.core.run_folder`.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import pickle
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .schemas import to_arrow

PICKLE = pickle.HIGHEST_PROTOCOL
"""The pickle protocol of the frames the content store keeps."""
REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository this code runs from; the bundled sample and the prompts live here."""


@dataclass
class StageOutput:
    """What a stage returns: its tables (each with its schema) and its report.

    ``report`` holds counts in and out, drops per reason, every dropped id with its reason and the
    parameters; the run folder adds the file hashes and whether the stage was recomputed.
    """

    tables: Mapping[str, pd.DataFrame]
    """By name; a cached stage's are loaded only when read (:class:`~.stored.LazyTables`)."""
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


TEMPORARY = re.compile(r"\.(?:.*\.)?(?P<pid>\d+)-[a-z0-9_]{8}\.tmp(?:\..*)?", re.DOTALL)
"""The names of this program's temporary files (:func:`temporary_name`, :func:`atomic_write_bytes`): the pid of
the process writing them in each, so a leftover of a killed process is told from a file a live one writes."""


LEGACY_TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp", re.DOTALL)
"""The names versions up to a5452f8 gave their temporary files (``.name.<random>.tmp``: ``mkstemp``'s or eight hex
digits, no pid), which a killed build of those versions left behind; never a name of :data:`TEMPORARY`."""
PROCESS_STARTED = time.time()
"""When this process loaded the program: a file of :data:`LEGACY_TEMPORARY`'s names last written before then is
no live writer's (those versions wrote their temporary file in one go and renamed it at once)."""


def temporary_name(name: str, suffix: str = "") -> str:
    """A temporary file's name for ``name`` (``.name.<pid>-<random>.tmp``, then ``suffix``, which a writer that
    goes by the suffix needs: ``.gz``)."""
    return f".{name + '.' if name else ''}{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp{suffix}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def _left_over(entry: os.DirEntry[str]) -> bool:
    """Whether ``entry`` is a temporary file no live writer owns: a name of :data:`TEMPORARY` whose process is
    gone from this machine, or one of :data:`LEGACY_TEMPORARY` last written before this process started."""
    if not entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
        return False
    found = TEMPORARY.fullmatch(entry.name)
    if found:
        return not _alive(int(found["pid"]))
    return bool(LEGACY_TEMPORARY.fullmatch(entry.name)) and entry.stat(follow_symlinks=False).st_mtime < PROCESS_STARTED


def remove_leftovers(folder: Path) -> list[Path]:
    """Remove the temporary files a killed process of this program, of this version or an earlier one, left
    directly in ``folder`` (a SIGKILL skips every cleanup), never one a live build writes (:func:`_left_over`).
    Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if _left_over(entry):
            Path(entry.path).unlink(missing_ok=True)
            removed.append(Path(entry.path))
    return removed


def atomic_write_bytes(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and an atomic rename; ``sync``: on
    disk before the rename (off only for a file whose loss in a crash costs nothing but time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
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


class DamagedStoreFile(ValueError):
    """A file of the content store is not what its name (its sha256) says: truncated, edited or replaced. It is
    removed from the store when found, so the build that needs it computes it again."""


_FICLONE = 0x40049409
"""Linux's ioctl that makes a file share another's blocks (a reflink: btrfs, XFS; ext4 has none)."""

COPY_BLOCK = 1 << 18
"""Bytes a checked copy reads at a time."""
_HASHED: dict[Path, tuple[int, int, int, int]] = {}
"""Store files this process hashed and found right, by path: their inode, size, mtime and ctime then. Any write to
a file changes its ctime (which no call can set back), so a file whose four are unchanged is the file hashed."""
_HASHED_LOCK = threading.Lock()


def _signature(status: os.stat_result) -> tuple[int, int, int, int]:
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


RACY_NS = 1_000_000_000
"""A file changed less than this long before it was hashed is hashed again when next read: a write within the
file system's timestamp tick after the hash would leave its ctime as it was (git's "racy clean" files)."""


def _hashed(path: Path, signature: tuple[int, int, int, int]) -> None:
    """Note that ``path``, as ``signature`` describes it, was hashed and found right (:data:`_HASHED`)."""
    if time.time_ns() - signature[3] > RACY_NS:
        with _HASHED_LOCK:
            _HASHED[path] = signature


def _copy_hashed(source: BinaryIO, target: BinaryIO) -> str:
    """Copy ``source`` into ``target`` and return the sha256 of what was copied (one read of the file, through one
    buffer of :data:`COPY_BLOCK` bytes)."""
    digest = hashlib.sha256()
    buffer = bytearray(COPY_BLOCK)
    view = memoryview(buffer)
    while count := source.readinto(buffer):  # type: ignore[attr-defined]
        digest.update(view[:count])
        target.write(view[:count])
    return digest.hexdigest()


def _kernel_copy(source: BinaryIO, target: BinaryIO) -> None:
    """Copy ``source`` into ``target`` inside the kernel (``copy_file_range``), or through memory where it cannot."""
    try:
        while os.copy_file_range(source.fileno(), target.fileno(), 1 << 30):
            pass
    except OSError:
        source.seek(0)
        target.seek(0)
        target.truncate()
        shutil.copyfileobj(source, target, 1 << 20)


def _reflink(source: BinaryIO, target: BinaryIO) -> bool:
    """Make ``target`` share ``source``'s blocks where the file system can (no data copied); False where not."""
    try:
        fcntl.ioctl(target.fileno(), _FICLONE, source.fileno())
    except OSError:
        return False
    return True


class _HashingWriter:
    """A binary file that hashes what is written to it (:meth:`ArtifactStore.put_pickled`)."""

    def __init__(self, target: BinaryIO) -> None:
        self.target, self.digest, self.size = target, hashlib.sha256(), 0

    def write(self, data: bytes | memoryview) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self.size += len(view)
        return self.target.write(view)


class _HashingReader:
    """A binary file that hashes what is read from it (:meth:`ArtifactStore.load_pickled`)."""

    def __init__(self, source: BinaryIO) -> None:
        self.source, self.digest = source, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        if size < 0:  # the rest, a block at a time
            rest = iter(lambda: self.source.read(COPY_BLOCK), b"")
            return b"".join(self._hashed(block) for block in rest)
        return self._hashed(self.source.read(size))

    def readinto(self, buffer: bytearray | memoryview) -> int:
        count = self.source.readinto(buffer)  # type: ignore[attr-defined]
        self.digest.update(memoryview(buffer)[:count])
        return int(count)

    def readline(self) -> bytes:
        return self._hashed(self.source.readline())

    def _hashed(self, data: bytes) -> bytes:
        self.digest.update(data)
        return data


@dataclass(frozen=True)
class ArtifactStore:
    """A content-addressed folder (docs/architecture.md §5): each file named by its sha256 and written once. The
    stage cache keeps a stage's files here, and a run takes a copy of them (a reflink where the file system has
    them), never a hard link: a run folder or a release is a place a user edits, and an edit there must not change
    what later builds take from the store. Whatever is taken from the store is checked against its name first
    (:meth:`check`, :meth:`read`, :meth:`place`); a file that fails is removed, so that it is made again."""

    path: Path

    def file(self, sha256: str) -> Path:
        return self.path / sha256

    def has(self, sha256: str) -> bool:
        return self.file(sha256).is_file()

    def put(self, data: bytes) -> str:
        """Keep ``data`` (once; again over a kept file of another size, a damaged one); returns its sha256."""
        digest = sha256_bytes(data)
        path = self.file(digest)
        try:
            kept = path.stat().st_size == len(data)
        except FileNotFoundError:
            kept = False
        if not kept:
            atomic_write_bytes(path, data)
        return digest

    def put_pickled(self, value: Any) -> tuple[str, int]:
        """Keep ``value`` pickled (protocol :data:`PICKLE`), pickled straight into a temporary file of the store and
        hashed as it is written, never held as bytes (a stage's frames pickle to hundreds of MB); returns its sha256
        and size, as :meth:`put` of its pickle would."""
        scratch = self.path / temporary_name("")
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            with scratch.open("xb") as handle:
                os.fchmod(handle.fileno(), FILE_MODE)
                writer = _HashingWriter(handle)
                pickle.dump(value, writer, PICKLE)
                handle.flush()
                os.fsync(handle.fileno())
            digest, size = writer.digest.hexdigest(), writer.size
            path = self.file(digest)
            try:
                kept = path.stat().st_size == size
            except FileNotFoundError:
                kept = False
            if not kept:
                os.replace(scratch, path)
        except BaseException as error:
            if isinstance(error, OSError) and error.filename is None:
                error.filename = str(scratch)  # write() and fsync() name no file (a full disk): the one written
            raise
        finally:
            scratch.unlink(missing_ok=True)
        return digest, size

    def load_pickled(self, sha256: str) -> Any:
        """The value the stored file ``sha256`` pickles (:meth:`put_pickled`), unpickled as the file is read and
        hashed (never all its bytes in memory); :class:`DamagedStoreFile` when they are not what its name says (the
        file is removed, as :meth:`read` does)."""
        path = self.file(sha256)
        failure: Exception | None = None
        with path.open("rb") as handle:
            signature = _signature(os.fstat(handle.fileno()))
            reader = _HashingReader(handle)
            try:
                value = pickle.load(reader)
            except Exception as error:  # bytes that do not unpickle: damaged, unless they hash right
                failure = error
            with _HASHED_LOCK:
                known = _HASHED.get(path) == signature
            if not known or failure is not None:
                reader.read()  # the rest of the file, into the hash
                if reader.digest.hexdigest() != sha256:
                    self._damaged(sha256)
        if failure is not None:
            raise failure
        _hashed(path, signature)
        return value

    def check(self, sha256: str, size: int | None = None, *, read: bool = True) -> str | None:
        """Why the stored file ``sha256`` cannot be reused (missing, or its size or its sha256 is not what it
        should be; a damaged file is removed), or None when it can. ``size`` (when known) is checked without
        reading; with ``read``, the file is hashed, once per process and version of it (:data:`_HASHED`)."""
        path = self.file(sha256)
        try:
            status = path.stat()
        except FileNotFoundError:
            return f"{path} is missing"
        if size is not None and status.st_size != size:
            return self.discard(sha256, f"{path} has {status.st_size} bytes, not the {size} it was kept with")
        if not read:
            return None
        with _HASHED_LOCK:
            if _HASHED.get(path) == _signature(status):
                return None
        found = sha256_file(path)
        if found != sha256:
            return self.discard(sha256, f"{path} does not have the sha256 it is named by ({found})")
        _hashed(path, _signature(status))
        return None

    def remove_leftovers(self) -> list[Path]:
        """Remove the temporary files killed builds left in the store (:func:`remove_leftovers`)."""
        return remove_leftovers(self.path) + remove_leftovers(self.path / "memo")

    def discard(self, sha256: str, problem: str) -> str:
        """Remove the damaged stored file ``sha256``; returns ``problem``, what was wrong with it."""
        self.file(sha256).unlink(missing_ok=True)
        return problem

    def read(self, sha256: str) -> bytes:
        """The stored file ``sha256``'s bytes, checked against its name unless this process hashed that very file
        already (:meth:`check`); :class:`DamagedStoreFile` if they differ (the file is removed, so the next build
        makes it again)."""
        path = self.file(sha256)
        with path.open("rb") as handle:
            signature = _signature(os.fstat(handle.fileno()))
            data = handle.read()
        with _HASHED_LOCK:
            known = _HASHED.get(path) == signature
        if not known and sha256_bytes(data) != sha256:
            self._damaged(sha256)
        _hashed(path, signature)
        return data

    def _damaged(self, sha256: str) -> NoReturn:
        problem = self.discard(
            sha256, f"content store file {self.file(sha256)} does not have the sha256 it is named by"
        )
        raise DamagedStoreFile(f"{problem}; it was removed: build again to compute it anew")

    def _note(self, key: str) -> Path:
        return self.path / "memo" / sha256_bytes(key.encode("utf-8"))

    def recall(self, key: str) -> str | None:
        """The sha256 of the file kept under ``key`` (:meth:`remember`), or None when there is none (or the file
        was removed from the store, or is damaged: :meth:`check`)."""
        note = self._note(key)
        known = note.read_text(encoding="ascii") if note.is_file() else ""
        return known if known and self.check(known) is None else None

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
        scratch = self.path / temporary_name("", "".join(Path(name).suffixes))
        try:
            digest = write(scratch)
            os.chmod(scratch, FILE_MODE)
            os.replace(scratch, self.file(digest))
        finally:
            scratch.unlink(missing_ok=True)
        return self.remember(key, digest)

    def place(self, sha256: str, target: Path) -> None:
        """Put a copy of the stored file ``sha256`` at ``target`` as one atomic rename: a reflink where the file
        system has them, else a copy, checked against its name as it is copied (unless this process hashed that
        very file already, :meth:`check`): :class:`DamagedStoreFile` if it differs. The copy is not synced to
        disk: a copy a power cut loses is what ``pbbq verify`` reports, and the store keeps the file."""
        source_path = self.file(sha256)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(temporary_name(target.name))
        try:
            with source_path.open("rb") as source, temporary.open("xb") as copy:
                os.fchmod(copy.fileno(), FILE_MODE)
                signature = _signature(os.fstat(source.fileno()))
                with _HASHED_LOCK:
                    known = _HASHED.get(source_path) == signature
                if _reflink(source, copy):
                    found = sha256 if known else sha256_file(temporary)
                elif known:
                    _kernel_copy(source, copy)
                    found = sha256
                else:
                    found = _copy_hashed(source, copy)
            if found != sha256:
                problem = self.discard(
                    sha256, f"content store file {source_path} does not have the sha256 it is named by"
                )
                raise DamagedStoreFile(f"{problem}; it was removed: build again to compute it anew")
            _hashed(source_path, signature)
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
