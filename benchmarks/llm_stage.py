"""How close the LLM client gets to ideal throughput against a fake server with fixed latency.

Sends N distinct requests in live mode (fresh temporary store) to the fake OpenAI-compatible
server of tests/fakes, which answers each after a fixed latency, and compares the wall time
with the ideal N × latency ÷ concurrency. Goal: ratio ≤ 1.25. The fake runs in a process of its
own, as a real server would, so that it does not share the client's interpreter lock; the CPU
column is the client process's CPU time over the run: near the wall time means the run was
CPU-bound (the SDKs cost ~1.5-2 ms of CPU per request, serialised by the GIL).

    PYTHONPATH=. python benchmarks/llm_stage.py [--requests 2000] [--latency 0.05] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from pbbq.tasks.core.markdown import markdown_table
from pbbq.tasks.llm import LLMClient, LLMConfig, LLMRequest
from tests.fakes.llm_servers import FakeLLMServer

KEY_ENV = "PBBQ_BENCHMARK_KEY"
GOAL = 1.25


def _serve(latency: float, pipe: Connection) -> None:
    """The fake server's process: send the port, serve until told to stop, send back its counts."""
    with FakeLLMServer(latency=latency) as server:
        pipe.send(server.openai_base_url)
        pipe.recv()
        pipe.send((server.requests_total, server.max_in_flight))


def measure(requests: int, latency: float, concurrency: int) -> dict[str, float]:
    """Run the benchmark once; returns the table's figures."""
    os.environ[KEY_ENV] = "benchmark-not-a-secret"
    batch = [
        LLMRequest(messages=(("user", f"request {i}"),), prompt_hash="0" * 64, stage="benchmark", context=f"#{i}")
        for i in range(requests)
    ]
    pipe, child_end = multiprocessing.get_context("spawn").Pipe()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(latency, child_end), daemon=True)
    server.start()
    base_url = pipe.recv()
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
    pipe.send("stop")
    seen, peak = pipe.recv()
    server.join(timeout=10)
    if seen != requests or len(answers) != requests:
        raise RuntimeError(f"expected {requests} requests, the server saw {seen}")
    ideal = requests * latency / concurrency
    return {
        "requests": requests,
        "concurrency": concurrency,
        "latency_ms": latency * 1000,
        "peak_in_flight": peak,
        "wall_s": wall,
        "cpu_s": cpu,
        "ideal_s": ideal,
        "ratio": wall / ideal,
    }


def main() -> None:
    """Parse options, run, print a table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer at the fake server")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if args.requests < 1 or args.latency <= 0 or args.concurrency < 1:
        parser.error("--requests and --concurrency must be >= 1 and --latency > 0")
    logging.basicConfig(level=logging.WARNING)
    row = measure(args.requests, args.latency, args.concurrency)
    header = ("requests", "concurrency", "latency", "peak in flight", "wall", "cpu", "ideal", "ratio")
    cells = (
        f"{row['requests']:.0f}",
        f"{row['concurrency']:.0f}",
        f"{row['latency_ms']:.0f} ms",
        f"{row['peak_in_flight']:.0f}",
        f"{row['wall_s']:.2f} s",
        f"{row['cpu_s']:.2f} s",
        f"{row['ideal_s']:.2f} s",
        f"{row['ratio']:.3f} ({'meets' if row['ratio'] <= GOAL else 'misses'} goal ≤ {GOAL})",
    )
    print(markdown_table(header, [cells]))


if __name__ == "__main__":
    main()
