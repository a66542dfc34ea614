"""The response store: every answer kept under its request key and its source, and the JSONL transcripts it
imports and exports (docs/architecture.md §6).

The store keeps each answer under its source: the transcript it was imported from (by the file's sha256), the
model's own answers (``RECORDED``), or the stand-in (``STAND_IN``); a client reads only the sources its mode and
transcript allow (``LLMClient.sources``), so a build never takes an answer from a transcript it does not name. A
store exports to a JSONL transcript that can be opened read-only for replay, so a release rebuilds with no key.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import itertools
import json
import logging
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

from ..core.closing import Closing
from .config import LLMError, canonical_json, sha256_text

log = logging.getLogger(__name__)

RECORDED = "recorded"
"""The source of the answers a store got from the model itself (modes live, auto, batch)."""
STAND_IN = "stand-in"
"""The source of stand-in answers (mode ``stand-in``): never read by another mode."""
TRANSCRIPT_FORMAT = "pbbq"
TRANSCRIPT_VERSION = 1

_RECORD_FIELDS = ("key", "provider", "model", "request", "response", "tokens_in", "tokens_out", "created_at")
_PLACEHOLDERS = ", ".join("?" * (1 + len(_RECORD_FIELDS)))
_WRITE_BUFFER = 256 * 1024
"""Bytes of a transcript buffered before a write to the file (a line is two kilobytes at paper scale)."""


@dataclass(frozen=True)
class StoredResponse:
    """One row of the response store."""

    key: str
    provider: str
    model: str
    request: dict[str, Any]
    text: str
    tokens_in: int
    tokens_out: int
    created_at: str

    @cached_property
    def request_json(self) -> str:
        """The request as canonical JSON, as the store keeps it (its sha256 is the key): made once per record,
        though a transcript's loader checks the key with it and then stores it."""
        return canonical_json(self.request)


def read_transcript(path: Path, lines: int | None = None) -> str:
    """A transcript's text (its first ``lines`` lines only, if given), gzip-decoded for a ``.gz`` path (as
    ``export_jsonl`` writes it); a ``ValueError`` naming the file if it is missing, not gzip (a ``.gz`` path), or
    not UTF-8."""
    if not path.is_file():
        raise ValueError(f"{path}: transcript not found")
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as file:
            data = file.read() if lines is None else b"".join(itertools.islice(file, lines))
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError; a truncated stream, EOFError
        raise ValueError(f"{path}: not a readable {'gzip ' if path.suffix == '.gz' else ''}file ({err})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text") from None


def transcript_lines(path: Path) -> Iterator[tuple[int, str]]:
    """A transcript's lines with their numbers, read one at a time (a transcript of 400,000 answers is over half
    a gigabyte of JSON), gzip-decoded for a ``.gz`` path; the ``ValueError`` of :func:`read_transcript`."""
    if not path.is_file():
        raise ValueError(f"{path}: transcript not found")
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as file:
            for number, raw in enumerate(file, 1):
                try:
                    yield number, raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError:
                    raise ValueError(f"{path}:{number}: not UTF-8 text") from None
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path}: not a readable {'gzip ' if path.suffix == '.gz' else ''}file ({err})") from None


def transcript_source(path: str | Path) -> str:
    """The source a transcript's answers are stored under: the sha256 of the file's bytes (the hash the run's
    manifest records for its transcript); "" for a file that cannot be read (its loader then says why)."""
    try:
        with Path(path).open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return ""


class ResponseStore(Closing):
    """Recorded answers keyed by source and request key: a SQLite file, or a read-only JSONL transcript."""

    def __init__(self, path: str | Path, *, _transcript: bool = False) -> None:
        """Open (or create) the SQLite store at ``path``; use ``from_transcript`` for a JSONL file."""
        self.path = Path(path)
        self.read_only = _transcript
        self.header: dict[str, Any] | None = None
        self.transcript_sha256: str | None = None
        """A read-only transcript's source (:func:`transcript_source`)."""
        self._lock = threading.Lock()
        if _transcript:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False)
        try:
            self._create()
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise LLMError(
                f"{self.path}: not a response store ({err}); move the file away or set [llm] store_path to another"
            ) from None

    def _create(self) -> None:
        """The tables (and the move of a store written before answers had a source: its rows count as the model's
        own, ``RECORDED``, since imported and called answers cannot be told apart there)."""
        if not self.read_only:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        with self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (source TEXT NOT NULL, key TEXT NOT NULL, provider TEXT NOT NULL, "
                "model TEXT NOT NULL, request TEXT NOT NULL, response TEXT NOT NULL, tokens_in INTEGER NOT NULL, "
                "tokens_out INTEGER NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (source, key))"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS transcripts (sha256 TEXT PRIMARY KEY, records INTEGER NOT NULL)"
            )
            tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "responses" in tables:
                self._db.execute(
                    f"INSERT OR IGNORE INTO answers SELECT ?, {', '.join(_RECORD_FIELDS)} FROM responses", (RECORDED,)
                )
                self._db.execute("DROP TABLE responses")
            self._db.execute("DROP TABLE IF EXISTS imports")

    @classmethod
    def from_transcript(cls, path: str | Path) -> ResponseStore:
        """Open a JSONL transcript as a read-only store (for replay)."""
        store = cls(path, _transcript=True)
        store.transcript_sha256 = transcript_source(path)
        store.header, _ = store._load_jsonl(Path(path), store.transcript_sha256)
        return store

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def get(self, key: str, sources: Sequence[str] = (RECORDED,)) -> StoredResponse | None:
        """The answer for ``key`` from the first of ``sources`` that has one, or None."""
        marks = ", ".join("?" * len(sources))
        with self._lock:
            rows = self._db.execute(
                f"SELECT source, {', '.join(_RECORD_FIELDS)} FROM answers WHERE key = ? AND source IN ({marks})",
                (key, *sources),
            ).fetchall()
        found = {row[0]: row[1:] for row in rows}
        return next((_row_to_record(found[source]) for source in sources if source in found), None)

    def get_many(self, keys: Iterable[str], sources: Sequence[str] = (RECORDED,)) -> dict[str, StoredResponse]:
        """The answer of each of ``keys`` the store has, from the first of ``sources`` that has one (as
        :meth:`get`), in one query: the keys travel as one JSON array (SQLite's ``json_each``), so a stage's
        thousands of lookups are one statement, not one each."""
        rank = {source: index for index, source in enumerate(sources)}
        marks = ", ".join("?" * len(sources))
        with self._lock:
            rows = self._db.execute(
                f"SELECT source, {', '.join(_RECORD_FIELDS)} FROM answers "
                f"WHERE source IN ({marks}) AND key IN (SELECT value FROM json_each(?))",
                (*sources, json.dumps(list(keys))),
            ).fetchall()
        chosen: dict[str, tuple[Any, ...]] = {}
        for row in rows:
            held = chosen.get(row[1])
            if held is None or rank[row[0]] < rank[held[0]]:
                chosen[row[1]] = row
        return {key: _row_to_record(row[1:]) for key, row in chosen.items()}

    def put(self, record: StoredResponse, source: str = RECORDED) -> None:
        """Record (or replace) an answer of ``source``."""
        if self.read_only:
            raise LLMError(f"response store {self.path} is a read-only transcript; import it into a SQLite store")
        with self._lock, self._db:
            self._insert([record], source)

    def export_jsonl(
        self,
        path: str | Path,
        header: Mapping[str, Any],
        keys: Iterable[str] | None = None,
        sources: Sequence[str] = (RECORDED,),
    ) -> int:
        """Write a transcript of the answers of ``sources`` (a key held by several: the first's): a header line,
        then one record per line sorted by key; returns the count.

        ``keys`` limits it to those answers (a build's own requests); a key the store lacks is an error, since
        the transcript could not replay the build. The same store and keys always give the same bytes; the file
        is written to a temporary name and renamed.
        """
        return self.write_transcript(Path(path), header, keys, sources)[1]

    def write_transcript(
        self,
        path: Path,
        header: Mapping[str, Any],
        keys: Iterable[str] | None = None,
        sources: Sequence[str] = (RECORDED,),
        previous: Path | None = None,
    ) -> tuple[str, int]:
        """Write what :meth:`export_jsonl` describes at ``path`` (gzip for ``.gz``, no timestamp in its header, so
        deterministic) a record at a time, in key order from the store: an eight-target build's 330,000 answers are
        620 MB of JSON, never held whole. Each line is made from the row's stored text (the request is kept as
        canonical JSON already: :func:`_record_line`). Returns the file's sha256 and the count of records.

        ``previous``: a plain transcript written here before with the same header fields and sources, whose
        answers cannot have changed since (each from a replayed transcript's source, stored under that file's
        hash): the lines of its keys still wanted are copied as they are, and only the other keys' lines are made
        from the store (a rebuild whose requests changed a little writes a few of its 41,000 lines anew)."""
        marks = ", ".join("?" * len(sources))
        rank = {source: index for index, source in enumerate(sources)}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        digest = hashlib.sha256()
        packer = zlib.compressobj(9, zlib.DEFLATED, 31) if path.suffix == ".gz" else None  # as gzip.compress(mtime=0)
        with self._lock:
            held = {row[0] for row in self._db.execute(f"SELECT key FROM answers WHERE source IN ({marks})", sources)}
            wanted = held if keys is None else set(keys)
            missing = wanted - held
            if missing:
                raise LLMError(
                    f"response store {self.path} lacks {len(missing)} answer(s) of this build, e.g. {min(missing)[:12]}"
                )
            head = {**header, "transcript": TRANSCRIPT_FORMAT, "version": TRANSCRIPT_VERSION, "records": len(wanted)}
            copied = wanted & _transcript_keys(previous) if previous is not None else set()
            made = wanted - copied
            rows = self._db.execute(
                f"SELECT source, {', '.join(_RECORD_FIELDS)} FROM answers WHERE source IN ({marks})"
                + (" AND key IN (SELECT value FROM json_each(?))" if copied else "")
                + " ORDER BY key",
                (*sources, json.dumps(sorted(made))) if copied else sources,
            )
            lines = (
                (key, (_record_line(min(held_by, key=lambda row: rank[row[0]])[1:]) + "\n").encode("utf-8"))
                for key, held_by in itertools.groupby(rows, key=lambda row: row[1])
                if key in made
            )
            if copied and previous is not None:
                lines = heapq.merge(_transcript_lines_of(previous, copied), lines)
            try:
                with temporary.open("wb", buffering=_WRITE_BUFFER) as file:
                    head_line = (canonical_json(head) + "\n").encode("utf-8")
                    for data in itertools.chain([head_line], (line for _, line in lines)):
                        data = packer.compress(data) if packer is not None else data
                        digest.update(data)
                        file.write(data)
                    if packer is not None:
                        data = packer.flush()
                        digest.update(data)
                        file.write(data)
                os.replace(temporary, path)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
        return digest.hexdigest(), len(wanted)

    def holds(self, keys: Iterable[str], source: str) -> bool:
        """Whether ``source`` has an answer for every one of ``keys``."""
        with self._lock:
            held = {row[0] for row in self._db.execute("SELECT key FROM answers WHERE source = ?", (source,))}
        return held.issuperset(keys)

    def import_jsonl(self, path: str | Path) -> int:
        """Add every record of a transcript under its own source (:func:`transcript_source`); returns the count.
        A file imported before is not read again: its answers are there, under its hash."""
        if self.read_only:
            raise LLMError(f"response store {self.path} is a read-only transcript; import into a SQLite store")
        digest = transcript_source(path)
        with self._lock:
            done = self._db.execute("SELECT records FROM transcripts WHERE sha256 = ?", (digest,)).fetchone()
        if done is not None:
            return int(done[0])
        _, count = self._load_jsonl(Path(path), digest)
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO transcripts VALUES (?, ?)", (digest, count))
        log.info("imported %d records from transcript %s into %s", count, path, self.path)
        return count

    def _load_jsonl(self, path: Path, source: str) -> tuple[dict[str, Any], int]:
        """Validate a transcript and insert its records under ``source`` in one transaction, read and inserted a
        record at a time (a bad line rolls every record back); returns (header, count)."""
        header, records = transcript_records(path)
        inserted = 0

        def counted() -> Iterator[StoredResponse]:
            nonlocal inserted
            for record in records:
                inserted += 1
                yield record

        with self._lock, self._db:
            self._insert(counted(), source)
        return header, inserted

    def _insert(self, records: Iterable[StoredResponse], source: str) -> None:
        """Insert ``records`` in the open transaction (the caller's ``with self._db``)."""
        self._db.executemany(
            f"INSERT OR REPLACE INTO answers (source, {', '.join(_RECORD_FIELDS)}) VALUES ({_PLACEHOLDERS})",
            (
                (
                    source,
                    r.key,
                    r.provider,
                    r.model,
                    r.request_json,
                    r.text,
                    r.tokens_in,
                    r.tokens_out,
                    r.created_at,
                )
                for r in records
            ),
        )


def transcript_records(path: Path) -> tuple[dict[str, Any], Iterator[StoredResponse]]:
    """A transcript's header, checked, and its records, each line checked as it is read; a ``ValueError`` naming
    the file and line (the record count the header announces is checked when the records run out)."""
    lines = transcript_lines(path)
    first = next(lines, None)
    if first is None:
        raise ValueError(f"{path}: empty file, expected a PBBQ transcript header on line 1")
    header = _parse_line(path, 1, first[1])
    if header.get("transcript") != TRANSCRIPT_FORMAT or header.get("version") != TRANSCRIPT_VERSION:
        raise ValueError(
            f"{path}:1: not a PBBQ transcript header (expected transcript={TRANSCRIPT_FORMAT!r}, "
            f"version={TRANSCRIPT_VERSION})"
        )

    def records() -> Iterator[StoredResponse]:
        count = 0
        for number, line in lines:
            count += 1
            yield _json_to_record(path, number, _parse_line(path, number, line))
        if header.get("records") != count:
            raise ValueError(f"{path}: header announces {header.get('records')!r} records, the file holds {count}")

    return header, records()


def parse_transcript(path: Path) -> tuple[dict[str, Any], list[StoredResponse]]:
    """A transcript's header and records, every line checked; a ``ValueError`` naming the file and line."""
    header, records = transcript_records(path)
    return header, list(records)


def open_store(path: str | Path) -> ResponseStore:
    """A ``.jsonl`` (or ``.jsonl.gz``) path opens as a read-only transcript, anything else as a SQLite store."""
    is_transcript = Path(path).name.endswith((".jsonl", ".jsonl.gz"))
    return ResponseStore.from_transcript(path) if is_transcript else ResponseStore(path)


def _transcript_line_key(line: bytes) -> str:
    """The key of a record line as :func:`_record_line` writes it: the string after its first ``,"key":"``, which
    cannot be inside ``created_at`` before it (a quote there is escaped)."""
    start = line.index(b',"key":"') + 8
    return line[start : line.index(b'"', start)].decode("utf-8")


def _transcript_keys(path: Path) -> set[str]:
    """The keys of a plain transcript's records (a first pass over a file :func:`_transcript_lines_of` reads)."""
    with path.open("rb") as file:
        next(file, None)
        return {_transcript_line_key(line) for line in file}


def _transcript_lines_of(path: Path, keys: set[str]) -> Iterator[tuple[str, bytes]]:
    """The record lines of a plain transcript whose key is one of ``keys``, with their keys, in the file's (key)
    order."""
    with path.open("rb") as file:
        next(file, None)
        for line in file:
            key = _transcript_line_key(line)
            if key in keys:
                yield key, line


def _row_to_record(row: tuple[Any, ...]) -> StoredResponse:
    key, provider, model, request, response, tokens_in, tokens_out, created_at = row
    return StoredResponse(key, provider, model, json.loads(request), response, tokens_in, tokens_out, created_at)


def _record_line(row: tuple[Any, ...]) -> str:
    """A stored row's transcript line: ``canonical_json`` of its record (keys sorted), with the request's stored
    text written as it is, since :meth:`ResponseStore._insert` keeps it as ``canonical_json`` already; a string
    encoded as ``json.dumps(..., ensure_ascii=False)`` encodes it."""
    key, provider, model, request, response, tokens_in, tokens_out, created_at = row
    text = encode_basestring
    return (
        f'{{"created_at":{text(created_at)},"key":{text(key)},"model":{text(model)},"provider":{text(provider)},'
        f'"request":{request},"response":{text(response)},"tokens_in":{int(tokens_in)},"tokens_out":{int(tokens_out)}}}'
    )


def _parse_line(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{number}: not valid JSON ({err.msg})") from None
    except (ValueError, RecursionError) as err:  # an integer of over 4300 digits; nesting too deep
        raise ValueError(f"{path}:{number}: not usable JSON ({err})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}:{number}: expected a JSON object")
    try:
        if "\\u" in line:  # only a \u escape makes a lone surrogate
            canonical_json(value).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{path}:{number}: a \\u escape of a lone surrogate (\\ud800-\\udfff) is not text") from None
    return value


def _json_to_record(path: Path, number: int, value: dict[str, Any]) -> StoredResponse:
    missing = [name for name in _RECORD_FIELDS if name not in value]
    if missing:
        raise ValueError(f"{path}:{number}: record is missing {missing}")
    types = {"request": dict, "response": str, "tokens_in": int, "tokens_out": int}
    for name, kind in types.items():
        if not isinstance(value[name], kind):
            raise ValueError(f"{path}:{number}: {name} must be a {kind.__name__}")
    for name in ("tokens_in", "tokens_out"):
        if not 0 <= value[name] < 2**63:  # what SQLite stores
            raise ValueError(f"{path}:{number}: {name} = {value[name]} is not a token count (0 … 2**63 - 1)")
    record = StoredResponse(
        key=value["key"],
        provider=str(value["provider"]),
        model=str(value["model"]),
        request=value["request"],
        text=value["response"],
        tokens_in=value["tokens_in"],
        tokens_out=value["tokens_out"],
        created_at=str(value["created_at"]),
    )
    if sha256_text(record.request_json) != record.key:
        raise ValueError(f"{path}:{number}: key {value['key']!r} is not the sha256 of the record's request")
    return record


def transcript_header(path: Path) -> dict[str, Any]:
    """A transcript's header line (a run's own transcript: ``"stand_in": true`` marks stand-in answers), read
    alone: a paper-scale transcript is 75 MB."""
    return _parse_line(path, 1, read_transcript(path, lines=1).partition("\n")[0])
