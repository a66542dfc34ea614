"""What the publish stage gets from the run (its folder, transcript, manifest, funnel) and the hashes it took of
the release's files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..tasks.core.artifacts import StageOutput
from ..tasks.core.run_folder import RunFolder, display_path
from ..tasks.llm import LLMClient
from .config import BuildConfig
from .pipeline import extra_funnel, funnel_labels, gate_section
from .runner import PipelineRunner

TRANSCRIPT_NOTE = (
    "The LLM answers this PBBQ build used: import it (llm.transcript) and build in replay mode to rebuild it "
    "byte for byte with no API key."
)


def release_values(
    run: RunFolder, build: BuildConfig, client: LLMClient, runner: Callable[[], PipelineRunner]
) -> dict[str, Callable[[], Any]]:
    """What the publish stage gets from the run: its folder, the run's transcript (and its hash, as the run recorded
    it) and the release's copy of the manifest (written when publish asks for them, after every other stage); and
    the funnel's extra steps and labels, from the stages' declarations; the sheet's example cap ([build])."""
    folder = run.path / build.pipeline.folder("publish")
    written = threading.Lock()

    def transcript() -> Path:
        path = run.path / "transcript.jsonl"
        with written:  # made early in a thread of its own (PipelineRunner.make_early) or when publish asks
            if any(f.path == path.name for f in run.files):
                return path
            outputs = runner().outputs
            used = {
                request
                for stage in runner().pipeline
                if stage.request_ids is not None and stage.folder in outputs
                for request in runner().request_ids(stage)
            }
            digest = client.export(used, path, note=TRANSCRIPT_NOTE, kept=runner().store)
            run.record_file(path, rows=len(used), sha256=digest)
        return path

    def manifest() -> Path:
        transcript()
        path = run.write_manifest("built", target=folder / "manifest.json")
        run.record_file(path)
        return path

    return {
        "out_dir": lambda: folder,
        "transcript_path": transcript,
        "transcript_sha256": lambda: run.sha256_of(transcript()),
        "manifest_path": manifest,
        "build_id": lambda: run.run_id,
        "build_config": lambda: display_path(build.path),
        "funnel_labels": lambda: funnel_labels(runner().pipeline),
        "gate": lambda: build.params(gate_section(build.pipeline)),
        "extra_funnel": lambda: extra_funnel(runner().outputs, runner().pipeline),
        "example_cap": build.example_cap,
    }


def release_hashes(published: StageOutput) -> dict[str, str]:
    """The hashes publish took of the release's files, by path in the release folder: the data files' from the
    content store's names, the manifest's and the card's as written, the transcript's as the run recorded it."""
    files = [*published["release_files"].to_dict(orient="records"), *published.report["build_named_files"]]
    return {str(file["path"]): str(file["sha256"]) for file in files}
