"""A transcript is written from the store's rows as they are kept: every line canonical JSON that replays the
answer, and no request decoded to write it (a paper-scale build exports 41,000 of them every run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pbbq.tasks.llm import RECORDED, ResponseStore, StoredResponse, parse_transcript
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
