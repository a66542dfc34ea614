"""Whether a run folder or a release is exactly what its manifest says (docs/runs.md, "Verifying a run"): every
file the manifest lists is there with its sha256, and no file is there that it does not list.

- A **run** (``<run>/manifest.json``): its stages' files and its run-level files (the transcript, the release
  folder, ``timings.json``), each by path and sha256; a file whose size the run's ``release_files`` table records
  (a release's data) is named a ``size`` mismatch when its size differs. The release's copy of the manifest must
  list the same files for the stages it lists (a replaced run manifest shows there).
- A **release** (``data/``, ``lm_eval/``, ``manifest.json``, ``README.md``): its data and task files against the
  files its manifest lists for the release data stage (``<data stage>/data/…``, ``<data stage>/lm_eval/…``), its
  transcript against the manifest's, and the manifest against the sha256 its dataset card names. The card itself
  is listed only in the run's manifest: ``pbbq verify RUN`` checks it, a release alone cannot.

Nothing here trusts a file it has not hashed; a mismatch is a :class:`Mismatch` naming the file and what differs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .artifacts import sha256_file

MANIFEST = "manifest.json"
RELEASE_DATA_FOLDERS = ("data", "lm_eval")
"""The folders of a release whose files its data stage writes (``<data stage>/data/…`` in the manifest)."""
CARD = "README.md"
CARD_MANIFEST_SHA256 = re.compile(r"sha256 `([0-9a-f]{64})`")
"""How the dataset card names its manifest's sha256 (:mod:`pbbq.tasks.publish.dataset_card`)."""
RELEASE_FILES = "release_files.parquet"
"""A stage's table of release files with their sizes (path, sha256, bytes, rows)."""


class VerificationError(ValueError):
    """A folder cannot be verified at all: no manifest, or one that is not JSON."""


@dataclass(frozen=True)
class Mismatch:
    """One file that is not what the manifest says: ``kind`` is ``missing``, ``extra`` (not in the manifest),
    ``size`` or ``sha256``."""

    path: str
    kind: str
    detail: str

    def line(self) -> str:
        return f"{self.path}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class Verification:
    """What :func:`verify_folder` found: the folder, whether it is a run or a release, how many files it checked,
    and every mismatch."""

    folder: Path
    kind: str
    checked: int
    mismatches: tuple[Mismatch, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def text(self) -> str:
        """One line per mismatch, or one saying every file matches."""
        if self.ok:
            return f"{self.folder}: {self.checked} files match its manifest ({self.kind})"
        lines = [f"{self.folder}: {len(self.mismatches)} file(s) differ from its manifest ({self.kind}):"]
        return "\n".join([*lines, *(f"  {mismatch.line()}" for mismatch in self.mismatches)])


def read_manifest(folder: Path) -> dict[str, Any]:
    """``folder``'s manifest, or :class:`VerificationError` naming what is wrong with it."""
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise VerificationError(f"{path}: no manifest, so nothing in {folder} can be verified") from None
    except (OSError, ValueError) as exc:
        raise VerificationError(f"{path}: not a readable JSON manifest ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("stages"), list):
        raise VerificationError(f"{path}: not a PBBQ manifest (no list of stages)")
    return manifest


def _listed(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Every file a manifest lists, by path: its stages' artifacts and its run-level files."""
    files = {str(a["path"]): str(a["sha256"]) for stage in manifest["stages"] for a in stage.get("artifacts", [])}
    return files | {str(f["path"]): str(f["sha256"]) for f in manifest.get("files", [])}


def _present(folder: Path, ignored: Collection[str]) -> set[str]:
    return {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and path.relative_to(folder).as_posix() not in ignored
    }


def compare_files(
    folder: Path, expected: Mapping[str, str], present: set[str], sizes: Mapping[str, int] | None = None
) -> list[Mismatch]:
    """Each ``expected`` file (path → sha256) against the file at its path under ``folder`` (hashed; ``sizes``:
    known sizes by sha256, checked first), and each ``present`` file ``expected`` lacks."""
    found: list[Mismatch] = []
    for path, digest in sorted(expected.items()):
        file = folder / path
        if path not in present:
            found.append(Mismatch(path, "missing", f"listed with sha256 {digest}, not in the folder"))
            continue
        size, wanted = file.stat().st_size, (sizes or {}).get(digest)
        if wanted is not None and size != wanted:
            found.append(Mismatch(path, "size", f"{size} bytes, the manifest's file has {wanted}"))
            continue
        actual = sha256_file(file)
        if actual != digest:
            found.append(Mismatch(path, "sha256", f"{actual} ({size} bytes), the manifest lists {digest}"))
    found += [Mismatch(path, "extra", "not in the manifest") for path in sorted(present - expected.keys())]
    return found


def _release_sizes(folder: Path, manifest: Mapping[str, Any], listed: Mapping[str, str]) -> dict[str, int]:
    """File sizes by sha256 from the run's ``release_files`` tables that are what the manifest lists."""
    sizes: dict[str, int] = {}
    for path, digest in listed.items():
        if Path(path).name == RELEASE_FILES and (folder / path).is_file() and sha256_file(folder / path) == digest:
            table = pq.read_table(folder / path, columns=["sha256", "bytes"]).to_pylist()
            sizes |= {str(row["sha256"]): int(row["bytes"]) for row in table if row["bytes"] is not None}
    return sizes


AGREED = ("run_id", "parameters", "inputs", "code_version")
"""What a run's manifest and the release's copy of it (written while it published) must say alike."""


def _release_copy_agrees(folder: Path, manifest: Mapping[str, Any]) -> list[Mismatch]:
    """A run's manifest against the release's copy of it (written before publish): the same run, parameters,
    inputs and code, and the same files for every stage the copy lists. A run manifest replaced or edited after
    the build disagrees."""
    found = []
    listed = {str(f["path"]) for f in manifest.get("files", [])}
    ours = {stage.get("folder"): stage.get("artifacts") for stage in manifest["stages"]}
    for copy in sorted(path for path in listed if Path(path).name == MANIFEST and (folder / path).is_file()):
        try:
            theirs = json.loads((folder / copy).read_text(encoding="utf-8"))
            stages = theirs.get("stages", [])
        except (OSError, ValueError, AttributeError):
            continue  # its own hash check names it
        differing = [key for key in AGREED if theirs.get(key) != manifest.get(key)]
        differing += [
            stage.get("folder") for stage in stages if ours.get(stage.get("folder")) != stage.get("artifacts")
        ]
        if differing:
            found.append(Mismatch(MANIFEST, "sha256", f"differs from the release's copy {copy} in {differing}"))
    return found


def verify_run(folder: Path, ignored: Collection[str] = ()) -> Verification:
    """Every file of the run folder against its manifest (``ignored``: files commands write into a run after its
    build, e.g. the audit page)."""
    manifest = read_manifest(folder)
    listed = _listed(manifest)
    present = _present(folder, {MANIFEST, *ignored})
    found = compare_files(folder, listed, present, _release_sizes(folder, manifest, listed))
    found += _release_copy_agrees(folder, manifest)
    return Verification(folder, "run", len(listed), tuple(found))


def release_expected(manifest: Mapping[str, Any], present: Iterable[str] = ()) -> dict[str, str]:
    """The files of a release its manifest lists, by their path in the release: the release data stage's
    (``<stage>/data/…`` and ``<stage>/lm_eval/…`` become ``data/…`` and ``lm_eval/…``) and the run-level files at
    the release's root (the transcript) that are there."""
    expected: dict[str, str] = {}
    for stage in manifest["stages"]:
        for artifact in stage.get("artifacts", []):
            _, _, inside = str(artifact["path"]).partition("/")
            if inside.split("/", 1)[0] in RELEASE_DATA_FOLDERS and "/" in inside:
                expected[inside] = str(artifact["sha256"])
    at_root = {str(f["path"]): str(f["sha256"]) for f in manifest.get("files", []) if "/" not in str(f["path"])}
    return expected | {path: digest for path, digest in at_root.items() if path in set(present)}


def verify_release(folder: Path) -> Verification:
    """Every file of a release folder against its manifest, and the manifest against its dataset card."""
    manifest = read_manifest(folder)
    present = _present(folder, {MANIFEST, CARD})
    expected = release_expected(manifest, present)
    if not any(path.startswith("data/") for path in expected):
        raise VerificationError(f"{folder / MANIFEST}: lists no release data (no <stage>/data/… file)")
    found = compare_files(folder, expected, present)
    card = folder / CARD
    if not card.is_file():
        found.append(Mismatch(CARD, "missing", "a release carries its dataset card"))
    else:
        named = set(CARD_MANIFEST_SHA256.findall(card.read_text(encoding="utf-8", errors="replace")))
        actual = sha256_file(folder / MANIFEST)
        if actual not in named:
            said = ", ".join(sorted(named)) or "none"
            found.append(Mismatch(MANIFEST, "sha256", f"{actual}, the dataset card names {said}"))
    return Verification(folder, "release", len(expected) + 2, tuple(found))


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a run (its manifest lists stage folders it holds), not a release."""
    manifest = read_manifest(folder)
    stages = [str(stage.get("folder")) for stage in manifest["stages"] if stage.get("folder")]
    return not (folder / "data").is_dir() and (not stages or any((folder / name).is_dir() for name in stages))


def verify_folder(folder: Path, ignored: Collection[str] = ()) -> Verification:
    """:func:`verify_run` or :func:`verify_release`, by what ``folder`` is."""
    return verify_run(folder, ignored) if is_run(folder) else verify_release(folder)
