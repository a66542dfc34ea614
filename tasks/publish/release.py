"""A release's data and its folder on disk (docs/architecture.md §1, publish).

The release folder (``<out_dir>/hub/``) is what the Hub repository will hold:

- ``data/<config>/test-0000i-of-0000N.parquet`` per config (``fa``, ``fa-names``, ``en``, ...), rows sorted by
  ``example_id``, split into N files of at most ``shard_rows`` rows. The schema is explicit and is
  :data:`RELEASE`: every column of the example table (``pbbq.tasks.core.schemas.EXAMPLE``), typed, ``answer_info`` a
  struct, categories plain strings. No column is held back: ``llm_request_ids`` and ``source_example_id`` are
  provenance that the shipped transcript and the other configs resolve, and ``stereo_entity`` /
  ``nonstereo_entity`` let a user analyse by group without parsing text.
- ``lm_eval/``: the release's lm-evaluation-harness task (:mod:`pbbq.tasks.evaluation.lm_eval_task`), a YAML per config
  and category and the ``utils.py`` they name, so ``lm_eval --include_path <release>/lm_eval --tasks pbbq_fa`` scores
  a model on this folder as the PBBQ paper did (§4).
- ``manifest.json`` (the run's manifest) and ``transcript.jsonl`` (the recorded LLM answers), when given.
- ``README.md``, the dataset card (:mod:`pbbq.tasks.publish.dataset_card`).

The same inputs give the same bytes (parquet as :func:`pbbq.tasks.core.artifacts.parquet_bytes` writes it, without the
pandas metadata; no timestamp in the card). The folder is written under a temporary name and swapped in, so a
killed run never leaves a half-written release.

The data part is made one config at a time (:func:`data_part` over the lazy :func:`split_configs`, a config's rows
a slice of the stacked examples when they are one block), and each config one shard at a time: its rows are put in
example_id order by position, and each shard's rows are converted to Arrow and written as they come (its columns
of Python objects converted once, whole), so that beside the stacked examples the data part holds one shard's
table and one config's object columns as Arrow, never a config's whole table; the shards are the bytes the whole
config's table, sorted and cut, gives (one row group each). At BharatBBQ's size (ten configs, 362,736 rows) the peak
is one config's, not every config's (``benchmarks/release_memory.py`` measures it).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..core.artifacts import FILE_MODE, atomic_write_bytes, parquet_bytes, sha256_bytes, sha256_file
from ..core.schemas import EXAMPLE, example_configs, to_arrow
from ..core.stage import rows_of
from ..evaluation.lm_eval_task import config_key, task_files
from .dataset_card import STAND_IN_NOTE, CardParams, ConfigInfo, card_with_note, render_card

RELEASE: pa.Schema = EXAMPLE
"""The schema of every published parquet file: the example table as it is (see the module docstring)."""

RELEASE_FILES = pa.schema([("path", pa.string()), ("sha256", pa.string()), ("bytes", pa.int64()), ("rows", pa.int64())])
SHARD_ROWS = 100_000
CONFIG_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
TASK_FOLDER = "lm_eval"
SYNTHETIC_NOTE = (
    "> **SYNTHETIC — NOT PBBQ DATA.** This build was made from synthetic inputs (`pbbq synth`): placeholder\n"
    "> stereotypes, survey answers, templates, ratings and LLM answers. Its examples say nothing about any group\n"
    "> or model; do not publish, cite or evaluate with it.\n"
)


class ReleaseError(ValueError):
    """The tables cannot be made into a release (no config, a bad config name, an empty config, duplicate ids)."""


@dataclass(frozen=True)
class ReleaseFile:
    path: str
    sha256: str
    bytes: int
    rows: int | None


@dataclass(frozen=True)
class ReleaseFolder:
    """A written release: its folder (the future repository root), its files and the rows per config."""

    path: Path
    files: tuple[ReleaseFile, ...]
    configs: dict[str, int]
    manifest_sha256: str | None

    def file_table(self) -> pd.DataFrame:
        """One row per file (path, sha256, bytes, rows), for the stage's table and the audit."""
        return file_table(self.files)


def file_table(files: Sequence[ReleaseFile]) -> pd.DataFrame:
    """One row per release file (path, sha256, bytes, rows): :data:`RELEASE_FILES`."""
    return pd.DataFrame([asdict(file) for file in files], columns=RELEASE_FILES.names).astype({"rows": "Int64"})


class ConfigFrames(Mapping[str, pd.DataFrame]):
    """The examples of each published config, by name, each frame cut from the stacked examples only when asked for:
    a reader going through the configs one by one holds one config's frame at a time, not a copy of every one."""

    def __init__(self, examples: pd.DataFrame, configs: Sequence[str] = ()) -> None:
        names = example_configs(examples)
        self._examples = examples
        self._rows: dict[str, Sequence[int]] = {
            str(name): rows for name, rows in names.groupby(names, sort=False).indices.items()
        }
        self._order = (*configs, *sorted(set(self._rows) - set(configs), key=config_key))

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._order:
            raise KeyError(name)
        return rows_of(self._examples, self._rows.get(name, [])).reset_index(drop=True)

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


def split_configs(examples: pd.DataFrame, configs: Sequence[str] = ()) -> ConfigFrames:
    """The examples of each published config (``fa``, ``fa-names``, ``en``, ...), by language and variant, in the
    order of ``configs`` (the pipeline's), any other after them (:func:`config_key`); each of ``configs`` is there
    even with no examples (a stage that kept nothing gives an empty config)."""
    return ConfigFrames(examples, configs)


def _example_id_order(name: str, frame: pd.DataFrame) -> np.ndarray:
    """The positions of the config's rows in example_id order; a config name that is no config name, or an
    example_id held twice, is refused."""
    if not CONFIG_NAME.fullmatch(name):
        raise ReleaseError(f"config name {name!r}: use lowercase letters, digits and single dashes")
    ids = frame["example_id"]
    duplicated = ids[ids.duplicated()]
    if not duplicated.empty:
        raise ReleaseError(f"config {name!r}: duplicate example_id(s) {sorted(duplicated.unique())[:5]}")
    return pc.sort_indices(pa.array(ids, pa.string())).to_numpy()


def _release_table(name: str, frame: pd.DataFrame, schema: pa.Schema = RELEASE) -> pa.Table:
    """``frame``'s rows as an Arrow table of ``schema`` (the release's, or some of its columns), no pandas
    metadata."""
    return to_arrow(frame, schema, f"release config {name}").replace_schema_metadata(None)


def _plain_size(name: str, frame: pd.DataFrame, objects: Sequence[str]) -> int:
    """The Arrow bytes of the columns of ``frame`` not in ``objects`` as the release converts its rows taken in
    example_id order (a column converted from Python objects, in ``objects``, has the same bytes in any order).
    Each column is taken and converted on its own, in the frame's order: a taken column's size is the same in any
    order, and this one reads it front to back (its array taken: a frame's take of every row in order would copy
    it as it is, not as taken)."""
    rows = np.arange(len(frame))
    return sum(
        _release_table(name, pd.DataFrame({field.name: frame[field.name].array.take(rows)}), pa.schema([field])).nbytes
        for field in RELEASE
        if field.name not in objects
    )


def _release_columns(names: Sequence[str]) -> pa.Schema:
    """The release schema's fields of the columns ``names``, in its order."""
    return pa.schema([field for field in RELEASE if field.name in names])


class _SortedConfig(NamedTuple):
    """A config's rows in example_id order (``order``: their positions in ``frame``), converted as its shards need
    them: its columns of Python objects (option dicts, lists) converted once, whole, in the frame's order (the
    objects read as they lie in memory: twice as fast as in example_id order), each shard's taken from them in
    Arrow; the other columns taken and converted a shard at a time. ``size``: the card's ``num_bytes``."""

    name: str
    frame: pd.DataFrame
    order: np.ndarray
    objects: dict[str, pa.ChunkedArray]
    size: int

    @classmethod
    def of(cls, name: str, frame: pd.DataFrame) -> _SortedConfig:
        """The config ``name`` of the rows ``frame``: its size measured first, then its object columns converted,
        so that the column measured last is never held beside them."""
        order = _example_id_order(name, frame)
        _release_table(name, frame.iloc[:0])  # its columns are the release's, or one line says which are not
        names = [column for column in RELEASE.names if frame[column].dtype == object] if len(order) else []
        plain = _plain_size(name, frame, names) if len(order) else 0
        converted = _release_table(name, frame[names], _release_columns(names))
        objects = {column: converted[column] for column in names}
        return cls(name, frame, order, objects, plain + sum(column.nbytes for column in objects.values()))

    def shard(self, start: int, stop: int) -> pa.Table:
        """Its rows ``start`` to ``stop`` in example_id order, as a table of the release schema."""
        if start == stop:
            return RELEASE.empty_table()
        rows = self.order[start:stop]
        plain = [column for column in RELEASE.names if column not in self.objects]
        table = _release_table(self.name, self.frame[plain].take(rows), _release_columns(plain))
        columns = [
            self.objects[field.name].take(rows) if field.name in self.objects else table[field.name]
            for field in RELEASE
        ]
        return pa.Table.from_arrays(columns, schema=RELEASE)


def _shard_bounds(rows: int, shard_rows: int) -> list[tuple[int, int]]:
    """``rows`` rows cut into the fewest runs of at most ``shard_rows`` rows, of (nearly) equal size, as (start,
    stop); no rows is one empty shard, so that its config loads (with no rows)."""
    count = max(1, math.ceil(rows / shard_rows))
    size = math.ceil(rows / count)
    return [(index * size, min(rows, (index + 1) * size)) for index in range(count)]


def _swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` by the complete folder ``staging``: at every moment one complete version is there."""
    if target.exists():
        retired = target.with_name(f".{target.name}-old-{uuid.uuid4().hex[:8]}")
        os.replace(target, retired)
        os.replace(staging, target)
        shutil.rmtree(retired)
    else:
        os.replace(staging, target)


@dataclass(frozen=True)
class ReleaseData:
    """What of a release depends only on the example tables: its data files (the parquet shards of every config and
    the lm-eval task) by path, listed in ``files``, and each config as the card describes it."""

    data: dict[str, bytes]
    files: tuple[ReleaseFile, ...]
    infos: tuple[ConfigInfo, ...]


@dataclass(frozen=True)
class _ConfigPart:
    """One config's share of a release: its shards (bytes by path, and as files), its card entry and categories."""

    data: dict[str, bytes]
    files: tuple[ReleaseFile, ...]
    info: ConfigInfo
    categories: list[str]


def _config_part(name: str, frame: pd.DataFrame, shard_rows: int) -> _ConfigPart:
    """The shards of one config and what the card and the lm-eval task say of it. Its rows are put in example_id
    order by position and converted a shard at a time (:class:`_SortedConfig`): beside ``frame`` this call holds
    one shard's table and the config's columns of Python objects as Arrow, never the config's whole table (let
    alone two, converted and sorted). Its frame lives only in this call, so that :func:`data_part` holds one
    config's at a time."""
    config = _SortedConfig.of(name, frame)
    bounds = _shard_bounds(len(frame), shard_rows)
    data: dict[str, bytes] = {}
    files: list[ReleaseFile] = []
    for index, (start, stop) in enumerate(bounds):
        path = f"data/{name}/test-{index:05d}-of-{len(bounds):05d}.parquet"
        data[path] = content = parquet_bytes(config.shard(start, stop))
        files.append(ReleaseFile(path, sha256_bytes(content), len(content), stop - start))
    info = ConfigInfo(
        name=name,
        rows=len(frame),
        data_files=f"data/{name}/test-*.parquet",
        langs=tuple(sorted(frame["lang"].unique())),
        variants=tuple(sorted(frame["variant"].unique())),
        num_bytes=config.size,
        download_size=sum(file.bytes for file in files),
    )
    return _ConfigPart(data, tuple(files), info, sorted(frame["category"].unique()))


def data_part(configs: Mapping[str, pd.DataFrame], shard_rows: int = SHARD_ROWS) -> ReleaseData:
    """The data part of a release: each config's rows as parquet shards of at most ``shard_rows`` rows
    (``data/<config>/test-…``) and the lm-eval task of the configs with examples (``lm_eval/``; no build id in it).
    Each config's frame is taken from ``configs`` once, in its order (:func:`split_configs`: the pipeline's), and
    freed with its table before the next is taken."""
    if not configs:
        raise ReleaseError("nothing to publish: no config has examples")
    if shard_rows < 1:
        raise ReleaseError(f"shard_rows must be at least 1, not {shard_rows}")
    data: dict[str, bytes] = {}
    files: list[ReleaseFile] = []
    infos: list[ConfigInfo] = []
    categories: dict[str, list[str]] = {}
    for name in configs:
        part = _config_part(name, configs[name], shard_rows)
        data |= part.data
        files += part.files
        infos.append(part.info)
        if part.info.rows:  # an empty config has nothing to score: no task
            categories[name] = part.categories
    for name, task in (task_files(categories) if categories else {}).items():
        path = f"{TASK_FOLDER}/{name}"
        data[path] = task
        files.append(ReleaseFile(path, sha256_bytes(task), len(task), None))
    return ReleaseData(data, tuple(files), tuple(infos))


def link_or_copy(source: Path, target: Path) -> None:
    """Put the file ``source`` at ``target`` by reference: a hard link, or a copy on another file system."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
        os.chmod(target, FILE_MODE)


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """What a release folder takes from its run besides the data part: the tables its card reports and the run's
    manifest and transcript (each placed by reference; ``transcript_sha256``: the transcript's hash when the run
    has it, else it is read)."""

    table1: pd.DataFrame
    table2: pd.DataFrame | None
    funnel: pd.DataFrame
    manifest_path: Path | None
    transcript_path: Path | None
    proxy_strength: pd.DataFrame | None = None
    transcript_sha256: str | None = None


def write_release(
    out_dir: Path,
    files: Sequence[ReleaseFile],
    infos: Sequence[ConfigInfo],
    place: Callable[[str, Path], None],
    run: RunInputs,
    *,
    card: CardParams,
    synthetic: bool = False,
    stand_in: bool = False,
) -> ReleaseFolder:
    """Write the release folder ``out_dir/hub/`` from its data part (``files``, each put at its path by ``place``,
    and ``infos``, :func:`data_part`), the run's tables, manifest and transcript (``run``) and the dataset card,
    under a temporary name swapped in whole."""
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = out_dir / f".hub-{uuid.uuid4().hex[:12]}"
    staging.mkdir()  # under the umask like the files in it (mkdtemp's 0700 would keep the release private)
    try:
        listed = list(files)
        for file in files:
            place(file.path, staging / file.path)
        manifest_sha256 = None
        known = {"transcript.jsonl": run.transcript_sha256}
        for source, path in ((run.manifest_path, "manifest.json"), (run.transcript_path, "transcript.jsonl")):
            if source is not None:
                link_or_copy(source, staging / path)
                digest = known.get(path) or sha256_file(staging / path)
                listed.append(ReleaseFile(path, digest, (staging / path).stat().st_size, None))
                if path == "manifest.json":
                    manifest_sha256 = digest
        readme = render_card(
            list(infos),
            RELEASE,
            table1=run.table1,
            table2=run.table2,
            funnel=run.funnel,
            manifest_sha256=manifest_sha256,
            has_transcript=run.transcript_path is not None,
            card=card,
            proxy_strength=run.proxy_strength,
        )
        text = synthetic_card(str(readme)) if synthetic else str(readme)
        data = (card_with_note(text, STAND_IN_NOTE) if stand_in else text).encode("utf-8")
        atomic_write_bytes(staging / "README.md", data)
        listed.append(ReleaseFile("README.md", sha256_bytes(data), len(data), None))
        _swap_in(staging, out_dir / "hub")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ReleaseFolder(
        path=out_dir / "hub",
        files=tuple(sorted(listed, key=lambda file: file.path)),
        configs={info.name: info.rows for info in infos},
        manifest_sha256=manifest_sha256,
    )


def synthetic_card(card: str) -> str:
    """The dataset card with :data:`SYNTHETIC_NOTE` first after its YAML header."""
    return card_with_note(card, SYNTHETIC_NOTE)
