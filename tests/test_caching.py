"""The stage cache key: the code part follows imports, so editing a helper module recomputes exactly the stages
that use it (issue 10); the input part is the tables' content."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.caching import _digest, module_closure, stage_code_hash


def _module(root: Path, name: str, source: str) -> None:
    path = root.joinpath(*name.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "__init__.py").touch()
    path.write_text(source, encoding="utf-8")


def _stage(module: str) -> object:
    def fn() -> None: ...

    fn.__module__ = module
    return fn


def test_editing_a_helper_recomputes_the_dependent_stage_only(tmp_path: Path) -> None:
    _module(tmp_path, "tasks.text", "def tokens(s):\n    return s.split()\n")
    _module(tmp_path, "tasks.metric", "from tasks.text import tokens\n")
    _module(tmp_path, "tasks.diversity", "import numpy\nfrom tasks import metric\n")
    _module(tmp_path, "tasks.survey", "from .schemas import X\n")
    _module(tmp_path, "tasks.schemas", "X = 1\n")
    assert list(module_closure("tasks.diversity", tmp_path)) == [
        "tasks",
        "tasks.diversity",
        "tasks.metric",
        "tasks.text",
    ]
    assert list(module_closure("tasks.survey", tmp_path)) == ["tasks.schemas", "tasks.survey"]
    diversity, survey = _stage("tasks.diversity"), _stage("tasks.survey")
    before = stage_code_hash(diversity, tmp_path), stage_code_hash(survey, tmp_path)
    _module(tmp_path, "tasks.text", "def tokens(s):\n    return s.lower().split()\n")  # two modules away
    after = stage_code_hash(diversity, tmp_path), stage_code_hash(survey, tmp_path)
    assert after[0] != before[0] and after[1] == before[1]
    _module(tmp_path, "tasks.schemas", "X = 2\n")  # reached by a relative import
    assert stage_code_hash(survey, tmp_path) != after[1]


def test_the_real_stages_cover_the_modules_they_use() -> None:
    assert {"tasks.persian_text", "tasks.schemas"} <= set(module_closure("tasks.diversity"))
    assert {"tasks.cues", "tasks.name_draw", "tasks.name_patterns", "tasks.name_tables"} <= set(
        module_closure("tasks.names")
    )
    assert "tasks.cues" in module_closure("tasks.instantiate")
    assert "tasks.names" not in module_closure("tasks.survey_filter")


def test_a_table_is_keyed_by_its_content_not_its_index() -> None:
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1, 2]})
    assert _digest(frame) == _digest(frame.set_axis([5, 9]))
    assert _digest(frame) != _digest(frame.assign(b=[1, 3]))
