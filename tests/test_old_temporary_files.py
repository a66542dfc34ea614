"""Temporary files a killed build of an earlier version left (issue 35 item 9): a5452f8 named them without the
writer's pid, so the sweep of dead writers' files never matched them and they survived every rebuild."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pbbq.tasks.core.artifacts import ArtifactStore


def test_temporary_files_of_an_earlier_version_are_removed_once_no_writer_can_own_them(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    digest = store.put(b"kept")
    hour_ago = time.time() - 3600
    old = [  # as a5452f8 named them (no pid), left by a build killed before this process started
        tmp_path / "store" / f".{digest}.3f2a9c1b.tmp",  # ArtifactStore.place's
        tmp_path / "store" / "memo" / ".deadbeef.json.k2_x9a0q.tmp",  # atomic_write_bytes' mkstemp
    ]
    recent = tmp_path / "store" / f".{digest}.0badc0de.tmp"  # written since: an old build may be writing it
    other = tmp_path / "store" / ".not-ours.tmp"
    for path in (*old, recent, other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    for path in (*old, other):
        os.utime(path, (hour_ago, hour_ago))
    assert sorted(store.remove_leftovers()) == sorted(old)
    assert recent.exists() and other.exists() and store.read(digest) == b"kept"
