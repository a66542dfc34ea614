"""A transcript is written a record at a time (docs/scale.md, "Memory"): an eight-target build's 330,000 answers
are 620 MB of JSON, and holding them as rows, lines, one text and its bytes took 3.4 GB at the end of the build."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

from pbbq.tasks.core.artifacts import ArtifactStore, sha256_file
from pbbq.tasks.llm import RECORDED, LLMConfig, ResponseStore, StoredResponse, open_llm, parse_transcript
from pbbq.tasks.llm.config import canonical_json, sha256_text

ANSWER = "پاسخ " * 4_000
"""About 20 KB of text per answer in the transcript (Persian: two bytes a character in a Python string)."""


def _store(path: Path, count: int = 300, source: str = RECORDED, answer: str = ANSWER) -> list[str]:
    store = ResponseStore(path)
    keys = []
    for n in range(count):
        request = {"messages": [["user", f"ترجمه کن {n}"]], "model": "m"}
        key = sha256_text(canonical_json(request))
        store.put(StoredResponse(key, "openai", "m", request, f"{answer}{n}", n, n, "t"), source)
        keys.append(key)
    store.close()
    return keys


def _peak(write: object) -> int:
    tracemalloc.start()
    try:
        write()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_export_holds_one_record_at_a_time(tmp_path: Path) -> None:
    keys = _store(tmp_path / "store.sqlite")
    store, path = ResponseStore(tmp_path / "store.sqlite"), tmp_path / "t.jsonl"
    peak = _peak(lambda: store.export_jsonl(path, {"note": "n"}, keys=keys))
    assert len(parse_transcript(path)[1]) == len(keys)
    assert peak < path.stat().st_size / 10


def test_a_replayed_transcript_is_kept_in_the_content_store_a_record_at_a_time(tmp_path: Path) -> None:
    keys = _store(tmp_path / "recorded.sqlite")
    ResponseStore(tmp_path / "recorded.sqlite").export_jsonl(tmp_path / "recording.jsonl", {"note": "recording"})
    section = {"provider": "openai", "model": "m", "mode": "replay", "store_path": tmp_path / "replay.sqlite"}
    client = open_llm(LLMConfig.from_mapping(section, env={}), tmp_path / "recording.jsonl")
    kept, path = ArtifactStore(tmp_path / "kept"), tmp_path / "run" / "transcript.jsonl"
    digests: list[str] = []
    peak = _peak(lambda: digests.append(client.export(keys, path, "n", kept=kept)))
    assert digests == [sha256_file(path)] == [sha256_file(kept.file(digests[0]))]  # a copy of the kept file
    assert sorted(p.name for p in kept.path.iterdir()) == sorted([digests[0], "memo"])  # no scratch file left
    assert peak < path.stat().st_size / 10


def test_a_gzip_transcript_is_the_bytes_gzip_gives_the_whole_text(tmp_path: Path) -> None:
    keys = _store(tmp_path / "store.sqlite")
    store = ResponseStore(tmp_path / "store.sqlite")
    digest, count = store.write_transcript(tmp_path / "t.jsonl.gz", {}, keys)
    store.export_jsonl(tmp_path / "t.jsonl", {})
    packed = (tmp_path / "t.jsonl.gz").read_bytes()
    assert packed == gzip.compress((tmp_path / "t.jsonl").read_bytes(), mtime=0)
    assert (digest, count) == (sha256_file(tmp_path / "t.jsonl.gz"), len(keys))


def test_a_key_held_by_two_sources_is_written_once_from_the_first(tmp_path: Path) -> None:
    keys = _store(tmp_path / "store.sqlite", count=3, source="older", answer="old ")
    _store(tmp_path / "store.sqlite", count=2, source="newer", answer="new ")
    store = ResponseStore(tmp_path / "store.sqlite")
    store.export_jsonl(tmp_path / "t.jsonl", {}, sources=("newer", "older"))
    header, records = parse_transcript(tmp_path / "t.jsonl")
    assert header["records"] == 3 and [r.key for r in records] == sorted(keys)
    assert sorted(r.text.split()[0] for r in records) == ["new", "new", "old"]
