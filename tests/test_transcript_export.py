"""A transcript is written from the store's rows as they are kept: every line canonical JSON that replays the
answer, and no request decoded to write it (a paper-scale build exports 41,000 of them every run); a build that
replays its answers from a transcript takes its own transcript by reference from the content store."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from pathlib import Path

import pytest

from pbbq.tasks.core.artifacts import ArtifactStore, sha256_file
from pbbq.tasks.llm import (
    RECORDED,
    LLMConfig,
    ResponseStore,
    StoredResponse,
    open_llm,
    parse_transcript,
    read_transcript,
    transcript_header,
)
from pbbq.tasks.llm import store as store_module
from pbbq.tasks.llm.config import canonical_json, sha256_text

REQUESTS = [
    {"messages": [["user", 'ترجمه کن: "کتاب"\n\tدر خانه']], "model": "m", "parameters": {"max_tokens": 5}},
    {"messages": [["system", "\\ back\u200cslash \u0007 bell"], ["user", "emoji 🙂"]], "model": "m"},
    {"messages": [["user", "plain"]], "model": "m", "parameters": {"temperature": 0.25}},
]


def _store(path: Path) -> tuple[ResponseStore, list[StoredResponse]]:
    store = ResponseStore(path)
    records = [
        StoredResponse(sha256_text(canonical_json(request)), "openai", "m", request, f'جواب "{n}"\n\\', n, 2 * n, "t")
        for n, request in enumerate(REQUESTS)
    ]
    for record in records:
        store.put(record, RECORDED)
    return store, records


def test_an_export_is_canonical_and_replays_every_answer(tmp_path: Path) -> None:
    store, records = _store(tmp_path / "store.sqlite")
    wanted = sorted(record.key for record in records[:2])
    assert store.export_jsonl(tmp_path / "t.jsonl", {"note": "n"}, keys=wanted) == 2
    lines = (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()
    assert all(line == canonical_json(json.loads(line)) for line in lines)
    header, replayed = parse_transcript(tmp_path / "t.jsonl")
    assert header["records"] == 2 and header["note"] == "n"
    assert replayed == sorted(records[:2], key=lambda record: record.key)


def test_an_export_decodes_no_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, records = _store(tmp_path / "store.sqlite")
    decoded: list[str] = []
    loads = json.loads
    monkeypatch.setattr(json, "loads", lambda text, **kw: decoded.append(text) or loads(text, **kw))
    store.export_jsonl(tmp_path / "t.jsonl", {"note": "n"}, keys=[record.key for record in records])
    assert decoded == []


def test_a_replay_places_its_transcript_from_the_content_store(tmp_path: Path) -> None:
    store, records = _store(tmp_path / "recorded.sqlite")
    store.export_jsonl(tmp_path / "recording.jsonl", {"note": "recording"})
    keys = [record.key for record in records[:2]]
    kept = ArtifactStore(tmp_path / "kept")
    section = {"provider": "openai", "model": "m", "mode": "replay", "store_path": tmp_path / "replay.sqlite"}
    client = open_llm(LLMConfig.from_mapping(section, env={}), tmp_path / "recording.jsonl")
    first, second, written = (tmp_path / run / "transcript.jsonl" for run in ("a", "b", "c"))
    digest = client.export(keys, first, "n", kept=kept)
    assert client.export(reversed(keys), second, "n", kept=kept) == digest
    assert client.export(keys, written, "n") == digest == sha256_file(written)
    assert sha256_file(first) == sha256_file(second) == digest  # copies of the kept file, never links to it
    assert kept.file(digest).stat().st_nlink == 1
    assert [record.key for record in parse_transcript(first)[1]] == sorted(keys)


def test_answers_the_store_recorded_itself_are_written_anew(tmp_path: Path) -> None:
    """The model's own answers may be recorded again under the same key: their transcript is never reused."""
    store, records = _store(tmp_path / "recorded.sqlite")
    store.close()
    section = {"provider": "openai", "model": "m", "mode": "auto", "store_path": tmp_path / "recorded.sqlite"}
    client = open_llm(LLMConfig.from_mapping(section, env={}), None)
    kept = ArtifactStore(tmp_path / "kept")
    path = tmp_path / "a" / "transcript.jsonl"
    client.export([records[0].key], path, "n", kept=kept)
    client.store.put(dataclasses.replace(records[0], text="another answer"), RECORDED)
    client.export([records[0].key], path, "n", kept=kept)
    assert parse_transcript(path)[1][0].text == "another answer"
    assert path.stat().st_nlink == 1


def test_the_header_is_read_alone(tmp_path: Path) -> None:
    """A transcript's header is its first line: nothing after it is read (a damaged rest is the import's to find)."""
    header = b'{"note":"n","records":1,"transcript":"pbbq","version":1}\n'
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz"
    plain.write_bytes(header + b"\xff\xfe not UTF-8\n")
    rest = b"".join(hashlib.sha256(bytes([n % 256, n // 256])).digest() for n in range(4000))  # incompressible
    packed.write_bytes(gzip.compress(header + rest)[:-1000])  # the stream cut short after its header
    assert transcript_header(plain) == transcript_header(packed) == json.loads(header)
    with pytest.raises(ValueError, match=r"t.jsonl:2: not UTF-8 text"):
        read_transcript(plain)


def test_a_transcript_is_imported_a_line_at_a_time_and_a_bad_line_keeps_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 400,000-answer transcript is over half a gigabyte: it is hashed and parsed as a stream, never read whole;
    its records still go in as one transaction, so a bad last line leaves the store as it was."""
    store, records = _store(tmp_path / "store.sqlite")
    store.export_jsonl(tmp_path / "t.jsonl.gz", {})
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} read whole"))
    monkeypatch.setattr("pbbq.tasks.llm.store.read_transcript", lambda *a, **k: pytest.fail("transcript read whole"))
    imported = ResponseStore(tmp_path / "imported.sqlite")
    assert imported.import_jsonl(tmp_path / "t.jsonl.gz") == len(records)
    with gzip.open(tmp_path / "t.jsonl.gz", "rt", encoding="utf-8") as file:
        source = file.read()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(source + '{"key": "no record"}\n', encoding="utf-8")
    fresh = ResponseStore(tmp_path / "fresh.sqlite")
    with pytest.raises(ValueError, match=r"broken.jsonl:5: record is missing"):
        fresh.import_jsonl(broken)
    assert fresh.get_many(record.key for record in records) == {}


def test_a_replay_whose_requests_changed_copies_the_lines_of_its_last_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys removed and added: the kept lines are copied from the last transcript of that replay (a ``created_at``
    that reads like a key field does not mislead it), only the added keys' lines are made, and the bytes are those
    of a transcript written whole."""
    store = ResponseStore(tmp_path / "recorded.sqlite")
    records = [
        StoredResponse(
            sha256_text(canonical_json(request)), "openai", "m", request, f"جواب {n}", n, n, f'{n},"key":"\\'
        )
        for n, request in enumerate(REQUESTS)
    ]
    for record in records:
        store.put(record, RECORDED)
    store.export_jsonl(tmp_path / "recording.jsonl", {"note": "recording"})
    kept = ArtifactStore(tmp_path / "kept")
    section = {"provider": "openai", "model": "m", "mode": "replay", "store_path": tmp_path / "replay.sqlite"}
    client = open_llm(LLMConfig.from_mapping(section, env={}), tmp_path / "recording.jsonl")
    keys = sorted(record.key for record in records)
    client.export(keys[:2], tmp_path / "a" / "transcript.jsonl", "n", kept=kept)
    made: list[str] = []
    record_line = store_module._record_line
    monkeypatch.setattr(store_module, "_record_line", lambda row: made.append(row[0]) or record_line(row))
    digest = client.export(keys[1:], tmp_path / "b" / "transcript.jsonl", "n", kept=kept)
    assert made == [keys[2]]
    assert client.export(keys[1:], tmp_path / "whole.jsonl", "n") == digest == sha256_file(tmp_path / "whole.jsonl")
    assert [record.key for record in parse_transcript(tmp_path / "b" / "transcript.jsonl")[1]] == keys[1:]
