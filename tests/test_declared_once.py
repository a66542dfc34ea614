"""Issue 38: a bias category and a release config are each one declaration. Each test copies the program, makes the
one edit a maintainer would (docs/architecture.md, "Adding a category", "Adding a release config") and builds the
sample with it in a fresh process, so that nothing but that edit tells the code of the new category or config."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.stage import ReleaseConfig, Table
from pbbq.tasks.evaluation.metrics import names_pairs
from pbbq.tasks.publish import PublishParams
from pbbq.tasks.statistics import table1
from tests.release_support import make_configs, make_examples, publish_stage, run_inputs

IGNORED = shutil.ignore_patterns(".git", ".venv", "outputs", "__pycache__", "*.egg-info", ".*_cache", "node_modules")


def _copy(tmp_path: Path) -> Path:
    """The repository's files, without its environment, caches and runs."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO_ROOT, copy, symlinks=True, ignore=IGNORED)
    return copy


def _declare(path: Path, after: str, line: str) -> None:
    """``line`` added to ``path`` after the line that holds ``after``: the one edit."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if after in text) + 1
    path.write_text("".join([*lines[:at], line + "\n", *lines[at:]]), encoding="utf-8")


def _run(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "PBBQ_OUTPUTS": str(copy / "outputs")}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=900)


def _build(copy: Path, *args: str) -> Path:
    done = _run(copy, "-m", "pbbq.flows.cli", "build", *args, "--stand-in", "--run-id", "r", "--outputs", "out")
    assert done.returncode == 0, done.stderr[-3000:]
    return copy / "out" / "r"


def _release(run: Path) -> Path:
    return next(path.parent for path in run.glob("*/hub/README.md"))


SURVEY_FORM = """
import sys
from pathlib import Path
import pandas as pd
from pbbq.tasks.crawl.candidates import REVIEW_COLUMNS, people_csv
from pbbq.tasks.crawl.survey_form import kept_rows, questionnaire_update

row = {"cluster_id": "CL-1", "category": "Caste", "decision": "keep", "statement_fa": "آن‌ها تنبل‌اند.",
       "target_group": "گروه الف", "non_target_groups": "گروه ب"}
sheet = Path(sys.argv[1]) / "review.csv"
sheet.write_bytes(people_csv(pd.DataFrame([{c: row.get(c, "") for c in REVIEW_COLUMNS}])))
print(list(questionnaire_update(Path("survey/questionnaire.csv"), kept_rows(sheet)).added["stereotype_id"]))
"""


def test_a_category_is_one_declaration(tmp_path: Path) -> None:
    """One line in tasks/text/categories.py declares 'Caste' (survey code CST): the questionnaire and lexicon may
    then name it (here Religion's rows, relabelled), the survey form numbers its new stereotypes ``CST-01``, and the
    sample builds its examples and lists it in Table 1 after the paper's 16."""
    copy = _copy(tmp_path)
    _declare(
        copy / "tasks" / "text" / "categories.py", 'Category("Sexual Orientation"', '    Category("Caste", "CST"),'
    )
    for data in ("survey/questionnaire.csv", "annotations/lexicon/lexicon.csv"):
        path = copy / data
        path.write_text(path.read_text(encoding="utf-8").replace(",Religion,", ",Caste,"), encoding="utf-8")
        path.write_text(path.read_text(encoding="utf-8").replace("\nReligion,", "\nCaste,"), encoding="utf-8")
    form = _run(copy, "-c", SURVEY_FORM, str(tmp_path))
    assert form.returncode == 0, form.stderr[-3000:]
    assert form.stdout.strip() == "['CST-01']"
    run = _build(copy, "--sample")
    release = _release(run)
    examples = pd.read_parquet(release / "data" / "fa")
    assert "Caste" in set(examples["category"]) and "Religion" not in set(examples["category"])
    table1 = pd.read_parquet(next(run.glob("*_statistics/table1.parquet")))
    categories = list(dict.fromkeys(table1["category"]))
    assert categories.index("Caste") == categories.index("Sexual Orientation") + 1
    assert "Caste" in (release / "README.md").read_text(encoding="utf-8")  # the card names it


def test_a_release_config_is_one_declaration(tmp_path: Path) -> None:
    """One :class:`ReleaseConfig` on PBBQ's pipeline (``en-names``: name proxies of the English examples) gives the
    release its data in the declared order, the card its row (its language's name and its contents) and the
    evaluation its ε_c pair; a name-proxy config named against the rule the evaluation pairs by is refused."""
    declared = ReleaseConfig(
        Table(PIPELINE.folder("names"), "examples"), "en", "The English examples with name proxies.", "en", names=True
    )
    pipeline = dataclasses.replace(PIPELINE, configs={**PIPELINE.configs, "en-names": declared})
    examples = pd.concat(
        [*make_configs().values(), make_examples(15, lang="en", variant="names-7271")], ignore_index=True
    )
    inputs = {**run_inputs(tmp_path, table1(examples)), "params": PublishParams(synthetic=True)}
    out = tmp_path / "10_publish"
    publish_stage(out, examples, configs=tuple(pipeline.configs), release_configs=pipeline.configs, **inputs)
    card = (out / "hub" / "README.md").read_text(encoding="utf-8")
    assert "| `en-names` | English | The English examples with name proxies. | 15 |" in card
    assert "| `fa` | Persian | The original examples, with the groups named explicitly. |" in card
    names = re.findall(r"^- config_name: (\S+)", card, flags=re.MULTILINE)
    assert names == 2 * ["fa", "fa-names", "en", "en-names"]  # configs, then dataset_info
    assert names_pairs(pipeline.configs) == [("fa", "fa-names"), ("en", "en-names")]
    with pytest.raises(ValueError, match="name-proxy config en-proxies must be called en-names"):
        dataclasses.replace(PIPELINE, configs={**PIPELINE.configs, "en-proxies": declared})


def test_the_card_names_the_declared_categories(monkeypatch: pytest.MonkeyPatch) -> None:
    """PBBQ's card names its categories from the category table, so a declared category changes the card; the
    paper's 16 read as its template wrote them by hand before."""
    from pbbq.tasks.publish import dataset_card

    paper = dataset_card._categories_paragraph()
    assert paper.startswith(
        "The stereotypes cover the 16 categories of the PBBQ paper (Age, Profession, Socio-economic"
    )
    assert "Religion, Sexual Orientation). A stereotype is used\nonly if most respondents" in paper
    monkeypatch.setattr(dataset_card, "CATEGORIES", (*dataset_card.CATEGORIES, "Caste"))
    assert "17 categories" in dataset_card._categories_paragraph()
    assert "Sexual Orientation, Caste)" in dataset_card._categories_paragraph()
