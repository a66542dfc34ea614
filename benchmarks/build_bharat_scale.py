"""Benchmark: a cold build at BharatBBQ's size, many target languages at once, on threads and on Dask workers.

Run from the repository root: ``python -m benchmarks.build_bharat_scale [--scale paper] [--targets 8]
[--workers 1,2,4] [--work DIR]``. It writes the synthetic inputs (``pbbq synth --scale paper --targets 8``: 39,276
Persian examples translated into English and seven synthetic languages, not timed; BharatBBQ has 49,108, more than
the synthetic phrase book makes: ``pbbq.tasks.synth.scale.SCALES``) and, against a local
Prefect server it starts (:func:`benchmarks.build_paper_scale.start_server`), builds them cold (an empty outputs
folder each):

- with Prefect's thread runner (``pbbq build``, the default);
- with ``--task-runner dask --dask-workers N``: a local cluster of N worker processes, for each N of ``--workers``.

Per build: wall time of the flow and of the process, peak RSS of the whole process tree (the build, its Dask
workers; sampled every 0.2 s, and at least the largest process's own peak), the release's rows, whether its
dataset is the thread build's (the parquet files' bytes), and how far the translate stages ran side by side: the
sum of their task runs' durations over the span from the first one's start to the last one's end (the task runs
the Prefect server recorded; 1.0: one after the other, N: N at once).
The goals (docs/scale.md): a cold build ≤ 8 min and peak RSS ≤ 4 GiB on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq

from benchmarks.build_paper_scale import GIB, _mb, build, start_server, synthesize_apart
from pbbq.tasks.core.markdown import markdown_table

GOAL_SECONDS = 8 * 60
GOAL_PEAK = 4 * GIB


def _tree_rss() -> int:
    """The resident set of every process this one started, and theirs (the build and its Dask workers)."""
    total = 0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # it ended meanwhile
            total += child.memory_info().rss
    return total


def build_sampled(config: Path, outputs: Path, run_id: str, api_url: str, options: list[str]) -> dict[str, Any]:
    """:func:`benchmarks.build_paper_scale.build` with ``options``, and the peak RSS of its process tree."""
    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.update(build(config, outputs, run_id, api_url, options)))
    peak = 0
    runner.start()
    while runner.is_alive():
        peak = max(peak, _tree_rss())
        time.sleep(0.2)
    runner.join()
    if not result:
        raise SystemExit(f"pbbq build {run_id} failed")
    # a short peak between two samples is still the largest process's own (its ru_maxrss)
    return result | {"tree_peak_rss": max(peak, result["process_peak_rss"]), "run": outputs / run_id}


def _post(api_url: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{api_url}/{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def side_by_side(api_url: str) -> tuple[float, float, float]:
    """The translate task runs of the last build on the server: the sum of their durations, the span from the
    first start to the last end (seconds), and the first over the second (how many ran at once, on average)."""
    (flow_run,) = _post(api_url, "flow_runs/filter", {"sort": "START_TIME_DESC", "limit": 1})
    task_runs = _post(api_url, "task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run["id"]]}}, "limit": 200})
    spans = [
        (datetime.fromisoformat(r["start_time"]), datetime.fromisoformat(r["end_time"]))
        for r in task_runs
        if r["name"].startswith("translate")
    ]
    busy = sum((end - start).total_seconds() for start, end in spans)
    span = (max(end for _, end in spans) - min(start for start, _ in spans)).total_seconds()
    return busy, span, busy / span


def release(run: Path) -> dict[str, bytes]:
    """The release's dataset files by config and name, their bytes."""
    data = run / "10_publish" / "hub" / "data"
    return {path.relative_to(data).as_posix(): path.read_bytes() for path in sorted(data.rglob("*.parquet"))}


def rows(run: Path) -> int:
    data = run / "10_publish" / "hub" / "data"
    return sum(pq.read_metadata(path).num_rows for path in data.rglob("*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="paper", help="pbbq synth's scale (default: paper, the largest it makes)")
    parser.add_argument("--targets", type=int, default=8, help="target languages (default: 8, BharatBBQ's)")
    parser.add_argument("--workers", default="1,2,4", help="Dask worker processes, one cold build each")
    parser.add_argument("--work", type=Path, help="where the inputs and runs go (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="pbbq-bharat-scale-"))
    inputs = work / f"{args.scale}-{args.targets}"
    if (inputs / "build.toml").is_file():
        print(f"the synthetic inputs of {inputs} again", file=sys.stderr, flush=True)
    else:
        print(f"writing the synthetic inputs into {inputs} ...", file=sys.stderr, flush=True)
        synthesize_apart(inputs, args.scale, args.seed, args.targets)
    config = inputs / "build.toml"
    runners = {"threads": []} | {
        f"dask, {n} worker process{'es' if int(n) > 1 else ''}": ["--task-runner", "dask", "--dask-workers", n]
        for n in args.workers.split(",")
        if n
    }
    server, url, startup = start_server(work / "prefect-home")
    builds: dict[str, dict[str, Any]] = {}
    try:
        for number, (name, options) in enumerate(runners.items()):
            print(f"cold build: {name} ...", file=sys.stderr, flush=True)
            builds[name] = build_sampled(config, work / f"outputs-{number}", "cold", url, options)
            builds[name]["side_by_side"] = side_by_side(url)
            done = builds[name]
            print(
                f"  flow {done['timings']['flow_seconds']:.0f} s, process {done['process_seconds']:.0f} s, "
                f"peak {_mb(done['tree_peak_rss'])} MB, translate {done['side_by_side'][2]:.1f} × at once",
                file=sys.stderr,
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=30)

    threads = release(builds["threads"]["run"])
    table = []
    for name, run in builds.items():
        busy, span, ratio = run["side_by_side"]
        table.append(
            [
                name,
                f"{run['timings']['flow_seconds']:.0f}",
                f"{run['process_seconds']:.0f}",
                _mb(run["tree_peak_rss"]),
                f"{rows(run['run']):,}",
                f"{busy:.0f} in {span:.0f} ({ratio:.1f} ×)",
                "yes" if release(run["run"]) == threads else "NO",
            ]
        )
    source = json.loads((inputs / "synth.json").read_text(encoding="utf-8"))
    examples = sum(counts["fa"] for counts in source["counts"].values())
    print(
        f"\n## A cold build at {args.scale} scale: {examples:,} Persian examples into {args.targets} targets "
        f"({', '.join(source['targets'])}); {os.cpu_count()} cores\n"
    )
    print(f"Prefect server start-up (not in any figure below): {startup:.1f} s\n")
    headers = ["runner", "flow s", "process s", "peak RSS MB (tree)", "rows", "translate s: busy in span", "dataset"]
    print(markdown_table(headers, table, right_from=1))
    print(
        "\ntranslate: the sum of the translate task runs' durations, in the span from the first one's start to the "
        "last one's end (× : how many ran at once on average); dataset: the release's parquet files are the thread "
        "build's, byte for byte."
    )
    print("\n| goal | runner | measured | gap |\n| --- | --- | ---: | ---: |")
    for name, run in builds.items():
        seconds, peak = run["process_seconds"], run["tree_peak_rss"]
        late = f"{(seconds - GOAL_SECONDS) / 60:+.1f} min" if seconds > GOAL_SECONDS else "met"
        over = f"{(peak - GOAL_PEAK) / GIB:+.2f} GiB" if peak > GOAL_PEAK else "met"
        print(f"| cold build ≤ 8 min | {name} | {seconds / 60:.1f} min | {late} |")
        print(f"| peak RSS ≤ 4 GiB | {name} | {peak / GIB:.2f} GiB | {over} |")
    print(f"\ninputs and runs: {work}")


if __name__ == "__main__":
    main()
