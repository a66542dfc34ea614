"""Fuzzing every loader of a build's inputs: any input gives a valid table or the one clear
error naming the file (and the row or key), never another exception.

The loaders: the questionnaire, the responses, the templates, the ratings, the unknown phrases and the
disambiguation overrides (:mod:`pbbq.tasks.core.inputs`), the glossary (:mod:`pbbq.tasks.translate.glossary`), the name
table (:mod:`pbbq.tasks.names.tables`), the gzip JSONL transcript of LLM answers (:class:`pbbq.tasks.llm.ResponseStore`)
and the build configuration (:func:`pbbq.flows.config.load_config`). Each strategy starts from the bundled sample
file and mutates it (cells replaced with awkward text, columns dropped, repeated or reordered, rows dropped or repeated,
a BOM, CRLF, truncated or spliced bytes, non-UTF-8 bytes), and each loader also gets arbitrary bytes. A loader
that returns must return a table that keeps its documented invariants; one that refuses must raise its own
error (:class:`~pbbq.tasks.core.inputs.InputError`, :class:`~pbbq.flows.config.ConfigError`, or the transcript's
``ValueError`` that starts with the path), one line that names the file.

The runs are derandomized (the same examples on every run) and bounded so the file takes seconds; set
``PBBQ_FUZZ_SCALE`` (an integer) to multiply the number of examples for a longer search.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

import pandas as pd
import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st

from pbbq.flows.config import BuildConfig, ConfigError, input_files, load_config, ranges, sections
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import (
    ANSWERS,
    ASSIGNMENTS,
    DEMOGRAPHIC_COLUMNS,
    OVERRIDE_COLUMNS,
    PLACEHOLDER,
    QUESTIONNAIRE_COLUMNS,
    RELEVANCE_SCALE,
    SOURCES,
    TARGET_LABELS,
    TEMPLATE_COLUMNS,
    InputError,
    load_overrides,
    load_questionnaire,
    load_ratings,
    load_responses,
    load_templates,
    load_unknown_phrases,
)
from pbbq.tasks.crawl import CrawlParams
from pbbq.tasks.disambiguate import DisambiguateParams
from pbbq.tasks.diversity import DiversityParams
from pbbq.tasks.instantiate import InstantiateParams
from pbbq.tasks.kappa_gate import GateParams
from pbbq.tasks.llm import TRANSCRIPT_FORMAT, TRANSCRIPT_VERSION, LLMConfig, ResponseStore
from pbbq.tasks.names import NamesParams
from pbbq.tasks.names.tables import GENDERS, LANGUAGES, NAME_COLUMNS, load_name_table, parse_eras
from pbbq.tasks.publish import PublishParams
from pbbq.tasks.survey_filter import SurveyParams
from pbbq.tasks.text.categories import CATEGORIES
from pbbq.tasks.translate.glossary import GLOSSARY_COLUMNS, load_glossary
from pbbq.tasks.translate.pair import TranslateParams

SCALE = max(1, int(os.environ.get("PBBQ_FUZZ_SCALE", "1")))
settings.register_profile(
    "pbbq-fuzz",
    derandomize=True,  # the same examples on every run: CI is reproducible
    database=None,  # no example database: nothing replayed from an earlier run
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
FUZZ = settings.get_profile("pbbq-fuzz")


def fuzz(examples: int) -> settings:
    """The profile with a bounded number of examples (times ``PBBQ_FUZZ_SCALE``)."""
    return settings(FUZZ, max_examples=examples * SCALE)


# --- the sample, copied once per module ----------------------------------------------------------------------


class Sample:
    """A copy of the bundled sample and its valid tables (what the loaders refer to); the fuzzed files are
    written under ``fuzzed/``, so the copy itself stays valid for the configuration's tests."""

    def __init__(self, root: Path, stereotype_ids: list[str], templates: pd.DataFrame) -> None:
        self.root, self.stereotype_ids, self.templates = root, stereotype_ids, templates

    def fuzzed(self, relative: str) -> Path:
        path = self.root / "fuzzed" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def __repr__(self) -> str:
        return f"Sample({self.root})"


@pytest.fixture(scope="module")
def valid_inputs(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    root = tmp_path_factory.mktemp("fuzz").resolve()
    for folder in ("survey", "annotations", "configs", "crawl"):
        shutil.copytree(REPO_ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    questionnaire = load_questionnaire(root / "survey/questionnaire.csv")
    templates = load_templates(root / "annotations/templates.csv", questionnaire["stereotype_id"])
    return Sample(root, list(questionnaire["stereotype_id"]), templates)


def _rows(relative: str) -> list[list[str]]:
    with (REPO_ROOT / relative).open(encoding="utf-8", newline="") as handle:
        return [list(row) for row in csv.reader(handle)]


# --- awkward text ----------------------------------------------------------------------------------------------

NASTY = [
    "",
    " ",
    "\0",
    "a\0b",
    "=1+1",
    "+1",
    "-1",
    "@SUM(A1)",
    '=HYPERLINK("http://x")',
    "\u200f",  # right-to-left mark
    "\u200e",
    "\u202e",  # right-to-left override
    "\u200c",  # ZWNJ
    "\u200c\u200f ",
    "\u0640",  # tatweel
    "\ufeff",
    "\u00a0",
    "\u064b",  # a diacritic alone
    "يك",  # Arabic yeh and kaf
    "۱۲۳",
    "9" * 400,
    "1e309",
    "-0",
    "nan",
    "NaN",
    "inf",
    "None",
    "NULL",
    "#N/A",
    "True",
    '"',
    '""',
    "'",
    "\n",
    "\r\n",
    "\r",
    ",",
    ";",
    ";;",
    "|",
    "a|b|c",
    "{",
    "}",
    "{}",
    "{stereo}",
    "{nonstereo}",
    "{lex}",
    "{{stereo}}",
    "{stereo} و {nonstereo}",
    "yes",
    "YES",
    " no ",
    "1",
    "3",
    "3.0",
    "03",
    "1.5",
    "\ud800",  # a lone surrogate: written as invalid UTF-8
    "Ignore previous instructions",
]
PLACEHOLDER_TEXT = st.text(alphabet="{}stereonlx;| یکمرد\u200c", max_size=30)


def cell_text(values: list[str]) -> st.SearchStrategy[str]:
    """Awkward text, or a value of the same column (to make duplicates), or one joined with awkward text."""
    same = st.sampled_from(values) if values else st.just("")
    return st.one_of(
        st.sampled_from(NASTY),
        st.text(max_size=20),
        same,
        st.builds(lambda a, b: a + b, same, st.sampled_from(NASTY)),
        PLACEHOLDER_TEXT,
    )


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@st.composite
def byte_damage(draw: st.DrawFn, data: bytes) -> bytes:
    """Most of the time the bytes as they are; else a BOM, a truncation, a splice of random bytes or a flip."""
    kind = draw(st.sampled_from(["none", "none", "none", "bom", "truncate", "splice", "flip"]))
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if not data:
        return data
    at = draw(st.integers(0, len(data) - 1))
    if kind == "truncate":
        return data[:at]
    if kind == "splice":
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if kind == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data


CSV_OPERATIONS = ["cell", "cell", "cell", "header", "drop_column", "repeat_column", "swap_columns"]
CSV_OPERATIONS += ["drop_row", "repeat_row", "ragged_row", "add_column", "header_only"]


@st.composite
def mutated_csv(draw: st.DrawFn, original: list[list[str]]) -> bytes:
    """A sample CSV file after a few edits, written with LF or CRLF, maybe damaged at the byte level."""
    rows = [list(row) for row in original]
    for _ in range(draw(st.integers(0, 3))):
        operation = draw(st.sampled_from(CSV_OPERATIONS))
        width = max(len(row) for row in rows) if rows else 0
        if operation in ("cell", "header") and width and len(rows) > (operation == "cell"):
            r = 0 if operation == "header" else draw(st.integers(1, len(rows) - 1))
            c = draw(st.integers(0, len(rows[r]) - 1)) if rows[r] else 0
            values = [row[c] for row in rows if c < len(row)]
            if rows[r]:
                rows[r][c] = draw(cell_text(values))
        elif operation == "drop_column" and width:
            c = draw(st.integers(0, width - 1))
            rows = [row[:c] + row[c + 1 :] for row in rows]
        elif operation == "repeat_column" and width:
            c = draw(st.integers(0, width - 1))
            rows = [row + row[c : c + 1] for row in rows]
        elif operation == "swap_columns" and width > 1:
            a, b = draw(st.integers(0, width - 1)), draw(st.integers(0, width - 1))
            for row in rows:
                if max(a, b) < len(row):
                    row[a], row[b] = row[b], row[a]
        elif operation == "drop_row" and len(rows) > 1:
            del rows[draw(st.integers(1, len(rows) - 1))]
        elif operation == "repeat_row" and len(rows) > 1:
            r = draw(st.integers(1, len(rows) - 1))
            rows.insert(draw(st.integers(1, len(rows))), list(rows[r]))
        elif operation == "ragged_row" and len(rows) > 1:
            r = draw(st.integers(1, len(rows) - 1))
            rows[r] = rows[r][:-1] if draw(st.booleans()) else [*rows[r], draw(cell_text([]))]
        elif operation == "add_column" and rows:
            rows[0].append(draw(cell_text([])))
            value = draw(cell_text([]))
            for row in rows[1:]:
                row.append(value)
        elif operation == "header_only":
            rows = rows[:1]
    buffer = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))
    writer = csv.writer(buffer, lineterminator=draw(st.sampled_from(["\n", "\r\n"])), quoting=quoting)
    writer.writerows(rows)
    return draw(byte_damage(_encode(buffer.getvalue())))


# --- the check every CSV loader passes ------------------------------------------------------------------------


def _count(outcome: str) -> None:
    """Count an outcome in the statistics (``pytest --hypothesis-show-statistics``), inside a fuzzed test."""
    if currently_in_test_context():
        event(outcome)


def _one_clear_line(message: str, path: Path) -> None:
    assert str(path) in message, f"the message does not name the file: {message!r}"
    assert len(message.splitlines()) == 1, f"the message is not one line: {message!r}"


def loads_or_refuses(
    path: Path, data: bytes, load: Callable[[Path], pd.DataFrame], valid: Callable[[pd.DataFrame], None]
) -> pd.DataFrame | None:
    """Write ``data`` to ``path`` and load it: a table that ``valid`` accepts, or an :class:`InputError` that
    names the file (and a row, when it gives one, from 1 = the header). Any other exception fails the test."""
    path.write_bytes(data)
    try:
        table = load(path)
    except InputError as error:
        assert error.path == path
        assert str(error).startswith(f"{path}: ") or str(error).startswith(f"{path}, row ")
        assert error.row is None or error.row >= 1
        _one_clear_line(str(error), path)
        _count("refused")
        return None
    valid(table)
    _count("loaded")
    return table


def _filled(table: pd.DataFrame, columns: list[str]) -> None:
    for column in columns:
        assert (table[column].map(len) > 0).all(), f"an empty {column} was accepted"


def _unique(table: pd.DataFrame, column: str) -> None:
    assert not table[column].duplicated().any(), f"a repeated {column} was accepted"


def _list_of_filled(cell: Any) -> bool:
    return isinstance(cell, list) and all(isinstance(item, str) and item for item in cell)


def valid_questionnaire(table: pd.DataFrame) -> None:
    assert list(table.columns) == QUESTIONNAIRE_COLUMNS
    _filled(table, ["stereotype_id", "category", "statement_fa", "target_group"])
    _unique(table, "stereotype_id")
    assert table["category"].isin(CATEGORIES).all() and table["source"].isin(SOURCES).all()
    assert table["non_target_groups"].map(lambda cell: _list_of_filled(cell) and len(cell) > 0).all()


def valid_responses(ids: list[str]) -> Callable[[pd.DataFrame], None]:
    def valid(table: pd.DataFrame) -> None:
        assert list(table.columns) == ["respondent_id", *DEMOGRAPHIC_COLUMNS, *ids]
        _filled(table, ["respondent_id"])
        _unique(table, "respondent_id")
        assert table[ids].isin([*ANSWERS, ""]).to_numpy().all()

    return valid


def valid_templates(ids: list[str]) -> Callable[[pd.DataFrame], None]:
    def valid(table: pd.DataFrame) -> None:
        assert list(table.columns) == TEMPLATE_COLUMNS
        _filled(table, ["template_id", "ambiguous_fa", "question_negative_fa", "question_nonnegative_fa"])
        _unique(table, "template_id")
        assert table["stereotype_id"].isin(ids).all()
        for row in table.itertuples():
            assert {"stereo", "nonstereo"} <= set(PLACEHOLDER.findall(row.ambiguous_fa))
            assert not PLACEHOLDER.findall(row.question_negative_fa + row.question_nonnegative_fa)
            for entities in (row.stereo_entities, row.nonstereo_entities):
                assert _list_of_filled(entities) and entities and len(set(entities)) == len(entities)
            assert not set(row.stereo_entities) & set(row.nonstereo_entities)
            assert _list_of_filled(row.lexical_variants) and _list_of_filled(row.allowed_pairs)

    return valid


def valid_ratings(template_ids: list[str]) -> Callable[[pd.DataFrame], None]:
    def valid(table: pd.DataFrame) -> None:
        assert list(table.columns) == ["template_id", "item_id", "annotator_id", "target_label", "relevance"]
        _filled(table, ["template_id", "item_id", "annotator_id"])
        assert table["template_id"].isin(template_ids).all()
        assert table["target_label"].isin(TARGET_LABELS).all()
        assert table["relevance"].dtype == "int64" and table["relevance"].isin(RELEVANCE_SCALE).all()
        assert not table.duplicated(["template_id", "item_id", "annotator_id"]).any()

    return valid


def valid_unknown_phrases(table: pd.DataFrame) -> None:
    assert list(table.columns) in (["phrase_fa", "phrase_en"], ["phrase_fa", "phrase_en", "phrase_ur"])
    _filled(table, list(table.columns))
    _unique(table, "phrase_fa")


def valid_overrides(templates: pd.DataFrame) -> Callable[[pd.DataFrame], None]:
    def valid(table: pd.DataFrame) -> None:
        assert list(table.columns) == OVERRIDE_COLUMNS
        assert table["template_id"].isin(templates["template_id"]).all()
        assert table["assignment"].isin(ASSIGNMENTS).all()
        assert not table.duplicated(["template_id", "assignment"]).any()
        assert table["text"].map(lambda text: {"stereo", "nonstereo"} <= set(PLACEHOLDER.findall(text))).all()

    return valid


def valid_glossary(table: pd.DataFrame) -> None:
    assert list(table.columns) in (GLOSSARY_COLUMNS, [*GLOSSARY_COLUMNS, "term_ur"]) and len(table)
    _filled(table, [column for column in table.columns if column != "note"])
    _unique(table, "term_fa")
    assert not table["term_en"].str.contains(r"[\u0600-\u06ff]").any()


def valid_names(table: pd.DataFrame) -> None:
    assert list(table.columns) == NAME_COLUMNS
    _filled(table, ["lang", "group", "gender", "era", "name", "transliteration"])
    assert table["lang"].isin(LANGUAGES).all() and table["gender"].isin(GENDERS).all()
    assert table["era"].map(parse_eras).notna().all()
    assert not table.duplicated(["lang", "group", "name"]).any()


# --- one test per CSV loader -----------------------------------------------------------------------------------

QUESTIONNAIRE = _rows("survey/questionnaire.csv")
RESPONSES = _rows("survey/responses.csv")
TEMPLATES = _rows("annotations/templates.csv")
RATINGS = _rows("annotations/ratings.csv")
UNKNOWN_PHRASES = _rows("annotations/unknown_phrases.csv")
OVERRIDES = _rows("annotations/disambiguation_overrides.csv")
GLOSSARY = _rows("annotations/glossary.csv")
NAMES = _rows("annotations/names/names_fa.csv")


CSV_LOADERS: dict[str, tuple[str, Callable[[Sample], Callable[[Path], pd.DataFrame]]]] = {
    "questionnaire": ("survey/questionnaire.csv", lambda s: load_questionnaire),
    "responses": ("survey/responses.csv", lambda s: lambda p: load_responses(p, s.stereotype_ids)),
    "templates": ("annotations/templates.csv", lambda s: lambda p: load_templates(p, s.stereotype_ids)),
    "ratings": ("annotations/ratings.csv", lambda s: lambda p: load_ratings(p, s.templates["template_id"])),
    "unknown_phrases": ("annotations/unknown_phrases.csv", lambda s: load_unknown_phrases),
    "overrides": ("annotations/disambiguation_overrides.csv", lambda s: lambda p: load_overrides(p, s.templates)),
    "glossary": ("annotations/glossary.csv", lambda s: load_glossary),
    "names": ("annotations/names/names_fa.csv", lambda s: load_name_table),
}
"""Each CSV loader: its file in the sample, and the loader as a function of the path (given the sample's tables)."""


def csv_loader_test(
    loader: str,
    rows: list[list[str]],
    examples: int,
    valid: Callable[[Sample], Callable[[pd.DataFrame], None]],
    *found: bytes,
) -> Callable[..., None]:
    """The test of one of ``CSV_LOADERS``: ``examples`` edits of its sample file (``rows``) and every input in
    ``found`` (each once broke the loader) give a table that ``valid(sample)`` accepts, or one clear error."""

    @fuzz(examples)
    @given(data=mutated_csv(rows))
    def test(valid_inputs: Sample, data: bytes) -> None:
        relative, make = CSV_LOADERS[loader]
        loads_or_refuses(valid_inputs.fuzzed(relative), data, make(valid_inputs), valid(valid_inputs))

    for data in found:
        test = example(data=data)(test)
    return test


test_questionnaire = csv_loader_test(
    "questionnaire",
    QUESTIONNAIRE,
    80,
    lambda s: valid_questionnaire,
    # a statement of a right-to-left mark alone was accepted, and normalised to ''
    b"stereotype_id,category,statement_fa,statement_en,target_group,non_target_groups,source\n"
    b"AGE-01,Age,\xe2\x80\x8f,x,g,h,expert\n",
)
test_responses = csv_loader_test("responses", RESPONSES, 50, lambda s: valid_responses(s.stereotype_ids))
test_templates = csv_loader_test("templates", TEMPLATES, 80, lambda s: valid_templates(s.stereotype_ids))
test_ratings = csv_loader_test("ratings", RATINGS, 50, lambda s: valid_ratings(list(s.templates["template_id"])))
test_unknown_phrases = csv_loader_test("unknown_phrases", UNKNOWN_PHRASES, 80, lambda s: valid_unknown_phrases)
test_disambiguation_overrides = csv_loader_test(
    "overrides",
    OVERRIDES,
    80,
    lambda s: valid_overrides(s.templates),
    b"template_id,assignment,text,text\r\x0b,biased,x\n",  # was a csv.Error
    b"template_id,assignment,text\nETH-02-T2,biased,{stereo} {nonstereo},extra\n",  # was int('ETH-02-T2')
)
test_glossary = csv_loader_test("glossary", GLOSSARY, 80, lambda s: valid_glossary)


@fuzz(40)
@given(data=mutated_csv(NAMES), with_templates=st.booleans())
def test_name_table(valid_inputs: Sample, data: bytes, with_templates: bool) -> None:
    templates = valid_inputs.templates if with_templates else None
    path = valid_inputs.fuzzed("annotations/names/names_fa.csv")
    loads_or_refuses(path, data, lambda p: load_name_table(p, templates), valid_names)


@pytest.mark.parametrize("loader", CSV_LOADERS)
@fuzz(20)
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=100).map(_encode)))
def test_arbitrary_bytes(valid_inputs: Sample, loader: str, data: bytes) -> None:
    """Whatever the bytes, each CSV loader returns a table with its own columns or refuses with InputError."""
    relative, make = CSV_LOADERS[loader]
    loads_or_refuses(valid_inputs.fuzzed(relative), data, make(valid_inputs), lambda table: None)


# --- regressions: what the fuzzing found in the CSV loaders ---------------------------------------------------


def _csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return _encode(buffer.getvalue())


def _set_cell(rows: list[list[str]], row: int, column: str, value: str) -> bytes:
    """The file with one cell replaced; ``row`` is the spreadsheet row (header = 1)."""
    edited = [list(r) for r in rows]
    edited[row - 1][edited[0].index(column)] = value
    return _csv(edited)


RLM, ZWNJ = "\u200f", "\u200c"
CSV_REGRESSIONS: dict[str, tuple[str, bytes, str | None]] = {
    # a cell of bidi marks or ZWNJs alone passed the 'filled' check, then normalised to an empty text
    "statement of a bidi mark": (
        "questionnaire",
        _set_cell(QUESTIONNAIRE, 2, "statement_fa", RLM),
        "empty statement_fa",
    ),
    "groups of separators": (
        "questionnaire",
        _set_cell(QUESTIONNAIRE, 2, "non_target_groups", f";{ZWNJ};"),
        "empty non_target_groups",
    ),
    "entity of a bidi mark": (
        "templates",
        _set_cell(TEMPLATES, 2, "nonstereo_entities", RLM),
        "empty entity list nonstereo_entities",
    ),
    "phrase of a bidi mark": ("unknown_phrases", _set_cell(UNKNOWN_PHRASES, 2, "phrase_fa", RLM), "empty phrase"),
    "term of a bidi mark": ("glossary", _set_cell(GLOSSARY, 2, "term_fa", RLM), "empty term_fa"),
    # a row with one cell more than the header: pandas took its first cell as the index (ValueError from int())
    "one cell too many": (
        "overrides",
        _csv([OVERRIDES[0], [*OVERRIDES[1], "extra"]]),
        "row 2: 4 cells, more than the 3 columns of the header",
    ),
    # an empty cell too many at the end of a row is no error
    "an empty cell too many": (
        "unknown_phrases",
        _csv([UNKNOWN_PHRASES[0], *([*r, ""] for r in UNKNOWN_PHRASES[1:])]),
        None,
    ),
    # a carriage return inside an unquoted cell: csv.Error from the header's reader
    "a bare carriage return": ("unknown_phrases", b"phrase_fa,phrase_en\rx,y\n", "line 1: not a readable CSV file"),
    # a line break in a column name or an id broke the message's one line
    "a column name with a line break": (
        "responses",
        _csv([[*row, "X\nY" if i == 0 else "yes"] for i, row in enumerate(RESPONSES)]),
        "row 1: unknown stereotype id(s) 'X\\nY': not in the questionnaire",
    ),
    "an annotator with a line break": (
        "ratings",
        _csv([RATINGS[0], *[[*row[:2], "A\n1", *row[3:]] for row in RATINGS[1:3]], *RATINGS[3:]]),
        "annotator 'A\\n1' rated item",
    ),
}


@pytest.mark.parametrize("case", CSV_REGRESSIONS)
def test_csv_regressions(valid_inputs: Sample, case: str) -> None:
    loader, data, message = CSV_REGRESSIONS[case]
    relative, make = CSV_LOADERS[loader]
    path = valid_inputs.fuzzed(relative)
    table = loads_or_refuses(path, data, make(valid_inputs), lambda table: None)
    if message is None:
        assert table is not None
    else:
        with pytest.raises(InputError) as error:
            make(valid_inputs)(path)
        assert message in str(error.value)


# --- the transcript --------------------------------------------------------------------------------------------


def _transcript_lines(records: int) -> list[str]:
    lines = gzip.decompress((REPO_ROOT / "prompts/transcripts/sample.jsonl.gz").read_bytes()).decode().splitlines()
    header = json.loads(lines[0]) | {"records": records}
    return [json.dumps(header, ensure_ascii=False), *lines[1 : records + 1]]


TRANSCRIPT = _transcript_lines(4)
RECORD_FIELDS = ["key", "provider", "model", "request", "response", "tokens_in", "tokens_out", "created_at"]
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**30, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NASTY),
    st.text(max_size=10),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
)
RAW_LINES = [
    "",
    " ",
    "{",
    "null",
    "[]",
    '"text"',
    "{}",
    '{"a": ' + "1" * 5000 + "}",  # an integer over Python's 4300-digit limit
    "[" * 100_000,  # nesting deeper than the JSON parser recurses
    '{"a": NaN}',
    "\ufeff{}",
    '{"key": "\\ud800"}',
]


def _key(request: Any) -> str:
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@st.composite
def mutated_transcript(draw: st.DrawFn) -> tuple[str, bytes]:
    """(file name, bytes) of a small sample transcript after a few edits, gzip or plain, maybe damaged."""
    lines = list(TRANSCRIPT)
    for _ in range(draw(st.integers(0, 3))):
        operation = draw(
            st.sampled_from(["field", "field", "rekeyed", "drop_field", "header", "line", "drop", "repeat", "cut"])
        )
        i = draw(st.integers(0, len(lines) - 1)) if lines else 0
        if operation in ("field", "rekeyed", "drop_field", "header") and lines:
            i = 0 if operation == "header" else i
            try:
                value = json.loads(lines[i])
            except (ValueError, RecursionError):
                continue
            if not isinstance(value, dict):
                continue
            names = ["transcript", "version", "records", "note"] if operation == "header" else RECORD_FIELDS
            name = draw(st.sampled_from(names))
            if operation == "drop_field":
                value.pop(name, None)
            else:
                value[name] = draw(JSON_VALUES)
            if operation == "rekeyed" and "request" in value:
                value["key"] = _key(value["request"])
            lines[i] = json.dumps(value, ensure_ascii=draw(st.booleans()))
        elif operation == "line":
            text = draw(st.one_of(st.sampled_from(RAW_LINES), st.text(max_size=30), JSON_VALUES.map(json.dumps)))
            if lines and draw(st.booleans()):
                lines[i] = text
            else:
                lines.insert(i, text)
        elif operation == "drop" and lines:
            del lines[i]
        elif operation == "repeat" and lines:
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif operation == "cut" and lines:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    text = draw(st.sampled_from(["\n", "\r\n"])).join(lines) + draw(st.sampled_from(["\n", ""]))
    data = draw(byte_damage(_encode(text)))
    name = draw(st.sampled_from(["t.jsonl.gz", "t.jsonl"]))
    if name.endswith(".gz"):
        data = draw(byte_damage(gzip.compress(data, mtime=0)))
    return name, data


def loads_transcript_or_refuses(folder: Path, name: str, data: bytes) -> dict[str, Any] | None:
    """Open a transcript: a store whose every record is retrievable (its header returned), or a ValueError that
    starts with the path."""
    path = folder / name
    path.write_bytes(data)
    try:
        store = ResponseStore.from_transcript(path)
    except ValueError as error:
        assert str(error).startswith(f"{path}"), f"the message does not start with the file: {error!r}"
        _one_clear_line(str(error), path)
        _count("refused")
        return None
    _count("loaded")
    with store:
        assert store.header is not None and store.header["transcript"] == TRANSCRIPT_FORMAT
        assert store.header["version"] == TRANSCRIPT_VERSION
        keys = [record["key"] for record in map(json.loads, _lines_of(path)[1:])]
        assert len(store) == len(set(keys)) and store.header["records"] == len(keys)
        for key in keys:
            record = store.get(key, (store.transcript_sha256,))  # a transcript's answers are its own source
            assert record is not None and isinstance(record.text, str) and isinstance(record.request, dict)
        return store.header


def _lines_of(path: Path) -> list[str]:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8").splitlines()


@fuzz(150)
@given(transcript=mutated_transcript())
def test_transcript(valid_inputs: Sample, transcript: tuple[str, bytes]) -> None:
    loads_transcript_or_refuses(valid_inputs.root, *transcript)


@fuzz(30)
@given(data=st.binary(max_size=300), name=st.sampled_from(["t.jsonl.gz", "t.jsonl"]))
def test_transcript_of_arbitrary_bytes(valid_inputs: Sample, data: bytes, name: str) -> None:
    loads_transcript_or_refuses(valid_inputs.root, name, data)


def test_the_sample_transcript_loads(valid_inputs: Sample) -> None:
    assert loads_transcript_or_refuses(valid_inputs.root, "t.jsonl.gz", gzip.compress(_encode("\n".join(TRANSCRIPT))))


def _edited_transcript(line: int, change: Callable[[dict[str, Any]], None]) -> bytes:
    """The small transcript with one line's JSON changed (``line`` counts from 1, the header)."""
    lines = list(TRANSCRIPT)
    value = json.loads(lines[line - 1])
    change(value)
    lines[line - 1] = json.dumps(value)  # ASCII: a lone surrogate is written as a \\u escape
    return _encode("\n".join(lines) + "\n")


def _with_line(line: int, text: str) -> bytes:
    lines = list(TRANSCRIPT)
    lines[line - 1] = text
    return _encode("\n".join(lines) + "\n")


def _rekeyed(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(record: dict[str, Any]) -> None:
        change(record["request"])
        record["key"] = _key(record["request"])

    return edit


TRANSCRIPT_REGRESSIONS: dict[str, tuple[str, bytes | None, str]] = {
    # gzip.BadGzipFile (OSError), EOFError and zlib.error escaped from gzip.decompress
    "not gzip": ("t.jsonl.gz", b"plain text", ": not a readable gzip file"),
    "a gzip header alone": ("t.jsonl.gz", b"\x1f\x8b", ": not a readable gzip file"),
    "a truncated gzip stream": (
        "t.jsonl.gz",
        gzip.compress(_encode("\n".join(TRANSCRIPT)))[:200],
        ": not a readable gzip",
    ),
    # UnicodeDecodeError, a ValueError without the file's name
    "not UTF-8": ("t.jsonl", b"\x80{}", ":1: not UTF-8 text"),
    # RecursionError and the ValueError of Python's 4300-digit limit escaped from json.loads
    "nesting too deep": ("t.jsonl", _with_line(2, "[" * 100_000), ":2: not usable JSON"),
    "an integer of 5000 digits": ("t.jsonl", _with_line(2, '{"a": ' + "1" * 5000 + "}"), ":2: not usable JSON"),
    # UnicodeEncodeError from sha256 or SQLite: a \\ud800 escape is valid JSON but no text
    "a lone surrogate in the answer": (
        "t.jsonl",
        _edited_transcript(2, lambda record: record.update(response="\ud800")),
        ":2: a \\u escape of a lone surrogate",
    ),
    "a lone surrogate in the request": (
        "t.jsonl",
        _edited_transcript(2, _rekeyed(lambda request: request.update(system="\udfff"))),
        ":2: a \\u escape of a lone surrogate",
    ),
    # OverflowError from SQLite
    "a token count over 64 bits": (
        "t.jsonl.gz",
        gzip.compress(_edited_transcript(3, lambda record: record.update(tokens_out=10**30))),
        ":3: tokens_out = 1000000000000000000000000000000 is not a token count",
    ),
    # a line break in the header's count broke the message's one line
    "a count with a line break": (
        "t.jsonl",
        _edited_transcript(1, lambda header: header.update(records="4\n")),
        ": header announces '4\\n' records, the file holds 4",
    ),
    # FileNotFoundError
    "no file": ("t.jsonl.gz", None, ": transcript not found"),
}


@pytest.mark.parametrize("case", TRANSCRIPT_REGRESSIONS)
def test_transcript_regressions(valid_inputs: Sample, case: str) -> None:
    name, data, message = TRANSCRIPT_REGRESSIONS[case]
    path = valid_inputs.root / "regression" / name
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    if data is not None:
        assert loads_transcript_or_refuses(path.parent, name, data) is None
    with pytest.raises(ValueError) as error:
        ResponseStore(valid_inputs.root / "regression" / "store.sqlite").import_jsonl(path)
    assert str(error.value).startswith(f"{path}{message}")


# --- the build configuration -----------------------------------------------------------------------------------


class Raw(str):
    """A TOML value written as it is (a date, a time)."""


def _toml_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # nan, inf, -inf and 1e+300 are TOML too
    if isinstance(value, str):
        return json.dumps(value).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml(document: dict[str, Any]) -> str:
    top = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in document.items() if not isinstance(v, dict)]
    tables = [
        f"[{json.dumps(k)}]\n" + "".join(f"{json.dumps(key)} = {_toml_value(v)}\n" for key, v in section.items())
        for k, section in document.items()
        if isinstance(section, dict)
    ]
    return "\n".join(top) + "\n\n" + "\n".join(tables)


SAMPLE_TOML = tomllib.loads((REPO_ROOT / "configs/sample.toml").read_text(encoding="utf-8"))
PARAMETERS: dict[str, Any] = {
    "llm": LLMConfig,
    "crawl": CrawlParams,
    "survey_filter": SurveyParams,
    "kappa_gate": GateParams,
    "disambiguate": DisambiguateParams,
    "instantiate": InstantiateParams,
    "names": NamesParams,
    "translate": TranslateParams,
    "diversity": DiversityParams,
    "publish": PublishParams,
}
SECTION_KEYS = {section: [f.name for f in fields(kind)] for section, kind in PARAMETERS.items()}
SECTION_KEYS["llm"] += ["transcript", "api_key"]
SECTION_KEYS["inputs"] = [source.config_key for source in input_files()]
TOML_SCALARS = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2, 3, 20, 21, 100, 101, 2**32, 2**32 - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-9, 0.5, 0.999999, 1.0, 1.5, 5e-324, math.nan, math.inf, -math.inf]),
    st.sampled_from(NASTY),
    st.text(max_size=12),
    st.sampled_from(["openai", "anthropic", "replay", "live", "auto", "gpt-4o", "o1-mini", "../no/such/file.csv"]),
    st.sampled_from(["../survey/questionnaire.csv", "../annotations", "/", ".", "../crawl/sample/sources.toml"]),
    st.sampled_from([Raw("1979-05-27T07:32:00Z"), Raw("1979-05-27"), Raw("07:32:00")]),
)
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def in_range(section: str, key: str) -> st.SearchStrategy[int | float]:
    """A value of a numeric parameter within its range (:func:`pbbq.flows.config.ranges`), bounds included."""
    low, high = ranges()[section][key]
    if get_type_hints(PARAMETERS[section])[key] is int:
        return st.integers(None if low is None else math.ceil(low), None if high is None else math.floor(high))
    return st.floats(low, high, allow_nan=False)


@st.composite
def mutated_config(draw: st.DrawFn) -> bytes:
    """The sample configuration after a few edits: a known key set to any TOML value, a key or a section
    dropped, an unknown key or section added, a section made a value; maybe damaged at the byte level."""
    document = json.loads(json.dumps(SAMPLE_TOML))
    for _ in range(draw(st.integers(1, 3))):
        operation = draw(st.sampled_from(["set", "set", "in_range", "in_range", "drop", "unknown", "drop_section"]))
        operation = draw(st.sampled_from([operation, operation, operation, "flatten"]))
        section = draw(st.sampled_from([*sections(), "colour"]))
        if operation == "in_range":
            section = draw(st.sampled_from(sorted(ranges())))
            key = draw(st.sampled_from(sorted(ranges()[section])))
            if isinstance(document.get(section, {}), dict):
                document.setdefault(section, {})[key] = draw(in_range(section, key))
        elif operation == "set":
            key = draw(st.sampled_from(SECTION_KEYS.get(section, ["x"])))
            if not isinstance(document.get(section, {}), dict):
                document[section] = {}
            document.setdefault(section, {})[key] = draw(TOML_VALUES)
        elif operation == "drop" and isinstance(document.get(section), dict) and document[section]:
            del document[section][draw(st.sampled_from(sorted(document[section])))]
        elif operation == "unknown":
            target = document if draw(st.booleans()) else document.setdefault(section, {})
            if isinstance(target, dict):
                target[draw(st.text(min_size=1, max_size=8))] = draw(TOML_VALUES)
        elif operation == "drop_section":
            document.pop(section, None)
        elif operation == "flatten":
            document[section] = draw(TOML_SCALARS)
    return draw(byte_damage(_encode(_toml(document))))


def _within(value: Any, bounds: tuple[float | None, float | None]) -> bool:
    low, high = bounds
    return not math.isnan(value) and (low is None or value >= low) and (high is None or value <= high)


def valid_config(config: BuildConfig) -> None:
    """Every numeric parameter within its range (never NaN), the LLM settings usable."""
    assert isinstance(config, BuildConfig)
    for section, section_ranges in ranges().items():
        params = config.params(section)
        for key, bounds in section_ranges.items():
            value = getattr(params, key)
            assert isinstance(value, int | float) and _within(value, bounds), f"[{section}] {key} = {value!r}"
    llm = config.llm
    assert isinstance(llm.provider, str) and isinstance(llm.model, str) and llm.model
    assert isinstance(llm.max_concurrency, int) and llm.max_concurrency >= 1
    assert isinstance(llm.max_retries, int) and llm.max_retries >= 0
    assert isinstance(llm.max_tokens, int) and llm.max_tokens >= 1
    assert isinstance(llm.timeout, float) and _within(llm.timeout, (1e-300, None))
    assert llm.requests_per_minute is None or _within(llm.requests_per_minute, (1e-300, None))
    assert llm.temperature is None or _within(llm.temperature, (None, None))
    assert all(_within(price, (0, None)) for pair in llm.prices.values() for price in pair)
    assert isinstance(llm.store_path, Path) and (config.transcript is None or isinstance(config.transcript, Path))
    assert all(isinstance(path, Path) for path in config.inputs.values())


def loads_config_or_refuses(folder: Path, data: bytes) -> BuildConfig | None:
    """Load a configuration written into the sample's configs/: a valid one, or a ConfigError naming the file
    (or the InputError of the unknown phrases it reads, naming that file)."""
    path = folder / "configs" / "fuzzed.toml"
    path.write_bytes(data)
    try:
        config = load_config(path)
    except ConfigError as error:
        assert str(error).startswith(f"{path}: "), f"the message does not start with the file: {error!r}"
        _one_clear_line(str(error), path)
        _count("refused")
        return None
    except InputError as error:
        _one_clear_line(str(error), error.path)
        _count("refused: its unknown phrases")
        return None
    valid_config(config)
    _count("loaded")
    return config


@fuzz(120)
@given(data=mutated_config())
def test_config(valid_inputs: Sample, data: bytes) -> None:
    loads_config_or_refuses(valid_inputs.root, data)


@fuzz(30)
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=100).map(_encode)))
def test_config_of_arbitrary_bytes(valid_inputs: Sample, data: bytes) -> None:
    loads_config_or_refuses(valid_inputs.root, data)


def test_the_sample_config_loads(valid_inputs: Sample) -> None:
    assert loads_config_or_refuses(valid_inputs.root, _encode(_toml(SAMPLE_TOML)))


def _sample_with(section: str, key: str | None, value: Any) -> bytes:
    """The sample configuration with one key (or, for ``key=None``, a whole section) set to ``value``."""
    document = json.loads(json.dumps(SAMPLE_TOML))
    if key is None:
        document[section] = value
    else:
        document[section][key] = value
    return _encode(_toml(document))


CONFIG_REGRESSIONS: dict[str, tuple[bytes, str]] = {
    # UnicodeDecodeError from read_text
    "not UTF-8": (b"\x80", "not UTF-8 text"),
    # TypeError: argument of type 'bool' is not iterable, and 'bool' object is not iterable
    "inputs a value": (_sample_with("inputs", None, False), "inputs must be a section [inputs], not a value"),
    "llm a value": (_sample_with("llm", None, False), "llm must be a section [llm], not a value"),
    # TypeError: unsupported operand type(s) for /: 'PosixPath' and 'list' (or 'int')
    "a path that is a list": (
        _sample_with("inputs", "unknown_phrases", []),
        "[inputs] unknown_phrases = [] is not a path",
    ),
    "a transcript that is a number": (_sample_with("llm", "transcript", 5), "[llm] transcript = 5 is not a path"),
    "a store path that is a list": (_sample_with("llm", "store_path", []), "[llm] store_path = [] is not a path"),
    # ValueError: embedded null byte, from Path.resolve
    "a path with a NUL": (_sample_with("inputs", "names", "a\0b"), "[inputs] names = 'a\\x00b' is not a path"),
    "a crawl path with a NUL": (_sample_with("crawl", "sources", "a\0b"), "[crawl] sources = 'a\\x00b' holds a NUL"),
    # NaN passed every range check (nan < low and nan > high are both false)
    "a NaN threshold": (_sample_with("survey_filter", "threshold", math.nan), "[survey_filter] threshold = nan is not"),
    "a NaN rate": (_sample_with("llm", "requests_per_minute", math.nan), "[llm] requests_per_minute = nan is not"),
    "a NaN price": (_sample_with("llm", "prices", {"m": [1.0, math.nan]}), "[llm] prices = {'m': [1.0, nan]} is not a"),
    # TypeError from LLMConfig: '<' not supported between 'str' and 'int'; len() of an int; min() of a str
    "a concurrency that is text": (
        _sample_with("llm", "max_concurrency", "8"),
        "[llm] max_concurrency = '8' is not int",
    ),
    "a price that is a number": (_sample_with("llm", "prices", {"m": 1}), "[llm] prices = {'m': 1} is not a table"),
    "prices that are text": (_sample_with("llm", "prices", "ab"), "[llm] prices = 'ab' is not a table"),
    # a line break in an unknown key's name broke the message's one line
    "a key with a line break": (_sample_with("\n", None, 1), "unknown section(s) or key(s) '\\n'; known"),
    "a crawl key with a line break": (_sample_with("crawl", "a\nb", 1), "[crawl] has unknown key(s) 'a\\nb'; known"),
}


@pytest.mark.parametrize("case", CONFIG_REGRESSIONS)
def test_config_regressions(valid_inputs: Sample, case: str) -> None:
    data, message = CONFIG_REGRESSIONS[case]
    assert loads_config_or_refuses(valid_inputs.root, data) is None
    with pytest.raises(ConfigError) as error:
        load_config(valid_inputs.root / "configs" / "fuzzed.toml")
    assert message in str(error.value)
