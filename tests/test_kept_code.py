"""A build keeps what it found of its code: each source's imports in the content store, so the next build (a new
process) parses only the sources that changed, and the code hash is the one parsing gives."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pbbq.tasks.core import code_hash
from pbbq.tasks.core.artifacts import ArtifactStore
from pbbq.tasks.core.code_hash import code_hashes_kept, stage_code_hash
from tests.helpers import stage_function, write_module


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources parsed from now on (the in-process memo emptied, as in a new process)."""
    code_hash._imports_of.cache_clear()
    parsed: list[str] = []
    parse = ast.parse

    def counting(source: str, *args: object, **kwargs: object) -> ast.AST:
        parsed.append(source)
        return parse(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(code_hash.ast, "parse", counting)
    return parsed


def test_a_build_parses_only_the_sources_no_build_before_it_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, store = tmp_path / "code", ArtifactStore(tmp_path / "store")
    write_module(root, "pbbq.tasks.text", "X = 1\n")
    write_module(root, "pbbq.tasks.survey", "from .text import X\n")
    survey = stage_function("pbbq.tasks.survey")
    parsed = _parses(monkeypatch)
    with code_hashes_kept():
        unkept = stage_code_hash(survey, root)
    assert len(parsed) == 2
    parsed = _parses(monkeypatch)
    with code_hashes_kept(store):
        assert stage_code_hash(survey, root) == unkept
    assert len(parsed) == 2  # the first build with this store: every source parsed, its imports kept
    parsed = _parses(monkeypatch)
    with code_hashes_kept(store):
        assert stage_code_hash(survey, root) == unkept
    assert parsed == []  # the next: none
    write_module(root, "pbbq.tasks.text", "from .names import Y\nX = 2\n")
    write_module(root, "pbbq.tasks.names", "Y = 1\n")
    with code_hashes_kept(store):
        changed = stage_code_hash(survey, root)
    assert parsed == ["from .names import Y\nX = 2\n", "Y = 1\n"]  # only the changed source and the new one
    with code_hashes_kept():
        assert code_hash.module_closure("pbbq.tasks.survey", root).keys() == {
            "pbbq.tasks.survey",
            "pbbq.tasks.text",
            "pbbq.tasks.names",
        }
        assert stage_code_hash(survey, root) == changed
