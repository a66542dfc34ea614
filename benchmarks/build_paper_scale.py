"""Benchmark: a whole PBBQ build at the paper's scale, against the limit of its stage functions.

Run from the repository root: ``python -m benchmarks.build_paper_scale [--scales quarter,half,paper] [--work DIR]``.
For each scale it writes the synthetic inputs (``pbbq synth``; not timed) and measures

- **(b) the limit**: the stage functions of ``PIPELINE`` called directly, one after the other, in one fresh
  process: no Prefect, no artifacts, no manifest (publish, which only writes files, is left out); the garbage
  collector set as a build sets it (``pbbq.tasks.core.collector``);

and at the largest scale, against a local Prefect server it starts (its start-up reported on its own line),

- **(a) a cold build**: ``pbbq build --config`` on the synthetic inputs in replay mode, every stage and metric
  but the BERTScore homogenization (off in the synthetic configuration), an empty cache;
- **(c) a rebuild with nothing changed**: the same command again (every stage from the cache, 0 LLM requests);
- **(e) one template's text changed**: one template the gate keeps loses one of its lexical variants (it still
  passes, and the build needs no new LLM answer: its prompts name no variant), and the build run again: what
  recomputed, and how many templates and rows the stages that split by template computed;
- **(d) one template changed**: one template's annotator ratings changed so that it fails the kappa gate, and
  the build run again: what recomputed, and how many LLM requests it sent.

Per stage: wall time and the process's peak RSS after it (``timings.json`` of the run for a build). For (b)
also its CPU seconds, its peak RSS during the stage alone, a sha256 of its tables and its **floor**: reading the
stage tables it takes and writing its own once (parquet, pyarrow) and one store query for every LLM answer it
used. ``--baseline REV`` runs (b) at the largest scale with the package of a git revision too (a temporary
worktree): the table's 'before' column, and whether every stage's tables are that revision's. ``--no-builds``
stops after (b). The goals (docs/scale.md): (a) ≤ 1.3 × (b), (b) ≤ 25 s and ≤ 2 GiB, (c) ≤ 3 s for the flow and
≤ 5 s for the process.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import itertools
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from pbbq.tasks.core.markdown import markdown_table

REPO_ROOT = Path(__file__).resolve().parents[1]
GIB = 1024**3


def _rss() -> int:
    """This process's peak resident set so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak() -> None:
    """Start this process's peak resident set (VmHWM) again from the current one (Linux ``clear_refs``)."""
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")


def _peak_since_reset() -> int:
    """This process's peak resident set since :func:`_reset_peak`, in bytes."""
    status = Path("/proc/self/status").read_text(encoding="ascii")
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024


def _arrow_tables(output: Any) -> dict[str, Any]:
    import pyarrow as pa

    return {
        name: pa.Table.from_pandas(frame, schema=output.schemas.get(name), preserve_index=False)
        for name, frame in sorted(output.tables.items())
    }


def _digest(tables: dict[str, Any]) -> str:
    """One sha256 over a stage's tables (name and Arrow IPC stream of each, its chunks combined: a table built in
    parts holds the same rows in more record batches): equal digests, equal tables."""
    import pyarrow as pa

    digest = hashlib.sha256()
    for name, table in tables.items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.combine_chunks())
        digest.update(name.encode("utf-8") + b"\0" + sink.getvalue().to_pybytes())
    return digest.hexdigest()


def limit(config: Path, floor: bool) -> dict[str, Any]:
    """(b): every stage but publish called directly in this process; per stage seconds, peak RSS during it and a
    digest of its tables; with ``floor``, also the stage's floor: reading the stage tables it takes (parquet,
    pyarrow), writing its own, and one store query for every LLM answer it used."""
    import pyarrow.parquet as pq

    try:  # a baseline from before the engine left the flow module has it there
        from pbbq.flows.build_inputs import load_build_inputs
    except ImportError:
        from pbbq.flows.build_pbbq import load_build_inputs
    from pbbq.flows.config import load_config
    from pbbq.flows.pipeline import PIPELINE
    from pbbq.tasks.core.stage import Sources, Table, Tables, arguments, finish
    from pbbq.tasks.llm import open_llm

    try:  # the collector as a build sets it; a baseline from before that setting runs as its builds did
        from pbbq.tasks.core.collector import build_collector, keep_long_lived
    except ImportError:
        build_collector, keep_long_lived = contextlib.nullcontext, lambda: None

    started = time.perf_counter()
    build = load_config(config)
    with tempfile.TemporaryDirectory() as scratch:
        llm = build.llm.__class__(**{**build.llm.__dict__, "store_path": Path(scratch) / "responses.sqlite"})
        inputs = load_build_inputs(build, Path(scratch), log=lambda line: None)
        rows: list[dict[str, Any]] = [
            {
                "stage": "inputs",
                "seconds": time.perf_counter() - started,
                "cpu_seconds": time.process_time(),
                "peak_rss": _rss(),
            }
        ]
        clients: list[Any] = []
        answered: list[str] = []
        outputs: dict[str, Any] = {}

        def client() -> Any:
            if not clients:
                opened = open_llm(llm, build.transcript)
                complete_many = opened.complete_many

                def recording(requests: Any) -> Any:
                    answers = complete_many(requests)
                    answered.extend(answer.request_id for answer in answers)
                    return answers

                opened.complete_many = recording
                clients.append(opened)
            return clients[0]

        cap = getattr(build, "example_cap", lambda: None)  # a baseline from before the cap has none
        run_values = {"extra_funnel": lambda: [], "example_cap": cap}
        sources = Sources(inputs.tables, outputs, client, run_values)
        with build_collector():  # as the build's pipeline runner sets it for its stages
            for stage in PIPELINE:
                if not stage.cached:  # publish: files only
                    continue
                params = build.params(stage.name) if stage.params else None
                answered.clear()
                _reset_peak()
                start, cpu = time.perf_counter(), time.process_time()
                outputs[stage.folder] = finish(stage, stage.run(**arguments(stage, params, sources)), params)
                keep_long_lived()  # as the build's stage task does
                row = {
                    "stage": stage.folder,
                    "seconds": time.perf_counter() - start,
                    "cpu_seconds": time.process_time() - cpu,
                    "peak_rss": _peak_since_reset(),
                }
                tables = _arrow_tables(outputs[stage.folder])
                row["sha256"] = _digest(tables)
                if floor:
                    taken = [s for source in stage.inputs.values() for s in _stage_tables(source, Table, Tables)]
                    start = time.perf_counter()
                    for table in taken:
                        pq.read_table(Path(scratch) / table.folder / f"{table.name}.parquet")
                    (Path(scratch) / stage.folder).mkdir()
                    for name, table in tables.items():
                        pq.write_table(table, Path(scratch) / stage.folder / f"{name}.parquet")
                    if answered:
                        client().store.get_many(set(answered), client().sources)
                    row["floor"] = time.perf_counter() - start
                rows.append(row)
    examples = {folder: len(outputs[folder]["examples"]) for folder in ("05_instantiate", "06_names", "07_translate")}
    return {"stages": rows, "total": time.perf_counter() - started, "peak_rss": _rss(), "examples": examples}


def _stage_tables(source: Any, table: type, tables: type) -> list[Any]:
    """The stage tables an input declaration reads (none for a build input or a report value)."""
    if isinstance(source, table):
        return [source]
    if isinstance(source, tables):
        return list(source.tables.values())
    return []


def _limit_in_fresh_process(config: Path, code: Path = REPO_ROOT, floor: bool = True) -> dict[str, Any]:
    """:func:`limit` in a new process, with the package of the checkout ``code`` (this one, or a baseline's)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--limit-only", str(config)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [*command, *(["--floor"] if floor else [])], cwd=code, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the limit run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline_limit(ref: str, config: Path, scratch: Path) -> dict[str, Any]:
    """:func:`limit` with the package as it is at the git revision ``ref`` (a detached worktree in ``scratch``,
    removed afterwards): the 'before' of the table."""
    tree = scratch / f"baseline-{ref.replace('/', '-')}"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), ref], cwd=REPO_ROOT, check=True, capture_output=True
    )
    try:
        return _limit_in_fresh_process(config, tree, floor=False)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO_ROOT, check=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(home: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    """A local Prefect server (its own home and database); returns it, its API URL and its start-up time."""
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api"
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return server, url, time.perf_counter() - started
        except OSError:
            if server.poll() is not None or time.perf_counter() - started > 180:
                raise SystemExit("the Prefect server did not start") from None
            time.sleep(0.2)


def synthesize_apart(out: Path, scale: str, seed: int, targets: int = 1) -> None:
    """``pbbq synth`` into ``out`` in a process of its own. In this one it would leave this process gigabytes
    large, and a build started from it afterwards would report that size as its own peak: Linux carries a parent's
    resident set into the ``ru_maxrss`` of a child it forks."""
    command = [sys.executable, "-m", "pbbq.flows.cli", "synth", "--scale", scale, "--out", str(out)]
    done = subprocess.run(
        [*command, "--seed", str(seed), "--targets", str(targets)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"pbbq synth {scale} failed:\n{done.stderr[-3000:]}")


def build(config: Path, outputs: Path, run_id: str, api_url: str, options: Sequence[str] = ()) -> dict[str, Any]:
    """``pbbq build`` as a user runs it (with ``options``, ``--task-runner dask``): the process's wall time, CPU time
    (user and system: what the load of a shared machine stretches least) and peak RSS, and the run's own timings."""
    env = {**os.environ, "PREFECT_API_URL": api_url}
    command = [sys.executable, "-m", "pbbq.flows.cli", "build", "--config", str(config), "--outputs", str(outputs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--run-id", run_id, *options], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"pbbq build {run_id} failed:\n{done.stderr[-3000:]}")
    run = outputs / run_id
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    timings = json.loads((run / "timings.json").read_text(encoding="utf-8"))
    sent, parts = 0, {}
    for stage in manifest["stages"]:
        report = json.loads((run / stage["folder"] / "report.json").read_text(encoding="utf-8"))
        sent += int((report.get("llm") or {}).get("requests_sent", 0) or 0)
        if "parts" in report and not stage["cached"]:
            parts[stage["folder"]] = report["parts"]
    return {
        "process_seconds": seconds,
        "process_cpu_seconds": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "process_peak_rss": max(before.ru_maxrss, after.ru_maxrss) * 1024,
        "timings": timings,
        "recomputed": [s["folder"] for s in manifest["stages"] if not s["cached"]],
        "llm_requests_sent": sent,
        "parts": parts,
    }


def fail_one_template(folder: Path, run: Path) -> str:
    """Change the ratings of the first template (in the ratings' order) that ``run`` instantiated, so that its
    annotators disagree (kappa < 0): the template leaves the build. Returns its id. (The ratings' first template
    may fail the gate already: in inputs a run before changed.)"""
    import pyarrow.parquet as pq

    built = set(pq.read_table(run / "05_instantiate" / "examples.parquet", columns=["template_id"])[0].to_pylist())
    path = folder / "annotations" / "ratings.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    template = next(row["template_id"] for row in rows if row["template_id"] in built)
    labels = ("stereo", "nonstereo", "neither")  # the target labels of a rating (tasks/core/inputs.py)
    for index, row in enumerate(r for r in rows if r["template_id"] == template):
        row["target_label"] = labels[index % len(labels)]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return template


def drop_one_variant(folder: Path, run: Path) -> str:
    """Take the last lexical variant out of the last template (by id) that ``run`` instantiated and that has two or
    more: it still passes the gate, and its prompts are the same (the disambiguation names no variant, the
    translation's segments are a subset of those it had). Returns its id."""
    import pyarrow.parquet as pq

    built = set(pq.read_table(run / "05_instantiate" / "examples.parquet", columns=["template_id"])[0].to_pylist())
    path = folder / "annotations" / "templates.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    row = max(
        (r for r in rows if r["template_id"] in built and ";" in r["lexical_variants"]), key=itemgetter("template_id")
    )
    row["lexical_variants"] = row["lexical_variants"].rsplit(";", 1)[0]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return row["template_id"]


def _parts(changed: dict[str, Any]) -> str:
    """What the stages that split by a key (a template, a category) computed, from their reports."""
    said = []
    for folder, parts in changed["parts"].items():
        rows, total = parts["rows"]
        said.append(
            f"{folder} {parts['computed']} of {parts['of']} {parts['key']}, {rows:,} of {total:,} rows of "
            f"{parts['table']}"
        )
    return "; ".join(said) or "no stage split by key"


def _mb(value: float) -> str:
    return f"{value / 1024**2:,.0f}"


def _peak(limit_run: dict[str, Any]) -> int:
    """A limit run's peak resident set: the largest of its stages' (each measured from a reset)."""
    return max(entry["peak_rss"] for entry in limit_run["stages"])


def stage_table(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    """(b) per stage: seconds before (the baseline revision, if measured) and after, the floor and how far the
    stage is from it, peak RSS during the stage, and whether its tables are the baseline's."""
    earlier = {entry["stage"]: entry for entry in (before or {"stages": []})["stages"]}
    rows = []
    for entry in after["stages"]:
        old = earlier.get(entry["stage"], {})
        floor = entry.get("floor")
        same = (
            ""
            if "sha256" not in old or "sha256" not in entry
            else ("yes" if old["sha256"] == entry["sha256"] else "NO")
        )
        rows.append(
            [
                entry["stage"],
                f"{old['seconds']:.2f}" if old else "",
                f"{entry['seconds']:.2f}",
                f"{old['cpu_seconds']:.2f}" if old else "",
                f"{entry['cpu_seconds']:.2f}",
                "" if floor is None else f"{floor:.2f}",
                "" if not floor else f"{entry['seconds'] / floor:.1f} ×",
                _mb(old["peak_rss"]) if old else "",
                _mb(entry["peak_rss"]),
                same,
            ]
        )
    total_before = f"{before['total']:.1f}" if before else ""
    floors = sum(entry.get("floor", 0.0) for entry in after["stages"])
    cpu_before = f"{sum(e['cpu_seconds'] for e in before['stages']):.1f}" if before else ""
    cpu_after = f"{sum(e['cpu_seconds'] for e in after['stages']):.1f}"
    ratio = f"{after['total'] / floors:.1f} ×" if floors else ""
    total = ["**stage compute**", total_before, f"{after['total']:.1f}", cpu_before, cpu_after, f"{floors:.1f}", ratio]
    rows.append([*total, _mb(_peak(before)) if before else "", _mb(_peak(after)), ""])
    header = ["stage", "before s", "after s", "before CPU s", "after CPU s", "floor s", "after / floor"]
    header += ["before peak MB", "after peak MB", "tables"]
    return markdown_table(header, rows, right_from=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="quarter,half,paper", help="comma-separated, smallest first")
    parser.add_argument(
        "--work",
        type=Path,
        help="where the inputs and runs go (default: a temporary folder); inputs already there are used again, "
        "but (d) changes one template's ratings in them: after a run with builds, use another folder",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", help="a git revision whose stage functions give the 'before' column")
    parser.add_argument("--no-builds", action="store_true", help="measure (b) only: no Prefect server, no builds")
    parser.add_argument("--limit-only", type=Path, help=argparse.SUPPRESS)  # (b) in a fresh process
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)  # with --limit-only
    args = parser.parse_args()
    if args.limit_only:
        print(json.dumps(limit(args.limit_only, args.floor)))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="pbbq-paper-scale-"))
    scales = args.scales.split(",")
    limits: dict[str, dict[str, Any]] = {}
    for scale in scales:
        if (work / scale / "build.toml").is_file():
            print(f"{scale}: the synthetic inputs of {work / scale} again", file=sys.stderr, flush=True)
        else:
            print(f"{scale}: writing the synthetic inputs ...", file=sys.stderr, flush=True)
            synthesize_apart(work / scale, scale, args.seed)
        print(f"{scale}: (b) the stage functions directly ...", file=sys.stderr, flush=True)
        limits[scale] = _limit_in_fresh_process(work / scale / "build.toml")
    before = None
    if args.baseline:
        print(f"{scales[-1]}: (b) the stage functions of {args.baseline} ...", file=sys.stderr, flush=True)
        before = baseline_limit(args.baseline, work / scales[-1] / "build.toml", work)
    b = limits[scales[-1]]
    print(f"\n## (b) the stage functions at {scales[-1]} scale: {b['examples']} examples ({os.cpu_count()} cores)\n")
    print(stage_table(b, before))
    print(
        "\nfloor: reading the stage tables the stage takes and writing its own once (parquet, pyarrow), and one "
        "store query for every LLM answer it used; peak RSS: during the stage alone (VmHWM reset before it); "
        f"tables: the same Arrow tables as {args.baseline or 'the baseline'}'s (sha256)."
    )
    if args.no_builds:
        return

    largest = scales[-1]
    config = work / largest / "build.toml"
    server, url, startup = start_server(work / "prefect-home")
    try:
        print(f"{largest}: (a) cold build, (c) rebuild, (e), (d) one template changed ...", file=sys.stderr, flush=True)
        cold = build(config, work / "outputs", "cold", url)
        warm = build(config, work / "outputs", "warm", url)
        edited = drop_one_variant(work / largest, work / "outputs" / "cold")
        text = build(config, work / "outputs", "one-template-text", url)
        template = fail_one_template(work / largest, work / "outputs" / "one-template-text")
        changed = build(config, work / "outputs", "one-template", url)
    finally:
        server.terminate()
        server.wait(timeout=30)

    print(f"\n## PBBQ at {largest} scale: {b['examples']} examples per stage ({os.cpu_count()} cores)\n")
    print(f"Prefect server start-up (not in any figure below): {startup:.1f} s\n")
    cold_stages = {t["folder"]: t for t in cold["timings"]["stages"]}
    rows = []
    for entry in b["stages"]:
        a = cold_stages.get(entry["stage"], {})
        rows.append(
            [
                entry["stage"],
                f"{a.get('seconds', float('nan')):.1f}",
                f"{entry['seconds']:.1f}",
                _mb(a.get("peak_rss", 0)),
                _mb(entry["peak_rss"]),
            ]
        )
    publish = cold_stages.get("10_publish", {})
    rows.append(["10_publish (a only)", f"{publish.get('seconds', 0):.1f}", "", _mb(publish.get("peak_rss", 0)), ""])
    rows.append(["**flow (a) / functions (b)**", f"{cold['timings']['flow_seconds']:.1f}", f"{b['total']:.1f}", "", ""])
    rows.append(
        [
            "**process** (CPU)",
            f"{cold['process_seconds']:.1f} ({cold['process_cpu_seconds']:.1f})",
            "",
            _mb(cold["process_peak_rss"]),
            _mb(_peak(b)),
        ]
    )
    print(
        markdown_table(
            ["stage", "(a) cold build s", "(b) limit s", "(a) peak RSS MB", "(b) peak RSS MB"], rows, right_from=0
        )
    )
    ratio = cold["timings"]["flow_seconds"] / b["total"]
    print("\n| goal | measured | met |\n| --- | ---: | --- |")
    print(f"| (a) ≤ 1.3 × (b), flow against functions | {ratio:.2f} × | {'yes' if ratio <= 1.3 else 'no'} |")
    print(f"| (b) ≤ 25 s | {b['total']:.1f} s | {'yes' if b['total'] <= 25 else 'no'} |")
    peak = _peak(b) / GIB
    print(f"| (b) peak RSS ≤ 2 GiB | {peak:.2f} GiB | {'yes' if peak <= 2 else 'no'} |")
    flow_warm = warm["timings"]["flow_seconds"]
    print(f"| (c) rebuild: flow ≤ 3 s | {flow_warm:.1f} s | {'yes' if flow_warm <= 3 else 'no'} |")
    print(f"| (c) rebuild: process ≤ 5 s | {warm['process_seconds']:.1f} s ({warm['process_cpu_seconds']:.1f} s CPU) | "
          f"{'yes' if warm['process_seconds'] <= 5 else 'no'} |")  # fmt: skip
    print(
        f"| (c) rebuild: LLM requests 0 | {warm['llm_requests_sent']} | "
        f"{'yes' if not warm['llm_requests_sent'] else 'no'} |"
    )
    flow_text = text["timings"]["flow_seconds"]
    print(f"| (e) one template changed: flow ≤ 10 s | {flow_text:.1f} s | {'yes' if flow_text <= 10 else 'no'} |")
    for label, run, change in (
        ("(e)", text, f"template {edited} lost a lexical variant (it still passes)"),
        ("(d)", changed, f"template {template} made to fail the gate"),
    ):
        seconds = {t["folder"]: t["seconds"] for t in run["timings"]["stages"] if not t["cached"]}
        print(
            f"\n{label} {change}: recomputed {', '.join(f'{f} {seconds.get(f, 0):.1f} s' for f in run['recomputed'])}; "
            f"{_parts(run)}; {run['llm_requests_sent']} LLM requests sent; "
            f"flow {run['timings']['flow_seconds']:.1f} s, process {run['process_seconds']:.1f} s."
        )
    print("\n### (b) per stage as the scale grows (seconds)\n")
    folders = [entry["stage"] for entry in limits[largest]["stages"]]
    growth = []
    for folder in folders:
        seconds = [next(e["seconds"] for e in limits[s]["stages"] if e["stage"] == folder) for s in scales]
        per_step = " / ".join(
            f"{later / earlier:.2f}" if earlier > 0.05 else "–" for earlier, later in itertools.pairwise(seconds)
        )
        growth.append([folder, *(f"{s:.2f}" for s in seconds), per_step])
    print(markdown_table(["stage", *scales, "ratio per doubling"], growth, right_from=0))
    print(f"\ninputs and runs: {work}")


if __name__ == "__main__":
    main()
