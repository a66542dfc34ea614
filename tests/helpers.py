"""Helpers shared by test modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_LOAD = (
    "import json, sys\n"
    "import datasets\n"
    "folder, cache, *names = sys.argv[1:]\n"
    "out = {}\n"
    "for name in names:\n"
    "    ds = datasets.load_dataset(folder, name, split='test', cache_dir=cache)\n"
    "    out[name] = {'rows': ds.num_rows, 'features': ds.features.to_dict(),\n"
    "                 'first': ds[0]['answer_info'], 'ids': list(ds['example_id'])}\n"
    "print(json.dumps(out))\n"
)


def load_release_offline(folder: Path, configs: Iterable[str], scratch: Path) -> dict[str, Any]:
    """``datasets.load_dataset(folder, config)`` for each config in a fresh process with the Hub switched off
    (the offline switches must be set before ``datasets`` is imported): rows, features, first answer_info and
    the example ids of each."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(scratch / "hf-home")}
    result = subprocess.run(
        [sys.executable, "-c", _LOAD, str(folder), str(scratch / "cache"), *configs],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
