"""Benchmark: the floor Prefect sets under a no-change rebuild, the part of it no change to the stages removes.

Run from the repository root: ``python -m benchmarks.prefect_floor [--repeats 5]``. Against a local Prefect server
it starts (as ``benchmarks.build_paper_scale`` does), in a fresh process each time, it measures

- importing Prefect (``prefect.main``, which ``pbbq build`` imports to set up its logging) and importing the build
  flow with everything it loads (``pbbq.flows.build_pbbq``);
- a flow with no task, and with 10 trivial tasks submitted to the thread runner at once and waited for: plain
  (``NO_CACHE``), and cached with their results persisted, the first run (computed and written) and the second
  (every task ``Cached``, its result read back), as a rebuild's stages are.

Each figure is the median over ``--repeats`` fresh processes; a task's cost is (10 tasks - no task) / 10.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.build_paper_scale import REPO_ROOT, start_server
from pbbq.tasks.core.markdown import markdown_table

TASKS = 10

FLOWS = f"""
import json, sys, time, uuid
started = time.perf_counter()
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner
imported = time.perf_counter() - started
nonce = uuid.uuid4().hex

@task(cache_policy=NO_CACHE, persist_result=False)
def trivial(i: int) -> int:
    return i

@task(cache_key_fn=lambda context, parameters: f"{{nonce}}-{{parameters['i']}}", persist_result=True)
def cached(i: int) -> int:
    return i

@flow(task_runner=ThreadPoolTaskRunner())
def tasks(n: int, kind: str) -> list[int]:
    one = cached if kind == "cached" else trivial
    return [future.result() for future in [one.submit(i) for i in range(n)]]

def timed(n: int, kind: str = "plain") -> float:
    started = time.perf_counter()
    tasks(n, kind)
    return time.perf_counter() - started

figures = {{"import prefect, in the flow process": imported, "first flow of the process, no task": timed(0)}}
figures["flow, no task"] = timed(0)
figures["flow, {TASKS} tasks"] = timed({TASKS})
figures["flow, {TASKS} cached tasks, computed"] = timed({TASKS}, "cached")
figures["flow, {TASKS} cached tasks, from the cache"] = timed({TASKS}, "cached")
print(json.dumps(figures))
"""

IMPORTS = {
    "import prefect.main": "import prefect.main",
    "import pbbq.flows.build_pbbq (the build's imports)": "import pbbq.flows.cli, pbbq.flows.build_pbbq, prefect.main",
}


def _python(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{done.stderr[-3000:]}")
    return done.stdout


def _seconds(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    _python(code, env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="pbbq-prefect-floor-"))
    server, url, startup = start_server(home / "server")
    env = {**os.environ, "PREFECT_API_URL": url, "PREFECT_HOME": str(home / "client")}
    try:
        runs: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for name, code in IMPORTS.items():
                runs.setdefault(f"{name}, whole process", []).append(_seconds(code, env))
            for name, seconds in json.loads(_python(FLOWS, env).strip().splitlines()[-1]).items():
                runs.setdefault(name, []).append(seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    median = {name: statistics.median(values) for name, values in runs.items()}
    rows = [[name, f"{seconds:.2f}"] for name, seconds in median.items()]
    per_task = (median[f"flow, {TASKS} tasks"] - median["flow, no task"]) / TASKS
    per_cached = (median[f"flow, {TASKS} cached tasks, from the cache"] - median["flow, no task"]) / TASKS
    rows += [["one task (plain)", f"{per_task:.3f}"], ["one task from the cache", f"{per_cached:.3f}"]]
    print(f"\n## Prefect's floor ({os.cpu_count()} cores, median of {args.repeats} fresh processes)\n")
    print(f"Prefect server start-up (not in any figure below): {startup:.1f} s\n")
    print(markdown_table(["what", "seconds"], rows, right_from=1))


if __name__ == "__main__":
    main()
