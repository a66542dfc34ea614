"""Benchmark: the names stage's time and memory on one table of examples, as the build's task runs it.

Run from the repository root: ``python -m benchmarks.names_memory EXAMPLES [--names CSV] [--before REV]``.
``EXAMPLES`` is the instantiate stage's examples of a build: its ``05_instantiate/examples.parquet``, or the
frame the build kept in its content store (a pickle); ``--names`` the name table (default: the adaptation
sample's). Each code runs in a process of its own (this checkout's, and with ``--before REV`` the git revision REV
unpacked beside it, first): it loads the examples, runs the stage's task function (the stage split by template,
its output kept in a scratch store, the collector as in a build) and prints its wall and CPU seconds, the RSS
before and after it and the process's peak RSS, and whether both wrote the same parquet files (by sha256).

On the 2-core machine (load 3-4), the ``examples.parquet`` of ``benchmarks.sheet_blowup`` at N = 100 (160,432
``en`` rows, 481,008 variants; loaded: 0.68 GB): b929d3b 89.6 CPU s, 2.60 GB after, 3.12 GB peak; now 81.5 CPU s,
1.86 GB after, 2.12 GB peak, the same files (issue 35; docs/scale.md)."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_NAMES = ROOT / "annotations" / "bbq" / "names-pakistan-sample.csv"


def _rss() -> int:
    """This process's resident set now, in bytes (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(examples_path: Path, names_path: Path) -> dict[str, object]:
    """Run the names stage's task on the examples with the code importable as ``pbbq`` and say what it took."""
    import pandas as pd

    from pbbq.tasks import names
    from pbbq.tasks.core.artifacts import ArtifactStore
    from pbbq.tasks.core.caching import stage_task
    from pbbq.tasks.core.collector import build_collector
    from pbbq.tasks.names.params import NamesParams
    from pbbq.tasks.names.tables import load_name_table

    if examples_path.suffix == ".parquet":
        examples = pd.read_parquet(examples_path)
    else:
        with examples_path.open("rb") as handle:
            examples = pickle.load(handle)
    table = load_name_table(names_path)
    lang = str(examples["lang"].iloc[0])
    with tempfile.TemporaryDirectory(prefix="names-memory-") as scratch:
        store = ArtifactStore(Path(scratch))
        run = stage_task(names.names_stage(lang), NamesParams(), store).fn
        before = _rss()
        with build_collector():
            wall, cpu = time.perf_counter(), time.process_time()
            kept = run(examples=examples, name_table=table, params=NamesParams(), client=None, prompt="")
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            after = _rss()
    return {
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "rss_before_gb": round(before / 1e9, 2),
        "rss_after_gb": round(after / 1e9, 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 2),
        "rows": {file.name: file.rows for file in kept.files},
        "files": {file.name: file.sha256 for file in kept.files},
    }


def _unpacked(revision: str, into: Path) -> Path:
    """The repository at ``revision``, unpacked into ``into`` (``git archive``; no worktree is added)."""
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="tar")
    return into


def _in_process_of_its_own(code: Path, examples: Path, names_path: Path) -> dict[str, object]:
    """:func:`measure` with the checkout ``code``, in a fresh Python process."""
    command = [sys.executable, "-m", "benchmarks.names_memory", str(examples), "--names", str(names_path), "--here"]
    result = subprocess.run(
        command, cwd=code, env={**os.environ, "PYTHONPATH": str(code)}, check=True, capture_output=True, text=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--names", type=Path, default=SAMPLE_NAMES)
    parser.add_argument("--before", help="a git revision to measure first, in a process of its own")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # measure in this process
    args = parser.parse_args()
    examples, names_path = args.examples.resolve(), args.names.resolve()
    if args.here:
        print(json.dumps(measure(examples, names_path)))
        return
    results = {}
    if args.before:
        with tempfile.TemporaryDirectory(prefix="names-memory-before-") as scratch:
            code = _unpacked(args.before, Path(scratch))
            (code / "benchmarks").mkdir(exist_ok=True)
            (code / "benchmarks" / "names_memory.py").write_text(Path(__file__).read_text(encoding="utf-8"))
            results[args.before] = _in_process_of_its_own(code, examples, names_path)
    results["now"] = _in_process_of_its_own(ROOT, examples, names_path)
    for label, result in results.items():
        print(label, {key: value for key, value in result.items() if key != "files"})
    if args.before:
        print("files", "the same" if results[args.before]["files"] == results["now"]["files"] else "DIFFER")


if __name__ == "__main__":
    main()
