"""How close the LLM client gets to ideal throughput against a fake server with fixed latency.

Sends N distinct requests in live mode (fresh temporary store) to the fake OpenAI-compatible
server of tests/fakes, which answers each after a fixed latency, and compares the wall time
with the ideal N × latency ÷ concurrency. Goal: ratio ≤ 1.25. The fake runs in a process of its
own, as a real server would, so that it does not share the client's interpreter lock; the client
runs in a fresh process too, as a build's first LLM stage meets it (its first miss opens the
provider's transport and loads the SDK, inside the timed call). The CPU column is the client
process's CPU time over the call: near the wall time means the run was CPU-bound (the SDK costs
~1.5 ms of CPU per request, serialised by the GIL). The import CPU column is what the process spent
importing the package before the call: a revision that loads the SDKs there (8d03d76 did) pays
for them outside the timed call.

``--baseline REV`` (repeatable) measures the client of a git revision too (its package from
``git archive`` in a temporary folder; the fake server is this checkout's), ``--rounds`` times,
interleaved with this checkout's runs and in alternating order, and prints each one's min and
median and this checkout's median wall time against each base's: a regression shows in that
number even on a loaded machine, where the ratio to the ideal alone moves with the load
(``os.getloadavg`` is printed before and after).

    PYTHONPATH=. python benchmarks/llm_stage.py [--requests 2000] [--latency 0.05] [--concurrency 16]
        [--baseline REV ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "PBBQ_BENCHMARK_KEY"
GOAL = 1.25
THIS = "this checkout"


def _serve(latency: float, pipe: Connection) -> None:
    """The fake server's process: send the port, serve until told to stop, send back its counts."""
    from tests.fakes.llm_servers import FakeLLMServer

    with FakeLLMServer(latency=latency) as server:
        pipe.send(server.openai_base_url)
        pipe.recv()
        pipe.send((server.requests_total, server.max_in_flight))


def client_run(base_url: str, requests: int, concurrency: int) -> dict[str, Any]:
    """The client's side, in a process of its own whose ``pbbq`` is the code measured (any revision that has
    ``pbbq.tasks.llm``): the wall and CPU seconds of one ``complete_many`` over ``requests`` distinct requests."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    cpu_start = time.process_time()
    import pbbq.tasks.llm  # what a process loads before its first call (at 8d03d76, both SDKs too)
    from pbbq.tasks.llm import LLMClient, LLMConfig, LLMRequest

    import_cpu = time.process_time() - cpu_start
    batch = [
        LLMRequest(messages=(("user", f"request {i}"),), prompt_hash="0" * 64, stage="benchmark", context=f"#{i}")
        for i in range(requests)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        config = LLMConfig(
            provider="openai",
            model="benchmark-model",
            base_url=base_url,
            api_key_env=KEY_ENV,
            mode="live",
            store_path=Path(tmp) / "store.sqlite",
            max_concurrency=concurrency,
        )
        client = LLMClient(config)
        start, cpu_start = time.perf_counter(), time.process_time()
        answers = client.complete_many(batch)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        client.store.close()
    return {
        "answers": len(answers),
        "wall_s": wall,
        "cpu_s": cpu,
        "import_cpu_s": import_cpu,
        "package": pbbq.tasks.llm.__file__,
    }


def measure(code: Path, requests: int, latency: float, concurrency: int) -> dict[str, float]:
    """One run: a fresh fake server, and a fresh client process with the package of the checkout ``code``."""
    pipe, child_end = multiprocessing.get_context("spawn").Pipe()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(latency, child_end), daemon=True)
    server.start()
    base_url = pipe.recv()
    command = [sys.executable, str(Path(__file__).resolve()), "--client", base_url]
    options = ["--requests", str(requests), "--concurrency", str(concurrency)]
    env = {**os.environ, "PYTHONPATH": str(code), KEY_ENV: "benchmark-not-a-secret"}
    done = subprocess.run([*command, *options], cwd=code, env=env, capture_output=True, text=True, check=False)
    pipe.send("stop")
    seen, peak = pipe.recv()
    server.join(timeout=10)
    if done.returncode != 0:
        raise SystemExit(f"the client of {code} failed:\n{done.stderr[-3000:]}")
    run = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(run["package"]).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"the client meant to run {code}'s package ran {run['package']}")
    if seen != requests or run["answers"] != requests:
        raise SystemExit(f"expected {requests} requests, the server saw {seen}")
    ideal = requests * latency / concurrency
    return {
        "peak_in_flight": peak,
        "wall_s": run["wall_s"],
        "cpu_s": run["cpu_s"],
        "import_cpu_s": run["import_cpu_s"],
        "ratio": run["wall_s"] / ideal,
    }


def export(ref: str, into: Path) -> Path:
    """The files of git revision ``ref`` in a new folder under ``into`` (``git archive``: no worktree to remove)."""
    tree = into / f"baseline-{ref.replace('/', '-')}"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=REPO_ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref}: {archive.stderr.decode(errors='replace').strip()}")
    with tempfile.TemporaryFile() as file:
        file.write(archive.stdout)
        file.seek(0)
        with tarfile.open(fileobj=file) as tar:
            tar.extractall(tree, filter="tar")
    return tree


def _load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    """Parse options, run (interleaved with each baseline), print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer at the fake server")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--baseline", action="append", default=[], metavar="REV", help="a git revision to compare")
    parser.add_argument("--rounds", type=int, help="runs of each (default 3 with --baseline, else 1)")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # the client process of one run
    args = parser.parse_args()
    if args.requests < 1 or args.latency <= 0 or args.concurrency < 1 or (args.rounds or 1) < 1:
        parser.error("--requests, --concurrency and --rounds must be >= 1 and --latency > 0")
    if args.client:
        print(json.dumps(client_run(args.client, args.requests, args.concurrency)))
        return
    from pbbq.tasks.core.markdown import markdown_table

    rounds = args.rounds or (3 if args.baseline else 1)
    ideal = args.requests * args.latency / args.concurrency
    print(
        f"{args.requests} requests, {args.concurrency} in flight, {args.latency * 1000:.0f} ms latency: "
        f"ideal {ideal:.2f} s; load average {_load()} (1/5/15 min) before",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="pbbq-llm-stage-") as scratch:
        codes = {THIS: REPO_ROOT, **{ref: export(ref, Path(scratch)) for ref in args.baseline}}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
        rows = []
        for number in range(1, rounds + 1):
            order = list(codes) if number % 2 else list(reversed(codes))
            for name in order:
                run = measure(codes[name], args.requests, args.latency, args.concurrency)
                runs[name].append(run)
                rows.append(
                    (
                        str(number),
                        name,
                        f"{run['peak_in_flight']:.0f}",
                        f"{run['wall_s']:.2f} s",
                        f"{run['cpu_s']:.2f} s",
                        f"{run['import_cpu_s']:.2f} s",
                        f"{run['ratio']:.3f}",
                        _load().split("/")[0],
                    )
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ("round", "code", "peak in flight", "wall", "cpu", "import cpu", "ratio", "load (1 min)")
    print(markdown_table(header, rows))
    print()
    summary = []
    for name, measured in runs.items():
        ratios = [run["ratio"] for run in measured]
        cpus = [run["cpu_s"] for run in measured]
        imports = [run["import_cpu_s"] for run in measured]
        median = statistics.median(ratios)
        summary.append(
            (
                name,
                str(len(measured)),
                f"{min(ratios):.3f}",
                f"{median:.3f} ({'meets' if median <= GOAL else 'misses'} goal ≤ {GOAL})",
                f"{min(cpus):.2f} s",
                f"{statistics.median(cpus):.2f} s",
                f"{statistics.median(imports):.2f} s",
            )
        )
    header = ("code", "runs", "ratio min", "ratio median", "cpu min", "cpu median", "import cpu median")
    print(markdown_table(header, summary))
    mine = statistics.median(run["wall_s"] for run in runs[THIS])
    for ref in args.baseline:
        theirs = statistics.median(run["wall_s"] for run in runs[ref])
        print(f"\n{THIS} against {ref}: {mine / theirs:.3f} × its median wall time ({mine:.2f} s / {theirs:.2f} s)")
    print(f"\nload average {_load()} (1/5/15 min) after")


if __name__ == "__main__":
    main()
