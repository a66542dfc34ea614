"""The stage cache key: the code part follows imports, so editing a helper module recomputes exactly the stages
that use it; the input part is the tables' content."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pandas as pd

from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.caching import StageInputsAndCode, data_files, input_digest, module_closure, stage_code_hash
from pbbq.tasks.survey_filter import survey_filter


def _module(root: Path, name: str, source: str) -> None:
    path = root.joinpath(*name.split(".")[1:]).with_suffix(".py")  # pbbq.tasks.x is tasks/x.py
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "__init__.py").touch()
    path.write_text(source, encoding="utf-8")


def _stage(module: str) -> object:
    def fn() -> None: ...

    fn.__module__ = module
    return fn


def test_editing_a_helper_recomputes_the_dependent_stage_only(tmp_path: Path) -> None:
    _module(tmp_path, "pbbq.tasks.text", "def tokens(s):\n    return s.split()\n")
    _module(tmp_path, "pbbq.tasks.metric", "from pbbq.tasks.text import tokens\n")
    _module(tmp_path, "pbbq.tasks.diversity", "import numpy\nfrom pbbq.tasks import metric\n")
    _module(tmp_path, "pbbq.tasks.survey", "from .core.schemas import X\n")
    _module(tmp_path, "pbbq.tasks.core.schemas", "X = 1\n")
    assert list(module_closure("pbbq.tasks.diversity", tmp_path)) == [
        "pbbq.tasks",
        "pbbq.tasks.diversity",
        "pbbq.tasks.metric",
        "pbbq.tasks.text",
    ]
    assert list(module_closure("pbbq.tasks.survey", tmp_path)) == ["pbbq.tasks.core.schemas", "pbbq.tasks.survey"]
    diversity, survey = _stage("pbbq.tasks.diversity"), _stage("pbbq.tasks.survey")
    before = stage_code_hash(diversity, tmp_path), stage_code_hash(survey, tmp_path)
    _module(tmp_path, "pbbq.tasks.text", "def tokens(s):\n    return s.lower().split()\n")  # two modules away
    after = stage_code_hash(diversity, tmp_path), stage_code_hash(survey, tmp_path)
    assert after[0] != before[0] and after[1] == before[1]
    _module(tmp_path, "pbbq.tasks.core.schemas", "X = 2\n")  # reached by a relative import
    assert stage_code_hash(survey, tmp_path) != after[1]


def test_a_package_that_finds_its_modules_uses_them_all_and_their_data_files(tmp_path: Path) -> None:
    """The languages package imports no language module by name (it finds them with pkgutil), and a language's word
    lists are data files beside its module: both are part of the code of a stage that uses the package."""
    package = tmp_path / "tasks" / "langs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import pkgutil\n\nFOUND = [m.name for m in pkgutil.iter_modules(__path__)]\n")
    (package / "xx.py").write_text("WORDS = 'xx.toml'\n")
    (package / "xx.toml").write_text('words = ["a"]\n')
    _module(tmp_path, "pbbq.tasks.stage", "from .langs import FOUND\n")
    assert "pbbq.tasks.langs.xx" in module_closure("pbbq.tasks.stage", tmp_path)
    stage = _stage("pbbq.tasks.stage")
    before = stage_code_hash(stage, tmp_path)
    (package / "xx.toml").write_text('words = ["b"]\n')
    assert stage_code_hash(stage, tmp_path) != before


def test_the_real_stages_cover_the_modules_they_use() -> None:
    languages = {"pbbq.tasks.text.languages", "pbbq.tasks.text.languages.fa", "pbbq.tasks.text.languages.en"}
    assert {*languages, "pbbq.tasks.core.schemas"} <= set(module_closure("pbbq.tasks.diversity"))
    folder = REPO_ROOT / "tasks" / "text" / "languages"
    assert data_files(folder / "fa.py") == [folder / "fa.toml"] and data_files(folder / "__init__.py") == []
    assert {
        "pbbq.tasks.text.cues",
        "pbbq.tasks.names.draw",
        "pbbq.tasks.names.patterns",
        "pbbq.tasks.names.tables",
    } <= set(module_closure("pbbq.tasks.names"))
    assert "pbbq.tasks.text.cues" in module_closure("pbbq.tasks.instantiate")
    assert "pbbq.tasks.names" not in module_closure("pbbq.tasks.survey_filter")


def test_a_table_is_keyed_by_its_content_not_its_index() -> None:
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1, 2]})
    assert input_digest(frame) == input_digest(frame.set_axis([5, 9]))
    assert input_digest(frame) != input_digest(frame.assign(b=[1, 3]))


def test_a_table_already_written_is_keyed_by_its_file_hash_alone() -> None:
    """The runner passes the hashes of the tables earlier stages wrote (``known``): the key takes them as they
    are, so a rebuild never serializes those tables again, and a changed table (a changed hash) changes it."""
    context = cast(Any, SimpleNamespace(task=SimpleNamespace(fn=survey_filter)))
    frame = pd.DataFrame({"a": ["x", "y"]})

    def key(known: dict[str, Any], value: pd.DataFrame) -> str | None:
        return StageInputsAndCode(known=known).compute_key(context, {"examples": value, "n": 3}, {})

    assert key({"examples": "aa"}, frame) == key({"examples": "aa"}, frame.assign(a=["changed", "y"]))
    assert key({"examples": "aa"}, frame) != key({"examples": "bb"}, frame)
    assert key({}, frame) != key({}, frame.assign(a=["changed", "y"]))  # unknown: keyed by its content
