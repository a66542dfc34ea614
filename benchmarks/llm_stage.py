"""How close the LLM client gets to ideal throughput against a fake server with fixed latency.

Sends N distinct requests in live mode (fresh temporary store) to the fake OpenAI-compatible
server of tests/fakes, which answers each after a fixed latency, and compares the wall time
with the ideal N × latency ÷ concurrency. Goal: ratio ≤ 1.25. The CPU column is the process's
CPU time over the run (client and in-process fake server, all threads): near the wall time means
the run was CPU-bound (the SDKs cost ~1.5-2 ms of CPU per request, serialised by the GIL).

    PYTHONPATH=. python benchmarks/llm_stage.py [--requests 2000] [--latency 0.05] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

from tasks.llm import LLMClient, LLMConfig, LLMRequest
from tests.fakes.llm_servers import FakeLLMServer

KEY_ENV = "PBBQ_BENCHMARK_KEY"
GOAL = 1.25


def measure(requests: int, latency: float, concurrency: int) -> dict[str, float]:
    """Run the benchmark once; returns the table's figures."""
    os.environ[KEY_ENV] = "sk-benchmark-not-a-secret"
    batch = [
        LLMRequest(messages=(("user", f"request {i}"),), prompt_hash="0" * 64, stage="benchmark", context=f"#{i}")
        for i in range(requests)
    ]
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(latency=latency) as server:
        config = LLMConfig(
            provider="openai",
            model="benchmark-model",
            base_url=server.openai_base_url,
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
        if server.requests_total != requests or len(answers) != requests:
            raise RuntimeError(f"expected {requests} requests, the server saw {server.requests_total}")
        peak = server.max_in_flight
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
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
