"""Benchmark: a sheet row that multiplies its words (issue 35 item 3), built with the cap raised.

Run from the repository root: ``python -m benchmarks.sheet_blowup [--words N] [--code DIR ...]``. It writes the
adaptation sample's sheet with one row blown up (:func:`blown_up_sheet`: ``PK-NA-1``'s ambiguous context gets
``{{WORD1}}`` and ``{{WORD2}}`` with N words each, N × N lexical variants) and a configuration of the sample that
builds English only (no ``[translate]``: the stages after instantiation need no LLM answer that the sample's
transcript lacks) with ``[build] max_examples_per_template`` raised past the row's estimate, then runs ``pbbq
build`` with each ``--code`` checkout (default: this one; a checkout from before the cap gets no ``[build]`` key) in a
process of its own, fresh outputs each, and prints the rows of ``en`` and ``en-names``, the build's peak RSS (the
process's ``ru_maxrss``), its peak by the end of each stage (``timings.json``) and the seconds.

Measured on the 2-core machine (:data:`MEASURED`; the seconds depend on the machine's load). N = 100 gives 160,432
``en`` and 481,056 ``en-names`` rows, N = 50 40,432 and 121,056, N = 25 10,432 and 31,056. **The bound**
(:func:`bound`, printed beside each build's peak), fitted above the three builds of the merged memory work (peaks
0.66, 0.95 and 1.93 GB): peak RSS ≤ 0.63 GB + 2.05 KB × (``en`` + ``en-names`` rows), linear in the rows (b929d3b:
0.69 GB + 5.0 KB; db5155e: 0.89 GB + 5.3 KB); under 2 GiB up to about 740,000 rows, so N = 100 (641,488 rows)
builds in 1.93 GB and one template at the default cap (100,000 ``en``, about 400,000 rows with its names) in about
1.45 GB. The peak is now at the end of the names stage (the ``en`` and ``en-names`` frames and the names stage's
writing of its output); diversity, statistics and the release data add nothing above it at N = 100
(docs/scale.md, "A blown-up sheet row").
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "configs" / "adapt-sample.toml"
SHEET = REPO / "annotations" / "bbq" / "adapt-sheet-pakistan-sample.csv"
ROW = "PK-NA-1"
"""The sample's row that is blown up: an NA row of 16 examples, through the gate."""
TRANSLATION_INPUTS = ("bbq_glossary", "bbq_unknown_phrases")
"""The sample's inputs only a translation reads."""
MEASURED = {
    "a5452f8, issue 35's figure": "peak RSS 4.3 GB, 129 s",
    "a5452f8, the last session": "peak RSS 4.50 GB (1.09 GB when instantiation was written), 787 s",
    "db5155e, N = 100": "peak RSS 4.46 GB; by the end of 05_instantiate 0.93, 06_names 4.01, the rest 4.46 GB; 598 s",
    "h-mem before its diversity change, N = 100": "peak RSS 4.43 GB (4.65 GB sampled every 0.5 s); 0.93, 4.01, "
    "4.43 GB; 661 s",
    "h-mem, N = 100": "peak RSS 4.28 GB; 0.93, 4.01, 4.28 GB; 456 s",
    "h-mem, N = 50": "peak RSS 1.74 GB; 0.58, 1.36, 1.74 GB; 66 s",
    "db5155e, N = 100, beside h-mem2's first step": "peak RSS 4.45 GB; 0.93, 4.01, 4.45 GB; 598 s",
    "h-mem2, frames pickled into the store": "peak RSS 4.22 GB; 0.81, 3.48, 4.22 GB; 597 s",
    "h-mem2, + names by column, stacks shared, frames let go": "peak RSS 3.90 GB; 0.81, 3.11, 3.90 GB; 399 s",
    "h-mem2, + let go table by table, N = 100": "peak RSS 3.91 GB; 0.84, 3.10, 3.91 GB; 213 s",
    "h-mem2, N = 50, in one run with db5155e": "peak RSS 1.64 GB (db5155e 1.80); 0.56, 1.11, 1.64 GB; 85 s",
    "b929d3b, N = 100 (under memray)": "peak RSS 4.37 GB; 0.89, 3.07, 4.47 GB; 146 s",
    "h-relmem, N = 100": "peak RSS 3.80 GB (3.89 by timings.json); 0.71, 2.99, 3.89 GB; 345 s, the machine shared",
    "h-relmem, N = 50": "peak RSS 1.31-1.46 GB in two runs; 0.54-0.55, 1.09-1.11, 1.34-1.49 GB; 48-64 s",
    "h-divmem + h-namesmem + h-relmem merged, N = 100, idle": "peak RSS 1.93 GB; 0.72, 1.93, 1.93 GB; 112 s",
    "merged, N = 50, idle": "peak RSS 0.95 GB; 0.54, 0.86, 0.95 GB; 32 s",
    "merged, N = 25, idle": "peak RSS 0.66 GB; 0.45, 0.57, 0.66 GB; 18 s",
}
BOUND_BASE = 0.63e9
"""The fitted bound's constant, bytes (:func:`bound`)."""
BOUND_PER_ROW = 2.05e3
"""The fitted bound's bytes per ``en`` or ``en-names`` row (:func:`bound`)."""


def blown_up_sheet(words: int, out: Path) -> Path:
    """The sample sheet with :data:`ROW`'s ambiguous context naming ``{{WORD1}}`` and ``{{WORD2}}``, each with
    ``words`` words: ``words²`` lexical variants of its 16 examples."""
    with SHEET.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    row = next(row for row in rows if row["template_id"] == ROW)
    row["target_ambiguous"] += " They met at the {{WORD1}} by the {{WORD2}}."
    first = ", ".join(f"a{i}" for i in range(words))
    second = ", ".join(f"b{i}" for i in range(words))
    row["target_lexical_diversity"] = f"WORD1: [{first}]; WORD2: [{second}]"
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    out.write_text(buffer.getvalue(), encoding="utf-8")
    return out


def english_config(sheet: Path, out: Path, cap: int | None) -> Path:
    """The sample's configuration with ``sheet`` as its sheet, every input by absolute path, no ``[translate]``
    nor its inputs (English only) and, unless None, ``[build] max_examples_per_template = cap``."""
    lines, section = [], ""
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            section = line.strip()
        if section == "[translate]" or line.split("=")[0].strip() in TRANSLATION_INPUTS:
            continue
        if section in ("[inputs]", "[llm]", "[review]") and '= "../' in line:
            key, value = line.split("=", 1)
            path = sheet if key.strip() == "adapt_sheet" else (SAMPLE.parent / value.split('"')[1]).resolve()
            line = f'{key.strip()} = "{path}"'
        lines.append(line)
    if cap is not None:
        lines += ["", "[build]", f"max_examples_per_template = {cap}"]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@dataclass(frozen=True)
class Built:
    """What one build of the benchmark gave."""

    exit: int
    seconds: float
    peak_rss: int
    """The build process's peak RSS in bytes (``ru_maxrss``)."""
    stage_peaks: dict[str, int]
    """Stage folder → the process's peak RSS by the end of that stage (``timings.json``)."""
    rows: dict[str, int]
    """``05_instantiate`` (``en``) and ``06_names`` (``en-names``) → rows."""
    error: str

    def bound(self) -> float:
        """The peak RSS in bytes that :func:`bound` gives for this build's rows."""
        return bound(sum(self.rows.values()))


def bound(rows: int) -> float:
    """The fitted bound on a build's peak RSS in bytes for ``rows`` ``en`` and ``en-names`` rows (the module
    docstring): :data:`BOUND_BASE` + :data:`BOUND_PER_ROW` × rows."""
    return BOUND_BASE + BOUND_PER_ROW * rows


def build(code: Path, config: Path, outputs: Path) -> Built:
    """``pbbq build`` of ``config`` with the code of ``code`` in a process of its own: its exit status, seconds,
    peak RSS, the process's peak by the end of each stage (``timings.json``; stages that ran side by side end
    together) and the rows of each config."""
    command = [sys.executable, "-m", "pbbq.flows.cli", "build", "--config", str(config), "--outputs", str(outputs)]
    command += ["--run-id", "bench"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    error = process.stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:] if process.stderr else []
    run = outputs / "bench"
    rows: dict[str, int] = {}
    stage_peaks: dict[str, int] = {}
    if (run / "manifest.json").is_file():
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        for stage in manifest["stages"]:
            for artifact in stage["artifacts"]:
                if artifact["path"] in ("05_instantiate/examples.parquet", "06_names/examples.parquet"):
                    rows[artifact["path"].split("/")[0]] = artifact["rows"]
    if (run / "timings.json").is_file():
        timings = json.loads((run / "timings.json").read_text(encoding="utf-8"))["stages"]
        stage_peaks = {stage["folder"]: stage["peak_rss"] for stage in timings}
    return Built(
        exit=os.waitstatus_to_exitcode(status),
        seconds=seconds,
        peak_rss=usage.ru_maxrss * 1024,
        stage_peaks=stage_peaks,
        rows=rows,
        error=error[0] if error and status else "",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=100, help="words per WORD list (default: %(default)s)")
    parser.add_argument(
        "--code", type=Path, nargs="+", default=[REPO], help="checkouts to build with (default: this one)"
    )
    parser.add_argument("--before-cap", type=Path, nargs="*", default=[], help="of --code: those without the cap")
    args = parser.parse_args()
    estimate = (args.words**2) * 16
    with tempfile.TemporaryDirectory(prefix="sheet-blowup-") as folder:
        work = Path(folder)
        sheet = blown_up_sheet(args.words, work / "sheet.csv")
        for number, code in enumerate(args.code):
            cap = None if code in args.before_cap else estimate
            config = english_config(sheet, work / f"config-{number}.toml", cap)
            result = build(code.resolve(), config, work / f"outputs-{number}")
            peaks = ", ".join(f"{folder} {peak / 1e9:.2f}" for folder, peak in result.stage_peaks.items())
            print(
                f"{code}: exit {result.exit}, en {result.rows.get('05_instantiate')}, "
                f"en-names {result.rows.get('06_names')}, peak RSS {result.peak_rss / 1e9:.2f} GB "
                f"(the fitted bound {result.bound() / 1e9:.2f} GB; by the end of each stage, GB: {peaks}), "
                f"{result.seconds:.0f} s {result.error}"
            )


if __name__ == "__main__":
    main()
