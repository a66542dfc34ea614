"""What changed between two runs (docs/architecture.md §5): ``pbbq diff RUN_A RUN_B``.

What a curator reads after a scheduled rebuild: the input files whose hash changed, the code and parameters,
the stereotypes, templates and examples added, removed or changed (by their stable, content-derived ids), the
decisions that flipped (survey acceptance, the kappa gate, review), the LLM answers that changed, and the Table 1
and Table 2 cells that moved. One comparison, rendered as text (the terminal), Markdown (the flow's Prefect
artifact) and an HTML section (``audit.html``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...tasks.core.artifacts import sha256_file
from ...tasks.review.report import decision_changes
from .runs import (
    AuditError,
    completed_runs,
    config_hash,
    example_tables,
    manifest,
    previous_completed,
    read_table,
    stage_folders,
    stage_report,
    table_path,
)

PROVENANCE = ("llm_request_ids",)
"""Columns that say how a row was made, not what it is: a new prompt gives new request ids to the same text."""
REVIEW = "review"
SOURCE_COLUMNS = (
    "disambiguated_source",
    "counter_biased_source",
    "disambiguated_biased_source",
    "disambiguated_counter_biased_source",
)
"""Where a template's continuations came from (the last two: a record's older form)."""
SHOWN = 20
"""Ids and lines shown per list by default; the counts are always whole."""
FIELDS_SHOWN = 4
"""Changed fields shown per id by default, their text cut at :data:`VALUE_WIDTH` characters."""
VALUE_WIDTH = 40
MARGIN = 0.02
"""How close to its threshold a decision's figure counts as near it, by default (``pbbq diff --margin``)."""
THRESHOLDS = (
    ("acceptance", "survey_filter/stereotypes", "stereotype_id", "acceptance", ("survey_filter", "threshold")),
    ("kappa", "kappa_gate/templates", "template_id", "kappa", ("kappa_gate", "min_kappa")),
    ("relevance", "kappa_gate/templates", "template_id", "mean_relevance", ("kappa_gate", "min_relevance")),
)
"""The decisions with a threshold (PBBQ §5: acceptance over 0.60; PakBBQ §3.2: Fleiss' kappa at least 0.2 and mean
relevance at least 1.5): the table and column of the figure, and the stage report's parameter that holds the
threshold the run used."""


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _canonical_cell(value: Any) -> str:
    """A cell as a string that is equal exactly when the values are: a nested value as JSON (a list, array or
    mapping; its text starts with a bracket), any other as its ``repr`` (None is 'None' in every column)."""
    if isinstance(value, np.ndarray | list | dict):
        return json.dumps(_plain(value), ensure_ascii=False, sort_keys=True)
    return repr(value)


def _canonical(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Every cell of ``columns`` as its :func:`_canonical_cell`."""
    out = {}
    for column in columns:  # plain objects first: a map over Arrow-backed values builds an array per cell
        out[column] = pd.Series(frame[column].to_numpy(dtype=object), index=frame.index).map(_canonical_cell)
    return pd.DataFrame(out, index=frame.index)


def _arrow_differs(old: pa.Array, new: pa.Array) -> np.ndarray:
    """Per row, whether two Arrow arrays of one type and length hold different values: a null equals a null, a
    float is compared bit for bit (NaN equal to NaN: their canonical strings are), a list or struct differs where
    its length or any of its items does."""
    old_null = old.is_null().to_numpy(zero_copy_only=False)
    new_null = new.is_null().to_numpy(zero_copy_only=False)
    differs = old_null != new_null
    both = ~(old_null | new_null)
    kind = old.type
    if pa.types.is_struct(kind):
        for old_field, new_field in zip(old.flatten(), new.flatten(), strict=True):
            differs |= both & _arrow_differs(old_field, new_field)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        old_len = pc.list_value_length(old).fill_null(0).to_numpy(zero_copy_only=False)
        new_len = pc.list_value_length(new).fill_null(0).to_numpy(zero_copy_only=False)
        differs |= both & (old_len != new_len)
        rows = np.flatnonzero(both & (old_len == new_len) & (old_len > 0))
        if rows.size:  # lists of equal lengths: their items line up once flattened
            items = _arrow_differs(old.take(rows).flatten(), new.take(rows).flatten())
            starts = np.concatenate([[0], np.cumsum(old_len[rows])[:-1]])
            differs[rows] |= np.logical_or.reduceat(items, starts)
    elif pa.types.is_floating(kind):
        old_values = old.fill_null(0).to_numpy(zero_copy_only=False)
        new_values = new.fill_null(0).to_numpy(zero_copy_only=False)
        bits = old_values.view(f"u{old_values.itemsize}") != new_values.view(f"u{new_values.itemsize}")
        differs |= both & bits & ~(np.isnan(old_values) & np.isnan(new_values))
    elif not pa.types.is_null(kind):
        differs |= both & ~pc.equal(old, new).fill_null(False).to_numpy(zero_copy_only=False)
    return differs


def _canonical_differs(old: pd.DataFrame, new: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per row (the frames' common index, in order) and column, whether the values' canonical strings differ."""
    return _canonical(old, columns).ne(_canonical(new, columns))


def _arrow_table_differs(old: pa.Table, new: pa.Table, columns: list[str], index: pd.Index) -> pd.DataFrame:
    """:func:`_canonical_differs` of two tables as read from their files, row for row (``index``: their ids),
    each column of one Arrow type in both: compared as Arrow arrays (:func:`_arrow_differs`), since making a
    string of every cell of a paper-scale release took seconds."""
    differs = {}
    for column in columns:
        arrays = [table.column(column).combine_chunks() for table in (old, new)]
        if pa.types.is_dictionary(arrays[0].type):
            arrays = [array.dictionary_decode() for array in arrays]
        differs[column] = _arrow_differs(*arrays)
    return pd.DataFrame(differs, index=index, columns=columns)


def _first_rows(frame: pd.DataFrame, key: list[str]) -> pd.Series:
    """Each id's first row number in ``frame``, by id (the ``key`` columns' values joined by a space)."""
    first, *rest = (frame[k].astype(str) for k in key)
    ids = first.str.cat(list(rest), sep=" ") if rest else first
    kept = ~ids.duplicated().to_numpy()
    return pd.Series(np.flatnonzero(kept), index=pd.Index(ids.to_numpy()[kept], name=ids.name))


def _keyed(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    if frame.empty or any(k not in frame.columns for k in key):
        return pd.DataFrame()
    rows = _first_rows(frame, key)
    return frame.iloc[rows.to_numpy()].set_axis(rows.index, axis=0)


@dataclass
class IdChanges:
    """Rows added, removed, and changed (same id, other content: per field that differs, its old and new value)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.removed)} removed, {len(self.changed)} changed"


def _compared_columns(a: Iterable[str], b: Iterable[str], key: list[str]) -> list[str]:
    """Every column both tables have, except the key and :data:`PROVENANCE`."""
    theirs = set(b)
    return [c for c in a if c in theirs and c not in key and c not in PROVENANCE]


def _id_changes(
    a_ids: pd.Index, b_ids: pd.Index, differs: pd.DataFrame, old: pd.DataFrame, new: pd.DataFrame
) -> IdChanges:
    """The ids only in ``b`` (added) or only in ``a`` (removed), and per id with a differing column (``differs``)
    the old and new values of each (``old``, ``new``: keyed by id, holding at least those rows)."""
    differs = differs[differs.any(axis=1)]
    changed = {
        str(row_id): {c: (old.at[row_id, c], new.at[row_id, c]) for c in differs.columns if row[c]}
        for row_id, row in differs.iterrows()
    }
    a_ids, b_ids = set(a_ids.tolist()), set(b_ids.tolist())  # not an id at a time from an Arrow-backed index
    return IdChanges(added=sorted(b_ids - a_ids), removed=sorted(a_ids - b_ids), changed=dict(sorted(changed.items())))


def compare(a: pd.DataFrame, b: pd.DataFrame, key: list[str], columns: list[str] | None = None) -> IdChanges:
    """Rows of ``b`` against ``a`` by ``key``, on ``columns`` (default: every column both have, except
    :data:`PROVENANCE`)."""
    a, b = _keyed(a, key), _keyed(b, key)
    if columns is None:
        columns = _compared_columns(a.columns, b.columns, key)
    columns = [c for c in columns if c in a.columns and c in b.columns]
    common = a.index.intersection(b.index, sort=False)
    differs = _canonical_differs(a.loc[common], b.loc[common], columns)
    return _id_changes(a.index, b.index, differs, a, b)


def _rows_of(table: pa.Table, key: str, ids: list[str]) -> pd.DataFrame:
    """The rows of a table read from a parquet file whose ``key`` is one of ``ids``, keyed by it, as
    ``read_parquet`` gives them (only those rows converted)."""
    if not ids:
        return pd.DataFrame()
    return _keyed(table.filter(pc.is_in(table.column(key), value_set=pa.array(ids))).to_pandas(), [key])


SLICED_RUNS = 100
"""Most runs of consecutive rows :func:`_rows_at` takes as slices (more are gathered row by row)."""


def _rows_at(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)``, made of zero-copy slices where ``rows`` run consecutively: the ids two versions of a
    table share mostly keep their order (a changed template moves a few rows), and a gather copied every cell."""
    starts = np.flatnonzero(np.diff(rows, prepend=-2) != 1)
    if not 0 < starts.size <= SLICED_RUNS:
        return table.take(rows)
    lengths = np.diff(starts, append=rows.size)
    return pa.concat_tables([table.slice(rows[start], length) for start, length in zip(starts, lengths, strict=True)])


def compare_files(a: Path, b: Path, key: str, columns: list[str] | None = None) -> IdChanges:
    """:func:`compare` of two parquet files by the column ``key`` (on ``columns``, as it takes them): the changed
    cells found on their Arrow tables, and only the changed rows converted to pandas (the values :func:`compare`
    would show). Only the key and the compared columns are read (not :data:`PROVENANCE`: most of a translated
    example table's bytes). Files whose common columns differ in type are compared by :func:`compare`."""
    schemas = pq.read_schema(a), pq.read_schema(b)
    names = [set(schema.names) for schema in schemas]
    if columns is None:
        compared = _compared_columns(schemas[0].names, schemas[1].names, [key])
    else:
        compared = [c for c in columns if c in names[0] and c in names[1]]
    if any(key not in held for held in names) or any(
        schemas[0].field(c).type != schemas[1].field(c).type for c in [key, *compared]
    ):
        return compare(pd.read_parquet(a), pd.read_parquet(b), [key], columns)
    tables = pq.read_table(a, columns=[key, *compared]), pq.read_table(b, columns=[key, *compared])
    rows = [_first_rows(table.select([key]).to_pandas(), [key]) for table in tables]
    common = rows[0].index.intersection(rows[1].index, sort=False)
    taken = [_rows_at(table.select(compared), row[common].to_numpy()) for table, row in zip(tables, rows, strict=True)]
    differs = _arrow_table_differs(taken[0], taken[1], compared, common)
    ids = differs.index[differs.any(axis=1)].tolist()
    old, new = (_rows_of(table, key, ids) for table in tables)
    return _id_changes(rows[0].index, rows[1].index, differs, old, new)


@dataclass(frozen=True)
class Flip:
    """A decision that went the other way: which gate, for what, before and after."""

    decision: str
    id: str
    before: str
    after: str

    def line(self) -> str:
        return f"{self.decision} {self.id}: {self.before} → {self.after}"


@dataclass(frozen=True)
class RowDelta:
    """A row of Table 1 or Table 2 whose numbers moved: per column, before and after (None: no such row)."""

    table: str
    row: str
    cells: dict[str, tuple[Any, Any]]

    def line(self) -> str:
        moved = ", ".join(f"{c} {_number(a)} → {_number(b)}" for c, (a, b) in self.cells.items())
        return f"{self.row}: {moved}" if self.table == "table1" else f"{self.table} {self.row}: {moved}"


@dataclass(frozen=True)
class NearThreshold:
    """A decision whose figure changed and lies within the margin of the threshold in either run."""

    decision: str
    id: str
    before: Any
    after: Any
    thresholds: tuple[Any, Any]

    def line(self) -> str:
        old, new = ("—" if t is None else f"{t:g}" for t in self.thresholds)
        threshold = new if old == new else f"{old} → {new}"
        return f"{self.decision} {self.id}: {_values(self.before, self.after, None)} (threshold {threshold})"


def _number(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _short(text: Any, width: int | None = 80) -> str:
    text = " ".join(str(text).split())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _values(old: Any, new: Any, width: int | None) -> str:
    """``old → new``: numbers with as many decimals as tell them apart (at least three; three when equal), nested
    values as JSON, text cut at ``width`` characters (None: whole)."""
    old, new = (v.item() if isinstance(v, np.generic) else _plain(v) for v in (old, new))
    if all(isinstance(v, float) or _missing(v) for v in (old, new)) and not all(_missing(v) for v in (old, new)):
        digits = next(
            (d for d in range(3, 10) if _missing(old) or _missing(new) or f"{old:.{d}f}" != f"{new:.{d}f}"), 3
        )
        shown = ["—" if _missing(v) else f"{v:.{digits}f}" for v in (old, new)]
    else:
        shown = [
            _short(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str), width)
            for v in (old, new)
        ]
    return f"{shown[0]} → {shown[1]}"


@dataclass
class StageChanges:
    """The parts of a diff read from the tables of the stages up to the configs' examples: stereotypes,
    templates, examples, flipped decisions, the LLM's answers and figures near a threshold. A build writes every
    one of those stages before diversity and the statistics end, so the flow computes these beside them."""

    stereotypes: IdChanges
    templates: IdChanges
    examples: dict[str, IdChanges]
    decisions: list[Flip]
    llm: dict[str, IdChanges]
    llm_answers: dict[str, list[tuple[str, str, str]]]
    near: list[NearThreshold]


@dataclass
class RunDiff(StageChanges):
    """Run ``b`` against run ``a``: its :class:`StageChanges`, the inputs, code and parameters, Table 1 and 2."""

    a: Path
    b: Path
    inputs: dict[str, tuple[str | None, str | None]]
    code: dict[str, tuple[Any, Any]]
    parameters: dict[str, tuple[Any, Any]]
    table1: list[RowDelta]
    table2: list[RowDelta]
    margin: float = MARGIN

    def __bool__(self) -> bool:
        return any(
            [
                *(self.inputs, self.code, self.parameters, self.stereotypes, self.templates, self.decisions),
                *(self.near, self.table1, self.table2, *self.examples.values(), *self.llm.values()),
            ]
        )

    def sections(self, limit: int | None = SHOWN) -> list[tuple[str, list[str]]]:
        """(title, lines) for every part that changed, lists cut at ``limit`` and each changed row at
        :data:`FIELDS_SHOWN` fields of :data:`VALUE_WIDTH` characters (None: every id, every field, whole)."""

        def ids(label: str, values: list[str]) -> list[str]:
            if not values:
                return []
            shown = values if limit is None else values[:limit]
            more = f" … and {len(values) - len(shown)} more" if len(values) > len(shown) else ""
            return [f"{label} ({len(values)}): {', '.join(shown)}{more}"]

        def capped(lines: list[str]) -> list[str]:
            if limit is None or len(lines) <= limit:
                return lines
            return [*lines[:limit], f"… and {len(lines) - limit} more"]

        def fields(values: dict[str, tuple[Any, Any]]) -> str:
            shown = list(values.items()) if limit is None else list(values.items())[:FIELDS_SHOWN]
            width = None if limit is None else VALUE_WIDTH
            text = ", ".join(f"{name} {_values(old, new, width)}" for name, (old, new) in shown)
            more = len(values) - len(shown)
            return text + (f" … and {more} more field{'s' if more > 1 else ''}" if more else "")

        def changes(found: IdChanges) -> list[str]:
            lines = ids("added", found.added) + ids("removed", found.removed)
            if found.changed:
                lines.append(f"changed ({len(found.changed)}):")
                lines += capped([f"  {i}: {fields(values)}" for i, values in found.changed.items()])
            return lines

        parts: list[tuple[str, list[str]]] = []
        if self.inputs:
            parts.append(
                (
                    "Input files whose hash changed",
                    [f"{name}: {(a or 'none')[:12]} → {(b or 'none')[:12]}" for name, (a, b) in self.inputs.items()],
                )
            )
        code = [f"{k}: {_short(a, 16)} → {_short(b, 16)}" for k, (a, b) in self.code.items()]
        params = [
            f"{k}: {_short(json.dumps(a), 40)} → {_short(json.dumps(b), 40)}" for k, (a, b) in self.parameters.items()
        ]
        if code or params:
            parts.append(("Code and parameters", code + capped(params)))
        for title, found in (("Stereotypes", self.stereotypes), ("Templates", self.templates)):
            if found:
                parts.append((title, [found.summary(), *changes(found)]))
        examples = [(config, found) for config, found in self.examples.items() if found]
        if examples:
            lines = []
            for config, found in examples:
                lines.append(f"{config}: {found.summary()}")
                lines += [f"  {line}" for line in changes(found)]
            parts.append(("Examples", lines))
        if self.decisions:
            parts.append(("Decisions that flipped", capped([flip.line() for flip in self.decisions])))
        if self.near:
            parts.append(
                (f"Decisions within {self.margin:g} of their threshold", capped([n.line() for n in self.near]))
            )
        llm = []
        for kind, found in self.llm.items():
            if not found:
                continue
            llm.append(f"{kind}: {len(found.changed)} answers changed, {len(found.added)} newly asked, "
                       f"{len(found.removed)} no longer asked")  # fmt: skip
            llm += capped([f"  {key}: {_short(a, 60)} → {_short(b, 60)}" for key, a, b in self.llm_answers[kind]])
        if llm:
            parts.append(("LLM answers", llm))
        if self.table1:
            parts.append(("Table 1", capped([delta.line() for delta in self.table1])))
        if self.table2:
            parts.append(("Table 2", capped([delta.line() for delta in self.table2])))
        reviewed = decision_changes(read_table(self.a, "review/decisions"), read_table(self.b, "review/decisions"))
        if reviewed:  # review rounds (docs/review.md): the decisions that changed
            parts.append(("Review decisions", capped(reviewed)))
        return parts

    def title(self) -> str:
        hashes = [config_hash(manifest(run))[:12] for run in (self.a, self.b)]
        apart = f" (two configurations: {hashes[0]}, {hashes[1]})" if hashes[0] != hashes[1] else ""
        return f"Changes from run {self.a.name} to run {self.b.name}{apart}"

    def text(self, limit: int | None = SHOWN) -> str:
        return self._rendered(
            limit, self.title(), ": no change", lambda title, body: ["", f"{title}:", *(f"  {line}" for line in body)]
        )

    def markdown(self, limit: int | None = SHOWN) -> str:
        return self._rendered(
            limit,
            f"## {self.title()}",
            "\n\nNo change.",
            lambda title, body: ["", f"### {title}", "", *(f"{_indent(line)}- {line.strip()}" for line in body)],
        )

    def html(self, limit: int | None = SHOWN) -> str:
        return self._rendered(
            limit, f'<h2 id="changes">{html.escape(self.title())}</h2>', "<p>No change.</p>", _html_section
        )

    def _rendered(
        self, limit: int | None, head: str, no_change: str, section: Callable[[str, list[str]], list[str]]
    ) -> str:
        """``head``, then each section's lines as ``section`` writes them; ``head`` and ``no_change`` when none."""
        sections = self.sections(limit)
        if not sections:
            return head + no_change
        return "\n".join([head, *(line for title, body in sections for line in section(title, body))])


def _html_section(title: str, body: list[str]) -> list[str]:
    items = "".join(
        f'<li dir="auto" style="margin-left:{len(_indent(line))}em">{html.escape(line.strip())}</li>' for line in body
    )
    return [f"<h3>{html.escape(title)}</h3><ul>{items}</ul>"]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for k, v in value.items():
            flat.update(_flatten(v, f"{prefix}{k}."))
        return flat
    return {prefix.rstrip("."): value}


def _changed_values(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _acceptance(row: Mapping[str, Any]) -> str:
    verdict = "accepted" if row["kept"] else "not accepted"
    return f"{verdict} ({row['acceptance']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}])"


def _gate(row: Mapping[str, Any]) -> str:
    verdict = "gated" if row["kept"] else f"stopped: {row['reason']}"
    return f"{verdict} (kappa {_number(row['kappa'])}, relevance {_number(row['mean_relevance'])})"


def _in_review(row: Mapping[str, Any]) -> bool:
    return any(row.get(column) == REVIEW for column in SOURCE_COLUMNS)


def translated_segments(*runs: Path) -> dict[str, str]:
    """The segments table of every translate stage of the runs (``<folder>/segments``, one per target language, the
    first's ``07_translate``), each with its target's text column (``text_en``: the text column without a back-
    translation), as the runs wrote them."""
    found: dict[str, str] = {}
    for run in runs:
        for folder in stage_folders(run):
            path = run / folder / "segments.parquet"
            if f"{folder}/segments" not in found and path.is_file():
                names = pq.read_schema(path).names
                texts = [n for n in names if n.startswith("text_") and f"back_{n.removeprefix('text_')}" not in names]
                found[f"{folder}/segments"] = texts[0]
    return found


def _translation_kind(word: str, number: int, column: str) -> str:
    """How the diff names a translate stage's decisions or answers: ``translation``, a further target's
    ``translation (ur)`` (``number``: its place among the run's translate stages, ``column``: its target's text)."""
    return word if number == 0 else f"{word} ({column.removeprefix('text_')})"


def decisions(a: Path, b: Path) -> list[Flip]:
    """Survey acceptance, the kappa gate, continuations into or out of review, translations flagged or not (every
    target's)."""
    flips: list[Flip] = []
    translations = tuple(
        (_translation_kind("translation review", number, column), table,
         ["segment_id"], lambda r: bool(r["flagged"]),
         lambda r: f"{'flagged' if r['flagged'] else 'kept'} (chrF {_number(r['chrf'])})", ("flagged", "chrf"))
        for number, (table, column) in enumerate(translated_segments(a, b).items())
    )  # fmt: skip
    checks = (
        ("acceptance", "survey_filter/stereotypes", ["stereotype_id"], lambda r: bool(r["kept"]), _acceptance,
         ("kept", "acceptance", "ci_low", "ci_high")),
        ("kappa gate", "kappa_gate/templates", ["template_id"], lambda r: bool(r["kept"]), _gate,
         ("kept", "reason", "kappa", "mean_relevance")),
        ("review", "disambiguate/templates", ["template_id"], _in_review,
         lambda r: "in review" if _in_review(r) else "built", SOURCE_COLUMNS),
        *translations,
    )  # fmt: skip
    for decision, table, key, decided, shown, read in checks:
        if _same_table(a, b, table):
            continue
        before, after = (_keyed(_columns_of(run, table, [*key, *read]), key) for run in (a, b))
        common = before.index.intersection(after.index, sort=False)
        before, after = before.loc[common], after.loc[common]
        moved = _rows_moved(before, after)
        common, before, after = common[moved], before[moved], after[moved]
        rows = zip(common, before.to_dict("records"), after.to_dict("records"), strict=True)
        for row_id, old, new in rows:
            if decided(old) != decided(new):
                flips.append(Flip(decision, str(row_id), shown(old), shown(new)))
    return flips


def _rows_moved(old: pd.DataFrame, new: pd.DataFrame) -> np.ndarray:
    """Per row of two frames of the same ids, whether any value may differ (a row of equal values makes every
    decision the same, so only these rows are decided): every row where the columns differ."""
    if list(old.columns) != list(new.columns):
        return np.ones(len(old), dtype=bool)
    moved = np.zeros(len(old), dtype=bool)
    for column in old.columns:
        both_missing = old[column].isna().to_numpy() & new[column].isna().to_numpy()
        moved |= old[column].ne(new[column]).fillna(True).to_numpy(dtype=bool) & ~both_missing
    return moved


def _llm_answers(a: Path, b: Path) -> tuple[dict[str, IdChanges], dict[str, list[tuple[str, str, str]]]]:
    """The disambiguation attempts (by template, assignment and attempt) and the translated segments (by
    segment id, of every target) whose answer differs, and those asked in one run only."""
    found, texts = {}, {}
    for kind, table, key, column in (
        ("disambiguation", "disambiguate/attempts", ["template_id", "assignment", "attempt"], "answer"),
        *(
            (_translation_kind("translation", number, column), table, ["segment_id"], column)
            for number, (table, column) in enumerate(translated_segments(a, b).items())
        ),
    ):
        found[kind] = compare_tables(a, b, table, key, [column])
        texts[kind] = [(k, *values[column]) for k, values in found[kind].changed.items()]
    return found, texts


def _cells(a: pd.DataFrame, b: pd.DataFrame, table: str, key: list[str]) -> list[RowDelta]:
    """Rows of two versions of a table whose numbers differ (a row missing in one run has empty cells)."""
    if a.empty and b.empty:
        return []
    a, b = (f if set(key) <= set(f.columns) else pd.DataFrame(columns=(b if f is a else a).columns) for f in (a, b))
    frame = a.merge(b, on=key, how="outer", suffixes=("_a", "_b"), sort=False)
    numeric = [c for c in a.columns if c not in key and c in b.columns and pd.api.types.is_numeric_dtype(a[c])]
    whole = {c for c in numeric if pd.api.types.is_integer_dtype(a[c]) or pd.api.types.is_integer_dtype(b[c])}
    deltas = []
    for row in frame.to_dict(orient="records"):
        cells = {}
        for column in numeric:
            old, new = _value(row[f"{column}_a"], column in whole), _value(row[f"{column}_b"], column in whole)
            if old is None and new is None:
                continue
            if old is None or new is None or not np.isclose(old, new, rtol=0, atol=1e-12):
                cells[column] = (old, new)
        if cells:
            deltas.append(RowDelta(table, " / ".join(str(row[k]) for k in key), cells))
    return deltas


def _value(value: Any, whole: bool) -> Any:
    if pd.isna(value):
        return None
    value = value.item() if hasattr(value, "item") else value
    return int(value) if whole else value


def _columns_of(run: Path, table: str, columns: list[str]) -> pd.DataFrame:
    """Those of ``columns`` the run's table has (a decision reads a few columns of a table of text: the segments)."""
    path = run / f"{table_path(run, table)}.parquet"
    if not path.is_file():
        return pd.DataFrame(columns=columns)
    held = set(pq.read_schema(path).names)
    return pd.read_parquet(path, columns=[column for column in columns if column in held])


def _both(a: Path, b: Path, table: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return read_table(a, table), read_table(b, table)


def _table_hash(run: Path, table: str) -> str | None:
    """The table's sha256 as the run's manifest records it, or of its file where the manifest does not list it
    yet (the run the flow is finishing: its manifest is written when it ends)."""
    path = f"{table_path(run, table)}.parquet"
    artifacts = (a for stage in manifest(run).get("stages", []) for a in stage.get("artifacts", []))
    recorded = next((a["sha256"] for a in artifacts if a["path"] == path), None)
    return recorded or (sha256_file(run / path) if (run / path).is_file() else None)


def compare_tables(a: Path, b: Path, table: str, key: list[str], columns: list[str] | None = None) -> IdChanges:
    """:func:`compare` of a table of two runs (on ``columns``, as it takes them; only those and the key are
    read); nothing to read when the manifests give both the same hash."""
    if _same_table(a, b, table):
        return IdChanges()
    paths = [run / f"{table_path(run, table)}.parquet" for run in (a, b)]
    if len(key) == 1 and all(path.is_file() for path in paths):
        return compare_files(paths[0], paths[1], key[0], columns)
    if columns is None:
        return compare(*_both(a, b, table), key)
    return compare(_columns_of(a, table, [*key, *columns]), _columns_of(b, table, [*key, *columns]), key, columns)


def _same_table(a: Path, b: Path, table: str) -> bool:
    """Whether the manifests of the two runs give the table the same hash (the same bytes)."""
    digest = _table_hash(a, table)
    return digest is not None and digest == _table_hash(b, table)


def _threshold(run: Path, folder: str, name: str) -> Any:
    return stage_report(run, folder).get("parameters", {}).get(name)


def _within(figure: float | None, threshold: Any, margin: float) -> bool:
    """``|figure - threshold| <= margin``, a difference on the margin up to floating-point error counting as on it
    (0.58 is within 0.02 of 0.6)."""
    return figure is not None and threshold is not None and abs(figure - threshold) - margin <= 1e-9


def near_thresholds(a: Path, b: Path, margin: float = MARGIN) -> list[NearThreshold]:
    """Every decision (:data:`THRESHOLDS`) whose figure or threshold changed from run ``a`` to run ``b`` and whose
    figure lies within ``margin`` of the threshold in either run (each run's own threshold, from its report)."""
    found = []
    for decision, table, key, column, (folder, name) in THRESHOLDS:
        thresholds = (_threshold(a, folder, name), _threshold(b, folder, name))
        if _same_table(a, b, table) and thresholds[0] == thresholds[1]:
            continue
        before, after = (_keyed(frame, [key]) for frame in _both(a, b, table))
        for row_id in after.index.union(before.index):
            figure_before, figure_after = (
                None if row_id not in frame.index or _missing(v := frame.at[row_id, column]) else float(v)
                for frame in (before, after)
            )
            if figure_before == figure_after and thresholds[0] == thresholds[1]:
                continue
            if any(_within(f, t, margin) for f, t in zip((figure_before, figure_after), thresholds, strict=True)):
                found.append(NearThreshold(decision, str(row_id), figure_before, figure_after, thresholds))
    return found


def example_changes(a: Path, b: Path, tables: Mapping[str, str] | None = None) -> dict[str, IdChanges]:
    """Per config, its examples in run ``b`` against run ``a``, by example id; ``tables``: each config's example
    table (``<folder>/<table>``), by default as ``b``'s manifest declares them (:func:`example_tables`)."""
    tables = example_tables(b) if tables is None else tables
    return {config: compare_tables(a, b, table, ["example_id"]) for config, table in tables.items()}


STAGES_COMPARED = ("survey_filter", "kappa_gate", "disambiguate")
"""The stages (by declared name) whose tables :func:`stage_changes` reads besides the configs' examples and every
translate stage's segments (:func:`translated_segments`)."""


def stage_changes(a: Path, b: Path, margin: float = MARGIN, examples: Mapping[str, str] | None = None) -> StageChanges:
    """:class:`StageChanges` of run ``b`` against run ``a`` (``examples``: as :func:`example_changes` takes it)."""
    templates = compare_tables(a, b, "kappa_gate/templates", ["template_id"])
    continuations = compare_tables(a, b, "disambiguate/templates", ["template_id"])
    for template_id, values in continuations.changed.items():  # a continuation that changed changes the template
        own = {f: v for f, v in values.items() if f not in templates.changed.get(template_id, {})}
        if own and template_id not in templates.added + templates.removed:
            templates.changed[template_id] = {**templates.changed.get(template_id, {}), **own}
    templates.changed = dict(sorted(templates.changed.items()))
    llm, llm_answers = _llm_answers(a, b)
    return StageChanges(
        stereotypes=compare_tables(a, b, "survey_filter/stereotypes", ["stereotype_id"]),
        templates=templates,
        examples=example_changes(a, b, examples),
        decisions=decisions(a, b),
        llm=llm,
        llm_answers=llm_answers,
        near=near_thresholds(a, b, margin),
    )


def diff_runs(a: Path, b: Path, margin: float = MARGIN, stages: StageChanges | None = None) -> RunDiff:
    """Run ``b`` against run ``a``; decisions within ``margin`` of their threshold are listed as near it.
    ``stages``: :func:`stage_changes` of the two runs (with that margin), when computed already."""
    ma, mb = manifest(a), manifest(b)
    inputs_a = {k: v.get("sha256") for k, v in ma.get("inputs", {}).items()}
    inputs_b = {k: v.get("sha256") for k, v in mb.get("inputs", {}).items()}
    code_keys = ("git_commit", "source_sha256")
    code = {
        k: (ma.get("code_version", {}).get(k), mb.get("code_version", {}).get(k))
        for k in code_keys
        if ma.get("code_version", {}).get(k) != mb.get("code_version", {}).get(k)
    }
    table2 = []
    for name in ("table2", "table2_instances"):
        ta, tb = _both(a, b, f"diversity/{name}")
        key = [c for c in ("config", "category") if c in ta.columns and c in tb.columns]
        if key:
            table2 += _cells(ta, tb, name, key)
    return RunDiff(
        a=a,
        b=b,
        inputs=_changed_values(inputs_a, inputs_b),
        code=code,
        parameters=_changed_values(_flatten(ma.get("parameters", {})), _flatten(mb.get("parameters", {}))),
        **vars(stage_changes(a, b, margin) if stages is None else stages),
        table1=_cells(*_both(a, b, "statistics/table1"), "table1", ["config", "category"]),
        table2=table2,
        margin=margin,
    )


def default_pair(outputs: Path) -> tuple[Path, Path]:
    """The last two completed runs of an outputs folder, older first."""
    runs = completed_runs(outputs)
    if len(runs) < 2:
        raise AuditError(f"{outputs} holds {len(runs)} completed run(s); pbbq diff needs two (or name them)")
    return runs[-2], runs[-1]


def no_previous_run(run: Path) -> str:
    """That ``run`` has no earlier completed run of its configuration to compare with, naming its config hash."""
    return (
        f"No earlier completed run of this configuration (config hash {config_hash(manifest(run))[:12]}) in "
        f"{run.parent}"
    )


def changes_since_previous(
    run: Path, limit: int | None = SHOWN, stages: tuple[Path, StageChanges] | None = None
) -> str:
    """Markdown of ``run`` against the previous completed run of its configuration in its outputs folder (the
    flow's artifact).
    ``stages``: a run and :func:`stage_changes` against it, computed while the build ran: used when that run is
    still the previous one."""
    previous = previous_completed(run)
    if previous is None:
        return f"## Changes\n\n{no_previous_run(run)}: nothing to compare with."
    known = stages[1] if stages is not None and stages[0] == previous else None
    return diff_runs(previous, run, stages=known).markdown(limit)


def example_status(run: Path, rows: pd.DataFrame, table: str) -> dict[str, Any]:
    """Whether an example (one row of ``table``: its config's examples, or a stage's drop table) is new, changed
    or unchanged in that table since the previous completed run, and which fields changed."""
    previous = previous_completed(run)
    if previous is None:
        return {"previous_run": None, "status": "no earlier completed run of its configuration to compare with"}
    row = rows.iloc[0]
    before = read_table(previous, table)
    before = before[before["example_id"] == row["example_id"]] if "example_id" in before.columns else before
    if before.empty:
        return {"previous_run": previous.name, "status": "new"}
    found = compare(before, rows.iloc[:1], ["example_id"])
    fields = list(found.changed.get(str(row["example_id"]), []))
    return {"previous_run": previous.name, "status": "changed" if fields else "unchanged", "changed_fields": fields}
