"""Finding and reading run folders (docs/architecture.md §5): the outputs folder, a run by id or path, the
completed runs in the order they finished, and a run's manifest, reports and tables.

Light on purpose: ``pbbq audit``, ``diff``, ``trace`` and ``browse`` import this, not the flow and its stages.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from ...tasks.core.artifacts import REPO_ROOT, json_text, sha256_bytes, sha256_file
from ...tasks.core.run_folder import mark_incomplete, run_status

CONFIG_STAGES = {"fa": "instantiate", "fa-names": "names", "en": "translate"}
"""The stage whose ``examples`` are each config's, in runs written before the manifest carried the tables a stage
stacks (``Stage.audit_view``)."""


class AuditError(ValueError):
    """A run folder or an example that cannot be found or read."""


def outputs_folder(outputs: str | None) -> Path:
    """Where runs go: the argument, else ``$PBBQ_OUTPUTS``, else ``outputs/`` in the repository."""
    return Path(outputs or os.environ.get("PBBQ_OUTPUTS") or REPO_ROOT / "outputs").resolve()


def run_folder(run: str | Path, outputs: Path) -> Path:
    """A run by id (under ``outputs``) or by path; it must hold a manifest and the stage folders it lists (a
    release holds a copy of its run's manifest, not the run: reading it as one would count nothing and write
    into the release)."""
    for candidate in (Path(run), outputs / run):
        if (candidate / "manifest.json").is_file():
            found = candidate.resolve()
            if not _holds_its_stages(found):
                run_id = manifest(found).get("run_id")
                origin = next((p for p in found.parents[:2] if _is_run(p, run_id)), None)
                where = f"its run folder {origin}" if origin else f"the run {run_id} itself (by id or folder)"
                raise AuditError(
                    f"{found} is a release, not a run: it holds run {run_id}'s manifest but none of the stage "
                    f"folders it lists; pass {where}"
                )
            return found
    raise AuditError(f"no run {str(run)!r}: neither {run} nor {outputs / run} holds a manifest.json")


def _holds_its_stages(folder: Path) -> bool:
    """Whether ``folder`` holds a stage folder its manifest lists (or the manifest lists none yet)."""
    listed = [stage.get("folder") for stage in manifest(folder).get("stages", [])]
    return not listed or any((folder / name).is_dir() for name in listed if name)


def _is_run(folder: Path, run_id: str | None) -> bool:
    """Whether ``folder`` is the run folder of ``run_id``."""
    if not (folder / "manifest.json").is_file():
        return False
    try:
        return manifest(folder).get("run_id") == run_id and _holds_its_stages(folder)
    except AuditError:
        return False


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of a run; a broken one is an error naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AuditError(f"{path}: cannot be read as JSON ({exc})") from exc


def manifest(run: Path) -> dict[str, Any]:
    return read_json(run / "manifest.json")


def _report(run: Path, folder: str) -> dict[str, Any]:
    path = run / folder / "report.json"
    return read_json(path) if path.is_file() else {}


@lru_cache(maxsize=64)
def _stage_names(run: Path, written: int) -> dict[str, str]:
    """Stage name → folder, as the run's manifest declares its stages (``written``: the manifest's mtime, so a
    manifest written again is read again); a stage the manifest does not name, by its report's ``stage``."""
    found = {str(s["name"]): str(s["folder"]) for s in manifest(run).get("stages", []) if "name" in s}
    for folder in stage_folders(run):
        if folder not in found.values():
            found.setdefault(str(_report(run, folder).get("stage", folder)), folder)
    return found


def stage_folder(run: Path, stage: str) -> str:
    """The folder of the run's stage named ``stage`` as it is declared (``Stage.name``: ``survey_filter`` →
    ``02_survey``), so that an audit names no folder; a folder of the run (or a stage it lacks) stays as it is."""
    if not (run / "manifest.json").is_file():
        return stage
    return _stage_names(run, (run / "manifest.json").stat().st_mtime_ns).get(stage, stage)


def table_path(run: Path, name: str) -> str:
    """``<stage>/<table>``, the stage by its declared name or its folder, as a path of the run (no suffix)."""
    stage, _, table = name.partition("/")
    return f"{stage_folder(run, stage)}/{table}" if table else stage_folder(run, stage)


def example_tables(run: Path) -> dict[str, str]:
    """The example table of each config (``config → <folder>/<table>``), in the order the configs are built: as
    the stages that stack them declare it (a stage's ``stacks`` in the manifest)."""
    for declared in manifest(run).get("stages", []):
        if "examples" in declared.get("stacks", {}):
            return {str(label): str(path) for label, path in declared["stacks"]["examples"]}
    return {config: f"{stage_folder(run, stage)}/examples" for config, stage in CONFIG_STAGES.items()}


def is_adaptation(run: Path) -> bool:
    """Whether the run built the adaptation path (BBQ's templates classed by a sheet: its ``adapt`` stage), not
    PBBQ's (crawled posts, a survey, Persian templates)."""
    return any(stage.get("name") == "adapt" for stage in manifest(run).get("stages", []))


def source_config(run: Path) -> str:
    """The config of the examples the run built before any name proxy or translation (``fa``, or ``en`` on the
    adaptation path): the first it stacks."""
    return next(iter(example_tables(run)))


def input_file(run: Path, name: str) -> tuple[Path | None, str]:
    """The file of the run's input ``name`` as its manifest names it (relative to the repository when inside it),
    and whether it is still the one the run read: ``unchanged``, ``changed since the run`` or ``gone`` (None)."""
    entry = manifest(run).get("inputs", {}).get(name) or {}
    if not entry.get("path"):
        return None, "not an input of the run"
    path = Path(entry["path"]) if Path(entry["path"]).is_absolute() else REPO_ROOT / entry["path"]
    if not path.is_file():
        return None, "gone"
    return path, "unchanged" if sha256_file(path) == entry.get("sha256") else "changed since the run"


def stage_report(run: Path, stage: str) -> dict[str, Any]:
    """A stage's ``report.json`` (the stage by its declared name or its folder), or an empty report when the
    stage folder has none (a failed stage)."""
    return _report(run, stage_folder(run, stage))


def read_table(run: Path, name: str, columns: list[str] | None = None) -> pd.DataFrame:
    """``<run>/<name>.parquet`` (:func:`table_path`: ``statistics/funnel`` is the statistics stage's), or an empty
    table when the run has no such table."""
    path = run / f"{table_path(run, name)}.parquet"
    if not path.is_file():
        return pd.DataFrame(columns=columns or [])
    return pd.read_parquet(path, columns=columns)


DROP_LIKE = ("dropped", "unmapped", "review")
"""How drop tables were named in runs written before the manifest carried each stage's declared ``drops``."""
NO_WORDS = ("rows", "rows", "dropped")


def _declared(run: Path, stage: str) -> dict[str, Any]:
    folder = stage_folder(run, stage)
    return next((s for s in manifest(run).get("stages", []) if s.get("folder") == folder), {})


def drop_tables(run: Path, folder: str) -> list[str]:
    """The stage's tables that hold its drops, as its declaration says (``Stage.drops``, in the manifest)."""
    declared = _declared(run, folder)
    if "drops" in declared:
        return list(declared["drops"])
    return sorted(p.stem for p in (run / stage_folder(run, folder)).glob("*.parquet") if p.stem.startswith(DROP_LIKE))


def stage_words(run: Path, folder: str) -> tuple[str, str, str]:
    """What the stage's counts in and out and its drops are, in words (``Stage.words``, in the manifest)."""
    words = _declared(run, folder).get("words")
    return (str(words[0]), str(words[1]), str(words[2])) if words and len(words) == 3 else NO_WORDS


def stage_folders(run: Path) -> list[str]:
    """The stage folders of a run in DAG order: those the manifest lists, and any ``NN_name`` folder on disk
    that it does not (a stage that failed half-way)."""
    listed = [stage["folder"] for stage in manifest(run).get("stages", [])]
    on_disk = [p.name for p in run.iterdir() if p.is_dir() and p.name[:2].isdigit() and p.name[2:3] == "_"]
    return sorted(dict.fromkeys([*listed, *on_disk]))


def _finished_at(run: Path) -> tuple[str, int]:
    written = manifest(run).get("written_at") or ""
    return written, (run / "manifest.json").stat().st_mtime_ns


def run_kind(manifest: dict[str, Any]) -> str:
    """What made a run, from the parameters its manifest records: ``evaluation`` (``pbbq evaluate``, of a
    release), ``crawl`` (``pbbq crawl`` alone: the ``[crawl]`` section only) or ``build``."""
    parameters = manifest.get("parameters") or {}
    if "release" in parameters:
        return "evaluation"
    return "crawl" if set(parameters) == {"crawl"} else "build"


INSTANTIATING = ("instantiate", "adapt_instantiate")
"""The stages that instantiate a build's examples: PBBQ's and the adaptation path's."""


def is_build(manifest: dict[str, Any]) -> bool:
    """A run of the build (not an evaluation or a crawl alone), on either path: one that instantiates examples."""
    return any(stage.get("name", stage.get("stage")) in INSTANTIATING for stage in manifest.get("stages", []))


def completed_runs(outputs: Path) -> list[Path]:
    """Every completed build under ``outputs``, oldest first (by when its manifest was written)."""
    if not outputs.is_dir():
        return []
    runs = []
    for path in outputs.iterdir():
        if path.name.startswith(".") or not (path / "manifest.json").is_file():
            continue
        try:
            found = manifest(path)
            if run_status(found) == "completed" and is_build(found):
                runs.append(path.resolve())
        except AuditError:
            continue  # a run whose manifest is broken is not a completed run
    return sorted(runs, key=_finished_at)


def config_hash(info: dict[str, Any]) -> str:
    """What identifies the configuration a run was built with (its manifest ``info``): the sha256 of every parameter
    it records (the configuration file, each stage's section, the LLM's), each file by its name alone
    (:func:`_unlocated`), so that two runs of one configuration share it, from a copy of the repository or a moved
    folder too, and a PBBQ build and an adaptation in one outputs folder never do."""
    return sha256_bytes(json_text(_unlocated(info.get("parameters") or {})).encode("utf-8"))


def _unlocated(value: Any) -> Any:
    """A manifest's parameters with each file path (a string with a ``/``, no space and no ``://``) cut to its
    file name: where the files lie is not what was configured."""
    if isinstance(value, dict):
        return {key: _unlocated(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unlocated(item) for item in value]
    if isinstance(value, str) and "/" in value and " " not in value and "://" not in value:
        return PurePosixPath(value).name
    return value


def previous_completed(run: Path) -> Path | None:
    """The last completed run of the same configuration (:func:`config_hash`) in ``run``'s outputs folder that
    finished before ``run`` (any such run other than ``run`` when ``run`` has not finished yet), or None."""
    run = run.resolve()
    mine_hash = config_hash(manifest(run))
    others = [
        other for other in completed_runs(run.parent) if other != run and config_hash(manifest(other)) == mine_hash
    ]
    if run_status(manifest(run)) == "completed":
        mine = _finished_at(run)
        others = [other for other in others if _finished_at(other) < mine]
    return others[-1] if others else None


def mark_killed_runs(outputs: Path) -> list[dict[str, Any]]:
    """Every run of ``outputs`` whose build was killed (``running``, its process gone): marked ``incomplete`` in
    its manifest, its leftovers removed. Returns their manifests (the flow marks their Prefect flow runs)."""
    if not outputs.is_dir():
        return []
    return [manifest(run) for run in sorted(outputs.iterdir()) if run.is_dir() and mark_incomplete(run)]
