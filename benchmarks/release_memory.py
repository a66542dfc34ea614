"""Benchmark: the memory the release's data part takes at BharatBBQ's size, every config at once or one at a time.

Run from the repository root: ``python -m benchmarks.release_memory [--release DIR] [--languages DIR]
[--before REV]``. The input is a built release's data (``DIR/data/<config>/*.parquet``, stacked as the release data
stage receives its examples; default: the eight-target build of ``benchmarks.build_bharat_scale --work
/tmp/bharat3``, ten configs, 362,736 rows) and the language modules of its synthetic targets (``[languages]
modules`` of that build).

Each way runs in a process of its own: it loads the examples, then samples its RSS and Arrow's allocated bytes
every millisecond while it makes the data part (:func:`pbbq.tasks.publish.release.data_part`):

- ``every config at once``: the configs' frames split up front into a dict (what ``split_configs`` returned
  before), so every config's frame is alive while the first is converted;
- ``one config at a time``: :func:`~pbbq.tasks.publish.release.split_configs` as it is, each frame cut when its
  config is converted and freed with its Arrow table once its shards are written;
- with ``--before REV``, also ``tasks/publish/__init__.py`` as it was at the git revision REV (``9cadcb6``: before
  the release data was made one config at a time), loaded beside today's modules.

It prints the peak above the loaded examples (RSS and Arrow) and the time, and checks every way gives the same
files, byte for byte. On the 2-core machine (examples loaded: 1.2 GB RSS), over four runs, 9cadcb6 peaked 398-458 MB
above them (Arrow 333 MB), every config at once 339-361 MB (295-304), one config at a time 140-212 MB (95-104): RSS
varies with what the allocators keep, Arrow's count hardly.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType

import pandas as pd
import psutil
import pyarrow as pa

from pbbq.tasks.core.markdown import markdown_table
from pbbq.tasks.publish.release import data_part, split_configs
from pbbq.tasks.text.languages import serve_in_this_process

RELEASE = Path("/tmp/bharat3/outputs-0/cold/10_publish/hub")
LANGUAGES = Path("/tmp/bharat3/paper-8/languages")
WAYS = {"every config at once": True, "one config at a time": False}


def code_at(revision: str) -> ModuleType:
    """The publish stage module as it was at ``revision``, importing today's modules beside it."""
    source = subprocess.run(
        ["git", "show", f"{revision}:tasks/publish/__init__.py"], check=True, capture_output=True, text=True
    ).stdout
    with tempfile.TemporaryDirectory() as folder:  # the module is compiled once loaded: its file can go
        path = Path(folder) / "publish_before.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("pbbq.tasks.publish._before", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def measure(release: Path, languages: Path | None, way: str) -> dict[str, float | str]:
    """Make the data part of the release's examples in this process, in one of :data:`WAYS` or with the code at a
    revision (``way`` is then the revision)."""
    code = code_at(way) if way not in WAYS else None
    if languages is not None:
        serve_in_this_process([languages])
    examples = pd.concat(
        [pd.read_parquet(path) for path in sorted(release.glob("data/*/*.parquet"))], ignore_index=True
    )
    gc.collect()
    process = psutil.Process()
    base_rss, base_arrow = process.memory_info().rss, pa.total_allocated_bytes()
    peaks = [base_rss, base_arrow]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peaks[0] = max(peaks[0], process.memory_info().rss)
            peaks[1] = max(peaks[1], pa.total_allocated_bytes())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    if code is not None:
        data = code.release_data(code.split_configs(examples))
    else:
        configs = split_configs(examples)
        data = data_part(dict(configs) if WAYS[way] else configs)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    digest = hashlib.sha256()
    for path in sorted(data.data):
        digest.update(path.encode() + b"\0" + data.data[path])
    return {
        "rows": len(examples),
        "configs": len(data.infos),
        "examples_mb": base_rss / 2**20,
        "rss_mb": (peaks[0] - base_rss) / 2**20,
        "arrow_mb": (peaks[1] - base_arrow) / 2**20,
        "seconds": seconds,
        "sha256": digest.hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, default=RELEASE, help="a built release folder (its data/)")
    parser.add_argument("--languages", type=Path, default=LANGUAGES, help="its extra language modules, if any")
    parser.add_argument("--before", help="also measure tasks/publish/__init__.py at this git revision")
    parser.add_argument("--way", help=argparse.SUPPRESS)  # one measurement, in a process of its own
    args = parser.parse_args()
    languages = args.languages if args.languages.is_dir() else None
    if not any(args.release.glob("data/*/*.parquet")):
        sys.exit(
            f"release_memory: {args.release} holds no data/<config>/*.parquet; build one first "
            "(python -m benchmarks.build_bharat_scale --workers '' --work /tmp/bharat3) or pass --release"
        )
    if args.way:
        print(json.dumps(measure(args.release, languages, args.way)))
        return
    results = {}
    for way in [*([args.before] if args.before else []), *WAYS]:
        command = [sys.executable, "-m", "benchmarks.release_memory", "--way", way, "--release", str(args.release)]
        command += ["--languages", str(args.languages)]
        results[way] = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    first = next(iter(results.values()))
    print(
        f"release data of {first['rows']:,} rows in {first['configs']} configs "
        f"(examples loaded: {first['examples_mb']:,.0f} MB RSS)\n"
    )
    rows = [
        [
            way if way in WAYS else f"the code at {way}",
            f"{r['rss_mb']:,.0f}",
            f"{r['arrow_mb']:,.0f}",
            f"{r['seconds']:.1f}",
            r["sha256"][:12],
        ]
        for way, r in results.items()
    ]
    headers = ["way", "peak RSS above the examples (MB)", "peak Arrow memory (MB)", "seconds", "files sha256"]
    print(markdown_table(headers, rows))
    same = len({r["sha256"] for r in results.values()}) == 1
    print(f"\nsame files every way: {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
