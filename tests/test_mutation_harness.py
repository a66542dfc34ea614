"""The mutation-testing script (benchmarks/mutation.py): its configuration, how it reads mutmut's answers, and
one run of mutmut on a toy module in a scratch repository (skipped without the ``mutation`` extra)."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
import tomllib
from pathlib import Path

import pytest

from benchmarks.mutation import (
    REPO_ROOT,
    Equivalent,
    ModuleResult,
    MutationError,
    RuleModule,
    changed_lines,
    function_of,
    load_equivalents,
    load_modules,
    mangle,
    match_equivalents,
    parse_results,
    prepare_scratch,
    run_module,
    table,
    toml_tables,
)


def test_the_repositorys_rule_modules_and_equivalents_load() -> None:
    modules = load_modules()
    assert {
        "survey_filter",
        "kappa_gate",
        "instantiate",
        "name_draw",
        "diversity_ngrams",
        "diversity_self_bleu",
    } <= set(modules)
    assert modules["survey_filter"] == RuleModule(
        "survey_filter", "tasks/survey_filter.py", ("tests/test_survey_filter.py",)
    )
    equivalents = load_equivalents()
    assert set(equivalents) <= set(modules)
    assert all(e.reason and e.mutated for entries in equivalents.values() for e in entries)


def test_function_names_as_mutmut_mangles_them() -> None:
    assert mangle("cochran_margin") == "x_cochran_margin"
    assert mangle("_reason") == "x__reason"
    assert mangle("Groups.pairs") == "xǁGroupsǁpairs"
    assert function_of("pbbq.tasks.kappa_gate.x__reason__mutmut_4") == "_reason"
    assert function_of("pbbq.tasks.instantiate.xǁGroupsǁpairs__mutmut_12") == "Groups.pairs"
    module = RuleModule("v", "tasks/disambiguate.py", ("t.py",), ("continuation_failures", "Prompts.load"))
    assert module.patterns() == [
        "pbbq.tasks.disambiguate.x_continuation_failures__mutmut_*",
        "pbbq.tasks.disambiguate.xǁPromptsǁload__mutmut_*",
    ]
    assert module.selects("pbbq.tasks.disambiguate.x_continuation_failures__mutmut_3")
    assert not module.selects("pbbq.tasks.disambiguate.x_disambiguate__mutmut_3")
    stage_package = RuleModule("t", "tasks/translate/__init__.py", ("t.py",), ("pronoun_failures",))
    assert stage_package.patterns() == ["pbbq.tasks.translate.x_pronoun_failures__mutmut_*"]
    whole = RuleModule("s", "tasks/survey_filter.py", ("t.py",))
    assert whole.selects("pbbq.tasks.survey_filter.x_survey_filter__mutmut_1")
    assert not whole.selects("pbbq.tasks.kappa_gate.x_kappa_gate__mutmut_1")


def test_mutmuts_results_and_diffs_are_read() -> None:
    lines = [
        "pbbq.tasks.a.x_f__mutmut_1: killed",
        "pbbq.tasks.a.x_f__mutmut_2: survived",
        "pbbq.tasks.a.x_g__mutmut_1: no tests",
    ]
    text = "".join(f"    {line}\n" for line in lines)
    assert parse_results("noise\n" + text) == {
        "pbbq.tasks.a.x_f__mutmut_1": "killed",
        "pbbq.tasks.a.x_f__mutmut_2": "survived",
        "pbbq.tasks.a.x_g__mutmut_1": "no tests",
    }
    diff = "# tasks.a.x_f__mutmut_2: survived\n--- tasks/a.py\n+++ tasks/a.py\n@@ -1 +1 @@\n-    a < b\n+    a <= b\n"
    assert changed_lines(diff) == ["a <= b"]


def test_survivors_are_matched_to_known_equivalents_by_function_and_line() -> None:
    module = RuleModule("m", "tasks/a.py", ("t.py",))
    statuses = {"pbbq.tasks.a.x_f__mutmut_1": "killed", "pbbq.tasks.a.x_f__mutmut_2": "survived"}
    statuses |= {"pbbq.tasks.a.x_g__mutmut_1": "survived", "pbbq.tasks.a.x_g__mutmut_2": "timeout"}
    result = ModuleResult(module, statuses, 3.0)
    result.changed = {"pbbq.tasks.a.x_f__mutmut_2": ["a <= b"], "pbbq.tasks.a.x_g__mutmut_1": ["a <= b"]}
    known = [Equivalent("f", "a <= b", "the same"), Equivalent("h", "x", "gone")]
    match_equivalents(result, known)
    assert result.killed == 2 and result.survivors == ["pbbq.tasks.a.x_f__mutmut_2", "pbbq.tasks.a.x_g__mutmut_1"]
    assert result.equivalent == {"pbbq.tasks.a.x_f__mutmut_2": known[0]}  # same line in g is not g's equivalent
    assert result.unmatched == [known[1]]
    assert table([result]).splitlines()[2] == "| m | 4 | 2 | 2 | 1 | 50.0 | 66.7 | 3 |"


def test_bad_configuration_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "a.py").write_text("", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[tool.pbbq.mutation.a]\npath = "tasks/a.py"\n', encoding="utf-8")
    with pytest.raises(MutationError, match=r"\[tool.pbbq.mutation\].a: needs path and tests"):
        load_modules(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pbbq.mutation.a]\npath = "tasks/a.py"\ntests = ["tests/test_a.py"]\n', encoding="utf-8"
    )
    with pytest.raises(MutationError, match=r"\.a: no such file: tests/test_a.py$"):
        load_modules(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("", encoding="utf-8")
    (tmp_path / "tasks" / "a.py").write_text(
        "def f() -> None: ...\n\n\nclass C:\n    def g(self) -> None: ...\n", encoding="utf-8"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pbbq.mutation.a]\npath = "tasks/a.py"\ntests = ["tests/test_a.py"]\nfunctions = ["f", "C.g", "h"]\n',
        encoding="utf-8",
    )
    with pytest.raises(MutationError, match=r"\.a: tasks/a.py defines no h$"):
        load_modules(tmp_path)
    (tmp_path / "eq.toml").write_text('[[a]]\nfunction = "f"\nmutated = ""\nreason = "r"\n', encoding="utf-8")
    with pytest.raises(MutationError, match=r"eq.toml, a entry 1: needs function, mutated and reason$"):
        load_equivalents(tmp_path / "eq.toml")


def test_the_scratch_copy_narrows_mutmut_to_the_module(tmp_path: Path) -> None:
    repo, scratch = tmp_path / "repo", tmp_path / "scratch"
    (repo / "tasks").mkdir(parents=True)
    (repo / "tasks" / "a.py").write_text("X = 1\n", encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\naddopts = "-ra"\n\n'
        '[tool.mutmut]\nalso_copy = ["flows"]\nuse_git_change_detection = false\n',
        encoding="utf-8",
    )
    scratch.mkdir()
    prepare_scratch(repo, scratch, RuleModule("a", "tasks/a.py", ("tests/test_a.py",)))
    assert (scratch / "pbbq" / "tasks" / "a.py").read_text(encoding="utf-8") == "X = 1\n"  # as pbbq.tasks.a
    written = tomllib.loads((scratch / "pyproject.toml").read_text(encoding="utf-8"))
    assert written == {
        "tool": {
            "pytest": {"ini_options": {"pythonpath": ["."], "addopts": "-ra"}},
            "mutmut": {
                "also_copy": ["flows"],
                "use_git_change_detection": False,
                "source_paths": ["pbbq"],
                "only_mutate": ["pbbq/tasks/a.py"],
                "pytest_add_cli_args_test_selection": ["tests/test_a.py"],
            },
        }
    }
    with pytest.raises(MutationError, match="nested tables"):
        toml_tables({"t": {"a": {"b": 1}}})


@pytest.mark.skipif(importlib.util.find_spec("mutmut") is None, reason="needs the mutation extra (mutmut)")
def test_mutmut_runs_on_a_toy_module(tmp_path: Path) -> None:
    """``clamp`` has a test for a value above and below the bound, none on it: ``>`` → ``>=`` survives (and is
    equivalent: on the bound both branches return the bound), everything else is killed."""
    repo = tmp_path / "repo"
    (repo / "tasks").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "tasks" / "__init__.py").write_text("", encoding="utf-8")
    # pbbq's links to flows/ and tasks/ as links: pbbq.tasks is the toy repository's tasks/
    shutil.copytree(REPO_ROOT / "pbbq", repo / "pbbq", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "tasks" / "toy.py").write_text(
        "def clamp(value: int, low: int) -> int:\n    return value if value > low else low\n", encoding="utf-8"
    )
    (repo / "tests" / "test_toy.py").write_text(
        textwrap.dedent(
            """
            from pbbq.tasks.toy import clamp

            def test_clamp() -> None:
                assert clamp(5, 1) == 5
                assert clamp(0, 1) == 1
            """
        ),
        encoding="utf-8",
    )
    (repo / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.mutmut]\nuse_git_change_detection = false\n',
        encoding="utf-8",
    )
    module = RuleModule("toy", "tasks/toy.py", ("tests/test_toy.py",))
    result = run_module(module, [Equivalent("clamp", "value >= low", "equal on the bound")], jobs=1, repo=repo)
    assert result.survivors == [name for name, status in result.statuses.items() if status == "survived"]
    assert [result.changed[name] for name in result.survivors] == [["return value if value >= low else low"]]
    assert list(result.equivalent) == result.survivors and result.unmatched == []
    assert result.killed == len(result.statuses) - 1 >= 2
