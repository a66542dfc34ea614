"""The release folder is created under the user's umask, like the files in it: readable by whoever may read
its files (a web server, another user), not private as a temporary folder would be."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd

from pbbq.tasks.core.artifacts import FILE_MODE
from pbbq.tasks.publish.dataset_card import CardParams
from pbbq.tasks.statistics import table1
from tests.bbq_records import make_records
from tests.release_support import build_release


def test_the_release_folder_has_the_umask_mode_of_a_folder(tmp_path: Path) -> None:
    configs = make_records()
    funnel = pd.DataFrame({"step": ["examples"], "count": [len(configs["fa"])]})
    release = build_release(
        tmp_path / "publish",
        configs,
        table1=table1(configs["fa"]),
        funnel=funnel,
        card=CardParams(build_id="20250101-000000-abc123"),
    )
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(release.path.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((release.path / "README.md").stat().st_mode) == FILE_MODE
    assert [p.name for p in (tmp_path / "publish").iterdir()] == ["hub"]  # no staging folder left
