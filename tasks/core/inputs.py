"""Loaders of the human-authored inputs, each validating as it reads (docs/architecture.md §7).

A wrong input stops the build with one :class:`InputError` that names the file, the row and the problem.
Rows are counted as a spreadsheet shows them: the header is row 1, the first data row is row 2. Persian text
is normalised here, once, with :func:`pbbq.tasks.text.languages.fa.normalize_fa`.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path

import pandas as pd

from ..text.categories import CATEGORIES, not_one_of
from ..text.languages import LANGUAGES
from ..text.languages.fa import normalize_fa
from .artifacts import ArtifactStore, json_text
from .stage import Input
from .stage import load_inputs as load_declared

LIST_SEPARATOR = ";"
ANSWERS = ("yes", "no")
"""Survey answers: 'yes' = the respondent has heard of or believes the stereotype (PBBQ §3.2, §5).
An empty cell is a skipped item and counts in no denominator."""
DEMOGRAPHIC_COLUMNS = (
    "gender",
    "age_band",
    "income_band",
    "education",
    "sexual_orientation",
    "religion",
    "political_orientation",
)
"""The respondents' attributes of the PBBQ paper's Appendix E."""
SOURCES = ("crawl", "expert", "survey-write-in")
TARGET_LABELS = ("stereo", "nonstereo", "neither")
RELEVANCE_SCALE = (1, 2, 3)
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_ROLE_PLACEHOLDER = re.compile(r"\{(stereo|nonstereo)\}")
ASSIGNMENTS = ("biased", "counter_biased")
"""Disambiguated answer assignments: the stereotyped entity answers the negative question, or the other one."""
OVERRIDE_COLUMNS = ["template_id", "assignment", "text"]


def swap_roles(text: str) -> str:
    """The same template text with ``{stereo}`` and ``{nonstereo}`` exchanged: the other order of mention of an
    ambiguous context, and the mirror of a disambiguated continuation (the other answer assignment)."""
    return _ROLE_PLACEHOLDER.sub(lambda m: "{nonstereo}" if m.group(1) == "stereo" else "{stereo}", text)


INSTRUCTION_LIKE = re.compile(
    r"ignore\s+(?:all\s+|the\s+|any\s+)?(?:previous|above|prior|earlier)\s+(?:instructions?|prompts?|messages?)"
    r"|disregard\s+(?:all|the|any|previous|above)|system\s+prompt|you\s+are\s+now\b|new\s+instructions?"
    r"|</?\s*(?:system|assistant|user|instructions?)\s*>|```"
    r"|نادیده\s*بگیر|دستورالعمل[\u200c\s]*(?:ها|های)?\s*(?:قبلی|بالا|پیشین)|پرامپت|از\s+این\s+به\s+بعد\s+تو",
    re.IGNORECASE,
)
"""Text that reads like an instruction to a model (prompt injection), in English or Persian."""


def instruction_like(
    tables: dict[str, pd.DataFrame],
    paths: dict[str, Path],
    kept: ArtifactStore | None = None,
    keys: Mapping[str, str] | None = None,
) -> list[str]:
    """Cells of the inputs that reach a prompt and read like instructions to a model: one warning each, naming
    the file, the row and the column. They are not refused (a template may quote such a sentence), but a
    person should look; the prompt keeps them inside delimited data blocks and the validators stay the last
    line of defence.

    ``keys``: per input, a key that determines its table (its file's hash, those of the inputs its loader reads,
    the loader's and this scan's code); the verdict on an input with a key is kept in ``kept`` under it and its
    file name, so an unchanged input is not scanned again (docs/architecture.md §5). An optional input left out
    (None) has no cells."""
    warnings = []
    for name, frame in tables.items():
        if frame is None:  # an optional input left out: nothing reaches a prompt
            continue
        where = paths.get(name, Path(name))
        key = (keys or {}).get(name)
        if kept is None or key is None:
            warnings += _instruction_like(frame, where)
            continue
        verdict = kept.memo(
            json_text(["instruction_like", key, str(where)]),
            partial(_instruction_like_json, frame, where),
        )
        warnings += json.loads(kept.file(verdict).read_bytes())
    return warnings


def _instruction_like_json(frame: pd.DataFrame, where: Path) -> bytes:
    return json_text(_instruction_like(frame, where)).encode("utf-8")


def _instruction_like(frame: pd.DataFrame, where: Path) -> list[str]:
    """:func:`instruction_like` of one input's table, scanned."""
    warnings = []
    for column in frame.columns:
        cells = frame[column].map(lambda v: " ".join(v) if isinstance(v, list) else v)
        if not (pd.api.types.is_object_dtype(cells) or pd.api.types.is_string_dtype(cells)):
            continue
        for index, text in cells.items():
            found = INSTRUCTION_LIKE.search(text) if isinstance(text, str) else None
            if found:
                warnings.append(
                    f"{where}, row {spreadsheet_row(index)}: {column} reads like an instruction to a model "
                    f"(«{found.group(0)}»)"
                )
    return warnings


class InputError(ValueError):
    """One problem in one row of one input file."""

    def __init__(self, path: Path, row: int | None, problem: str) -> None:
        self.path, self.row, self.problem = path, row, problem
        where = f"{path}, row {row}" if row is not None else str(path)
        super().__init__(f"{where}: {problem}")


_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def _shown(text: str) -> str:
    """A cell or column name inside a message: as it is, or its ``repr`` if it would break the message's line."""
    return repr(text) if _LINE_BREAK.search(text) else text


def read_csv_checked(
    path: Path, required: Iterable[str], *, allow_empty: bool = False, data: bytes | None = None
) -> pd.DataFrame:
    """A UTF-8 CSV file as strings, every cell stripped; one :class:`InputError` naming the file (and the row)
    for a missing or empty file, a repeated column, a missing required column, a NUL byte, text that is not
    CSV, a row with more (non-empty) cells than the header has columns, or no data rows (unless ``allow_empty``:
    a header alone then means 'none'). Blank lines are skipped; a row's missing cells at its end are empty.
    ``data``: the bytes a command is about to write to ``path``, checked before they replace the file."""
    if data is None and not path.is_file():
        raise InputError(path, None, "file not found")
    raw = path.read_bytes() if data is None else data
    if b"\0" in raw:
        raise InputError(path, raw[: raw.index(b"\0")].count(b"\n") + 1, "a NUL byte: not a text CSV file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, raw[: exc.start].count(b"\n") + 1, "not UTF-8 text") from None
    reader = csv.reader(io.StringIO(text))
    try:
        records = list(reader)
    except csv.Error as exc:
        raise InputError(path, None, f"line {reader.line_num}: not a readable CSV file ({exc})") from None
    header = records[0] if records else []
    if not [column for column in header if column.strip()]:
        raise InputError(path, None, "empty file: no header row")
    repeated = sorted({column for column in header if header.count(column) > 1})
    if repeated:
        raise InputError(path, 1, f"column(s) {', '.join(map(_shown, repeated))} appear more than once in the header")
    width = len(header)
    for row, record in enumerate(records[1:], 2):
        if len(record) > width and any(cell.strip() for cell in record[width:]):
            raise InputError(path, row, f"{len(record)} cells, more than the {width} columns of the header")
    # a blank line is no row; missing cells at the end of a row are empty, extra empty ones are dropped
    rows = [record if len(record) == width else (record + [""] * width)[:width] for record in records[1:] if record]
    missing = [column for column in required if column not in header]
    if missing:
        raise InputError(path, 1, f"missing column(s) {', '.join(missing)}")
    if not rows and not allow_empty:
        raise InputError(path, None, "no data rows: the file has a header only")
    # built a column at a time, every cell stripped (a review round's sheets hold 20,000 rows of long text)
    columns = zip(*rows, strict=True) if rows else ((),) * width
    return pd.DataFrame(
        {
            name: pd.Series([cell.strip() for cell in cells], dtype=str)
            for name, cells in zip(header, columns, strict=True)
        },
        columns=header,
    )


def spreadsheet_row(index: int) -> int:
    """The spreadsheet row of the data row at ``index`` (header = row 1)."""
    return int(index) + 2


def _split_list(value: str) -> list[str]:
    return [part for part in map(normalize_fa, value.split(LIST_SEPARATOR)) if part]


def _require_unique(frame: pd.DataFrame, column: str, path: Path, what: str) -> None:
    duplicated = frame[column].duplicated()
    if duplicated.any():
        index = duplicated.idxmax()
        first = frame.index[frame[column] == frame.at[index, column]][0]
        raise InputError(
            path,
            spreadsheet_row(index),
            f"duplicate {what} {frame.at[index, column]!r} (first in row {spreadsheet_row(first)})",
        )


def require_none(path: Path, bad: pd.Series, problem: Callable[..., str]) -> None:
    """Raise for the first row flagged in ``bad`` (a boolean Series over the file's rows), with
    ``problem(index)`` naming what is wrong with it (a lambda in a loop binds its loop variables as defaults, which
    the type checker cannot match to a one-argument callable: hence ``...``)."""
    if bad.any():
        index = bad.idxmax()
        raise InputError(path, spreadsheet_row(index), problem(index))


def require_filled(frame: pd.DataFrame, columns: Iterable[str], path: Path) -> None:
    for column in columns:
        require_none(path, frame[column] == "", lambda _, column=column: f"empty {column}")


def read_csv_filled(path: Path, columns: list[str]) -> pd.DataFrame:
    """The ``columns`` of a CSV file read by :func:`read_csv_checked`, each filled in every row."""
    frame = read_csv_checked(path, columns)[columns]
    require_filled(frame, columns, path)
    return frame


QUESTIONNAIRE_COLUMNS = [
    "stereotype_id",
    "category",
    "statement_fa",
    "statement_en",
    "target_group",
    "non_target_groups",
    "source",
]
"""The questionnaire's columns, in its order (``survey/questionnaire.csv``)."""


def load_questionnaire(path: Path, data: bytes | None = None) -> pd.DataFrame:
    """The surveyed stereotypes: one row each, with the groups they are about (PBBQ §3.2). ``data``: the
    file's new bytes, checked before they are written (:func:`read_csv_checked`)."""
    columns = QUESTIONNAIRE_COLUMNS
    frame = read_csv_checked(path, columns, data=data)[columns]
    for column in ("statement_fa", "target_group"):  # first, so a cell of bidi marks alone counts as empty
        frame[column] = frame[column].map(normalize_fa)
    frame["non_target_groups"] = frame["non_target_groups"].map(_split_list)
    require_filled(frame, ["stereotype_id", "category", "statement_fa", "target_group"], path)
    require_none(path, frame["non_target_groups"].map(len) == 0, lambda _: "empty non_target_groups")
    _require_unique(frame, "stereotype_id", path, "stereotype_id")
    for index, row in frame.iterrows():
        if row.category not in CATEGORIES:
            raise InputError(path, spreadsheet_row(index), not_one_of(row.category))
        if row.source not in SOURCES:
            raise InputError(path, spreadsheet_row(index), f"source {row.source!r} is not one of {', '.join(SOURCES)}")
    return frame.reset_index(drop=True)


def load_responses(path: Path, stereotype_ids: Iterable[str], data: bytes | None = None) -> pd.DataFrame:
    """Survey responses: one row per respondent, the Appendix E attributes, one answer per stereotype.
    ``data``: the file's new bytes, checked before they are written (:func:`read_csv_checked`)."""
    known = list(stereotype_ids)
    frame = read_csv_checked(path, ["respondent_id", *DEMOGRAPHIC_COLUMNS], data=data)
    answer_columns = [column for column in frame.columns if column not in ("respondent_id", *DEMOGRAPHIC_COLUMNS)]
    unknown = [column for column in answer_columns if column not in known]
    if unknown:
        raise InputError(
            path, 1, f"unknown stereotype id(s) {', '.join(map(_shown, unknown))}: not in the questionnaire"
        )
    unasked = [stereotype for stereotype in known if stereotype not in answer_columns]
    if unasked:
        raise InputError(
            path, 1, f"no answer column for stereotype(s) {', '.join(map(_shown, unasked))} of the questionnaire"
        )
    require_filled(frame, ["respondent_id"], path)
    _require_unique(frame, "respondent_id", path, "respondent")
    answers = frame[known].apply(lambda column: column.str.lower())
    bad = ~answers.isin([*ANSWERS, ""])
    if bad.to_numpy().any():
        index, column = bad.stack().pipe(lambda cells: cells[cells].index[0])
        raise InputError(
            path,
            spreadsheet_row(index),
            f"answer {frame.at[index, column]!r} for {column} (respondent {_shown(frame.at[index, 'respondent_id'])}) "
            f"is not one of {', '.join(ANSWERS)} or empty",
        )
    return pd.concat([frame[["respondent_id", *DEMOGRAPHIC_COLUMNS]], answers], axis=1)


def _check_placeholders(path: Path, row: int, field: str, text: str, required: set[str], allowed: set[str]) -> None:
    found = set(PLACEHOLDER.findall(text))
    extra = sorted(found - allowed)
    missing = sorted(required - found)
    if extra:
        raise InputError(
            path, row, f"{field} has placeholder(s) {', '.join('{' + n + '}' for n in extra)} it may not have"
        )
    if missing:
        raise InputError(path, row, f"{field} is missing placeholder(s) {', '.join('{' + n + '}' for n in missing)}")


TEMPLATE_COLUMNS = [
    "template_id",
    "stereotype_id",
    "ambiguous_fa",
    "disambiguated_fa",
    "disambiguated_counter_biased_fa",
    "mirror_exception",
    "question_negative_fa",
    "question_nonnegative_fa",
    "stereo_entities",
    "nonstereo_entities",
    "lexical_variants",
    "allowed_pairs",
]
PAIR_SEPARATOR = "|"
"""Separates the stereotyped entity, the non-stereotyped entity and the reason of an ``allowed_pairs`` item."""


def _allowed_pairs(value: str, row: pd.Series, path: Path, line: int) -> list[str]:
    """``allowed_pairs`` items ``stereo entity|nonstereo entity|reason``: pairs of the template that the
    confound gate of instantiation keeps although their entities differ in gender or age band (a reason is
    required), normalised as ``stereo|nonstereo|reason``."""
    items = []
    for item in value.split(LIST_SEPARATOR):
        if not item.strip():
            continue
        parts = [part.strip() for part in item.split(PAIR_SEPARATOR)]
        if len(parts) != 3 or not all(parts):
            raise InputError(
                path, line, f"allowed_pairs item {item.strip()!r} is not 'stereo entity|nonstereo entity|reason'"
            )
        stereo, nonstereo = normalize_fa(parts[0]), normalize_fa(parts[1])
        if stereo not in row.stereo_entities or nonstereo not in row.nonstereo_entities:
            raise InputError(
                path, line, f"allowed_pairs item {item.strip()!r} names an entity the template does not have"
            )
        items.append(PAIR_SEPARATOR.join([stereo, nonstereo, parts[2]]))
    return items


def load_templates(path: Path, stereotype_ids: Iterable[str]) -> pd.DataFrame:
    """Ambiguous-context templates with their questions, entities and lexical variants (PBBQ §3.3, §3.4).

    ``{stereo}`` and ``{nonstereo}`` must each appear in the ambiguous context and in any human-written
    disambiguated context; ``{lex}`` appears exactly when the template has lexical variants; questions carry
    no placeholder. Entity lists are non-empty, without repeats, and the two lists share no entity.

    ``disambiguated_fa`` is the continuation of the biased assignment (``{stereo}`` has the negative trait);
    the counter-biased one is the same text with the placeholders exchanged (BBQ's control), so
    ``disambiguated_counter_biased_fa`` stays empty unless ``mirror_exception`` says why the template cannot be
    mirrored, and then both texts are required.
    """
    known = set(stereotype_ids)
    frame = read_csv_checked(path, TEMPLATE_COLUMNS)[TEMPLATE_COLUMNS]
    text_columns = [column for column in TEMPLATE_COLUMNS if column.endswith("_fa")]
    frame[text_columns] = frame[text_columns].map(normalize_fa)  # first: a cell of bidi marks alone is empty
    require_filled(
        frame, ["template_id", "stereotype_id", "ambiguous_fa", "question_negative_fa", "question_nonnegative_fa"], path
    )
    _require_unique(frame, "template_id", path, "template_id")
    for column in ("stereo_entities", "nonstereo_entities", "lexical_variants"):
        frame[column] = frame[column].map(_split_list)
    roles = {"stereo", "nonstereo"}
    allowed_pairs = []
    for index, row in frame.iterrows():
        line = spreadsheet_row(index)
        if row.stereotype_id not in known:
            raise InputError(path, line, f"unknown stereotype id {row.stereotype_id!r}: not in the questionnaire")
        lex = {"lex"} if row.lexical_variants else set()
        _check_placeholders(path, line, "ambiguous_fa", row.ambiguous_fa, roles | lex, roles | lex)
        for field in ("disambiguated_fa", "disambiguated_counter_biased_fa"):
            if row[field]:
                _check_placeholders(path, line, field, row[field], roles, roles | lex)
        if row.mirror_exception and not (row.disambiguated_fa and row.disambiguated_counter_biased_fa):
            raise InputError(
                path, line, "mirror_exception needs both disambiguated_fa and disambiguated_counter_biased_fa"
            )
        if row.disambiguated_counter_biased_fa and not row.mirror_exception:
            raise InputError(
                path,
                line,
                "disambiguated_counter_biased_fa is given without a mirror_exception: leave it empty (the "
                "counter-biased context is disambiguated_fa with {stereo} and {nonstereo} exchanged) or say why "
                "the template cannot be mirrored",
            )
        for field in ("question_negative_fa", "question_nonnegative_fa"):
            _check_placeholders(path, line, field, row[field], set(), set())
        for field in ("stereo_entities", "nonstereo_entities"):
            if not row[field]:
                raise InputError(path, line, f"empty entity list {field}")
            if len(set(row[field])) != len(row[field]):
                raise InputError(path, line, f"{field} repeats an entity")
        shared = sorted(set(row.stereo_entities) & set(row.nonstereo_entities))
        if shared:
            raise InputError(path, line, f"entity {shared[0]!r} is both stereotyped and non-stereotyped")
        if len(set(row.lexical_variants)) != len(row.lexical_variants):
            raise InputError(path, line, "lexical_variants repeats a variant")
        allowed_pairs.append(_allowed_pairs(row.allowed_pairs, row, path, line))
    frame["allowed_pairs"] = allowed_pairs
    return frame.reset_index(drop=True)


def load_ratings(path: Path, template_ids: Iterable[str]) -> pd.DataFrame:
    """Annotators' labels of the targeted group of items per template, and cultural relevance 1–3
    (PakBBQ §3.2). One row per (template, item, annotator)."""
    known = set(template_ids)
    columns = ["template_id", "item_id", "annotator_id", "target_label", "relevance"]
    frame = read_csv_filled(path, columns)
    require_none(
        path,
        ~frame["template_id"].isin(known),
        lambda i: f"unknown template id {frame.at[i, 'template_id']!r}: not in the templates",
    )
    labels = frame["target_label"].str.lower()
    require_none(
        path,
        ~labels.isin(TARGET_LABELS),
        lambda i: f"target_label {frame.at[i, 'target_label']!r} is not one of {', '.join(TARGET_LABELS)}",
    )
    relevance = pd.to_numeric(frame["relevance"], errors="coerce")
    require_none(
        path,
        ~relevance.isin(RELEVANCE_SCALE),
        lambda i: f"relevance {frame.at[i, 'relevance']!r} is outside the scale 1–3",
    )
    _check_annotators(frame, path)
    return frame.assign(target_label=labels, relevance=relevance.astype("int64"))


def _first_row(frame: pd.DataFrame, column: str, value: str) -> int:
    return spreadsheet_row(frame.index[frame[column] == value][0])


def _check_annotators(frame: pd.DataFrame, path: Path) -> None:
    """Ratings Fleiss' kappa can be computed from (PakBBQ §3.2, :mod:`pbbq.tasks.kappa_gate`), checked as the build
    starts: one id per annotator (two spellings that differ only in case are one person rating twice), no item
    rated twice by one annotator, and every item of a template rated by the same number of annotators, at least 2.
    """
    annotator, item, template = frame["annotator_id"], frame["item_id"], frame["template_id"]
    spelling = annotator.groupby(annotator.str.casefold()).transform("first")
    require_none(
        path,
        spelling != annotator,
        lambda i: (
            f"annotator id {_shown(annotator[i])} differs only in case from {_shown(spelling[i])} (row "
            f"{_first_row(frame, 'annotator_id', spelling[i])}): one annotator, one id"
        ),
    )
    require_none(
        path,
        frame.duplicated(["template_id", "item_id", "annotator_id"]),
        lambda i: f"annotator {_shown(annotator[i])} rated item {_shown(item[i])} twice",
    )
    raters = annotator.groupby([template, item]).transform("nunique")
    require_none(
        path,
        raters < 2,
        lambda i: (
            f"item {_shown(item[i])} of template {_shown(template[i])} has one annotator: Fleiss' kappa needs at "
            "least 2 per item"
        ),
    )
    first, first_item = raters.groupby(template).transform("first"), item.groupby(template).transform("first")
    require_none(
        path,
        raters != first,
        lambda i: (
            f"item {_shown(item[i])} of template {_shown(template[i])} has {raters[i]} annotators, its item "
            f"{_shown(first_item[i])} (row {_first_row(frame, 'template_id', template[i])}) {first[i]}: Fleiss' "
            "kappa needs the same number for every item of a template"
        ),
    )


def load_unknown_phrases(path: Path) -> pd.DataFrame:
    """The 'unknown' option's Persian phrasings and the fixed rendering of each in English and in any other
    language whose column the file has (``phrase_ur``, normalised by that language)."""
    raw = read_csv_checked(path, ["phrase_fa", "phrase_en"])
    others = [lang for lang in LANGUAGES.values() if lang.code not in ("fa", "en") and lang.unknown_column in raw]
    frame = raw[["phrase_fa", "phrase_en", *(lang.unknown_column for lang in others)]]
    frame["phrase_fa"] = frame["phrase_fa"].map(normalize_fa)  # first: a cell of bidi marks alone is empty
    for lang in others:
        frame[lang.unknown_column] = frame[lang.unknown_column].map(lang.normalize)
    for index, row in frame.iterrows():
        if not all(row):
            raise InputError(path, spreadsheet_row(index), "empty phrase")
    if frame["phrase_fa"].duplicated().any():
        raise InputError(path, spreadsheet_row(frame["phrase_fa"].duplicated().idxmax()), "duplicate phrase_fa")
    return frame


def load_overrides(path: Path | None, templates: pd.DataFrame) -> pd.DataFrame:
    """Human fixes: one continuation per (template_id, assignment), validated like a template's own.
    No file configured means no overrides; a configured file must exist. A ``counter_biased`` fix is for a
    template with a ``mirror_exception`` only: any other template's counter-biased context is the mirror of
    its biased one."""
    if path is None:
        return pd.DataFrame(columns=OVERRIDE_COLUMNS)
    frame = read_csv_checked(path, OVERRIDE_COLUMNS, allow_empty=True)[OVERRIDE_COLUMNS]
    lexical = templates.set_index("template_id")["lexical_variants"].to_dict()
    exceptions = templates.set_index("template_id")["mirror_exception"].to_dict()
    for index, row in frame.iterrows():
        if row.template_id not in lexical:
            raise InputError(
                path, spreadsheet_row(index), f"unknown template id {row.template_id!r}: not in the templates"
            )
        if row.assignment not in ASSIGNMENTS:
            raise InputError(
                path, spreadsheet_row(index), f"assignment {row.assignment!r} is not one of {', '.join(ASSIGNMENTS)}"
            )
        if row.assignment == "counter_biased" and not exceptions[row.template_id]:
            raise InputError(
                path,
                spreadsheet_row(index),
                f"a counter_biased override for {_shown(row.template_id)}, which declares no mirror_exception: fix the "
                "biased text instead (the counter-biased one is its mirror)",
            )
        roles = {"stereo", "nonstereo"}
        lex = {"lex"} if len(lexical[row.template_id]) else set()
        _check_placeholders(path, spreadsheet_row(index), "text", row.text, roles, roles | lex)
    if frame.duplicated(["template_id", "assignment"]).any():
        index = frame.duplicated(["template_id", "assignment"]).idxmax()
        raise InputError(path, spreadsheet_row(index), "a second override for the same template and assignment")
    return frame.assign(text=frame["text"].map(normalize_fa))


QUESTIONNAIRE = Input("questionnaire", load_questionnaire)
RESPONSES = Input("responses", lambda path, q: load_responses(path, q["stereotype_id"]), needs=(QUESTIONNAIRE,))
TEMPLATES = Input("templates", lambda path, q: load_templates(path, q["stereotype_id"]), needs=(QUESTIONNAIRE,))
RATINGS = Input("ratings", lambda path, templates: load_ratings(path, templates["template_id"]), needs=(TEMPLATES,))
UNKNOWN_PHRASES = Input("unknown_phrases", load_unknown_phrases)
OVERRIDES = Input("disambiguation_overrides", load_overrides, needs=(TEMPLATES,), optional=True)
"""The human-authored inputs of ``[inputs]`` that several stages or other inputs refer to, declared once; an input
of one stage alone is declared in its module."""


def load_inputs(paths: dict[str, Path]) -> dict[str, pd.DataFrame]:
    """The inputs above, each validated against those it refers to (ids must exist)."""
    return load_declared((QUESTIONNAIRE, RESPONSES, TEMPLATES, RATINGS, UNKNOWN_PHRASES, OVERRIDES), paths)
