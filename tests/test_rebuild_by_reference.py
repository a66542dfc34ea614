"""A rebuild with nothing changed takes every cached stage's files from the artifact store (a checked copy, never a
hard link), and gives a run that differs from the cold build's only where a run must: its id, its times, and
whether each stage was cached (docs/architecture.md §5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pbbq.flows.audit.browse import DB_NAME
from pbbq.tasks.core.artifacts import sha256_file
from pbbq.tasks.publish import BUILD_NAMED_FILES

PER_RUN = {"run_id", "written_at", "process", "cached", "fetch", "manifest_path"}
"""What the manifest and a stage's report say of the run itself rather than of what it built (the crawl's fetch
is this run's, never cached; publish reads the run's own manifest)."""


def _without_run(value: Any, first: str, second: str) -> Any:
    """``value`` (a parsed manifest or report) with the run's own fields left out, the hash of a file that says
    whether its stage was cached or names the build left out, and the second run's id written as the first's (the
    release's folder and link name the run)."""
    if isinstance(value, dict):
        if _per_run_file(str(value.get("path", ""))):
            value = {k: v for k, v in value.items() if k != "sha256"}
        return {k: _without_run(v, first, second) for k, v in value.items() if k not in PER_RUN}
    if isinstance(value, list):
        return [_without_run(v, first, second) for v in value]
    return value.replace(f"/{second}/", f"/{first}/") if isinstance(value, str) else value


def _names_the_build(path: str) -> bool:
    """The release's files that carry the build's id, and publish's report, which names them and the run's folder."""
    return path.startswith("10_publish/") and Path(path).name in (*BUILD_NAMED_FILES, "report.json")


def _per_run_file(path: str) -> bool:
    return path.endswith("report.json") or path == "timings.json" or _names_the_build(path)


AFTERWARDS = (DB_NAME, "audit.html")
"""What commands write into a run after its build (``pbbq browse``'s database; ``pbbq audit`` and ``pbbq diff``
write the audit page again, with what they found): other tests run them on these shared builds."""


def _build_files(run: Path) -> list[str]:
    """The files the build wrote in a run folder, not those a later command writes (:data:`AFTERWARDS`)."""
    return sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file() and p.name not in AFTERWARDS)


def test_a_rebuild_copies_every_cached_file_and_equals_the_cold_build(two_builds: tuple[Path, Path]) -> None:
    first, second = two_builds
    files = _build_files(first)
    assert files == _build_files(second)
    compared = 0
    for path in files:
        if path == "timings.json" or _names_the_build(path):
            continue
        if path.endswith(".json"):
            a, b = (json.loads((run / path).read_text(encoding="utf-8")) for run in (first, second))
            assert _without_run(a, first.name, second.name) == _without_run(b, first.name, second.name), path
        else:
            assert sha256_file(first / path) == sha256_file(second / path), path
        compared += 1
    assert compared > 100
    manifest = json.loads((second / "manifest.json").read_text(encoding="utf-8"))
    cached = [a["path"] for s in manifest["stages"] if s["cached"] for a in s["artifacts"]]
    linked = [path for path in cached if not path.endswith("report.json")]
    assert len(linked) > 30
    for path in linked:  # a copy of the store's file, never a hard link: an edit in one run reaches no other
        assert (second / path).stat().st_ino != (first / path).stat().st_ino, path
        assert (second / path).stat().st_nlink == 1 or path.startswith("10_data/"), path  # linked into hub/ only
