"""The build-pbbq flow: the PBBQ paper's Figure 1 as a Prefect DAG (docs/architecture.md §1).

It only wires: it reads the configuration, loads and checks the build's inputs (:mod:`.build_inputs`), opens the
run folder and the LLM client, makes the runner (:class:`~.runner.PipelineRunner`) that runs the pipeline the
configuration chooses (``flows/pipeline.py``), and closes the run (the release's files, the artifacts, the
``changes`` diff, ``timings.json``). Where the stages run and how a stopped build ends is :mod:`.task_runners`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from ..tasks.core.artifacts import ArtifactStore, atomic_write_bytes, json_text
from ..tasks.core.code_hash import code_hashes_kept
from ..tasks.core.progress import StageProgress
from ..tasks.core.run_folder import RunFolder
from ..tasks.llm import open_llm, usage_summary
from ..tasks.publish import create_release_artifact
from ..tasks.text.languages import using
from .audit.runs import mark_killed_runs, outputs_folder
from .build_inputs import CRAWLED, STAGE_FILES, load_build_inputs, preload_for_changed_inputs
from .config import check_store_path, load_config
from .release_values import release_hashes, release_values
from .run_records import changes_when_done, last_computed, mark_crashed, table_artifacts
from .runner import PipelineRunner
from .task_runners import STOPS, StageThreads, ended_when_stopped, share_languages

STAND_IN_WARNING = (
    'STAND-IN answers: every LLM answer of this build is placeholder text (--stand-in, [llm] mode = "stand-in", '
    "or a replay of such a build's transcript), "
    "not a model's; its dataset card says so and publish does not upload it"
)


@flow(name="build-pbbq", task_runner=StageThreads())  # type: ignore[arg-type]  # prefect 3.8 types a runner invariant in its future
def build_pbbq(
    config: str | None = None,
    run_id: str | None = None,
    outputs: str | None = None,
    repo_id: str | None = None,
    dry_run: bool | None = None,
    force_synthetic: bool | None = None,
    stand_in: bool | None = None,
    pipeline: Any = None,
) -> str:
    """Build PBBQ from a configuration (default: the bundled sample) and return the run folder. ``repo_id``,
    ``dry_run`` and ``force_synthetic`` override the configuration's [publish] section; ``stand_in`` answers every
    LLM request with labelled placeholders (``[llm] mode = "stand-in"``, :mod:`pbbq.tasks.llm.stand_in`);
    ``pipeline``: a :class:`~pbbq.tasks.core.stage.Pipeline` to run instead of the one the configuration chooses
    (typed ``Any`` for Prefect: a deployment validates its flow's parameters from the entrypoint's source, where
    an imported class is not defined)."""
    build = load_config(Path(config) if config else None, pipeline).with_publish(repo_id, dry_run, force_synthetic)
    if stand_in:
        build = build.with_stand_in()
    share_languages(build.languages)
    root = outputs_folder(outputs)
    mark_crashed(mark_killed_runs(root))
    store = ArtifactStore(root / ".cache" / STAGE_FILES)
    for leftover in store.remove_leftovers():  # a killed build's half-written files
        get_run_logger().info("removed %s, left by a killed build", leftover)
    started = time.perf_counter()
    with using(build.registry), ended_when_stopped(), code_hashes_kept(store):
        inputs = load_build_inputs(build, root, log=get_run_logger().info)  # a bad input: no run folder is made
        preload_for_changed_inputs(inputs, build.pipeline)
        run = RunFolder.create(root, run_id, build.parameters(), process={"flow_run_id": str(flow_run.id)})
        llm = build.llm
        if not llm.store_path.is_absolute():  # not configured: one response store per outputs folder
            llm = dataclasses.replace(llm, store_path=root / ".cache" / "llm" / "responses.sqlite")
        get_run_logger().info("run %s → %s", run.run_id, run.path)
        with run.recording(STOPS), StageProgress(last_computed(run.path)) as progress:
            check_store_path(llm.store_path, build.path)  # this run's own folder is a run folder now
            client = open_llm(llm, build.transcript)  # a damaged transcript stops the build here, before stage 01
            if client.stand_in:
                run.warnings.append(STAND_IN_WARNING)
                get_run_logger().warning(STAND_IN_WARNING)
            run.warnings += inputs.warnings
            for warning in inputs.warnings:
                get_run_logger().warning("input: %s", warning)
            for name, (path, rows) in inputs.files.items():
                run.record_input(name, path, rows, sha256=inputs.hashes[name])
            runner = PipelineRunner(
                run,
                root / ".cache" / "prefect-results",
                build,
                client,
                inputs,
                release_values(run, build, client, lambda: runner),
                build.pipeline,
                progress=progress,
                max_parallel=build.running.max_parallel_stages,
            )
            if CRAWLED in inputs.tables:
                runner.reports[build.pipeline.folder("crawl")] = inputs.fetch_report
            runner.make_early("transcript_path", after=(s.folder for s in build.pipeline if s.request_ids is not None))
            changes = changes_when_done(runner, run.path)
            runner.run_all()
            published = runner.outputs[build.pipeline.folder("publish")]
            release = published.report
            run.record_tree(Path(release["folder"]), known=release_hashes(published))
            create_release_artifact(release)
            logger = get_run_logger()
            for line in usage_summary({r.folder: r.report for r in run.stages}):
                logger.info("LLM %s", line)
            logger.info("release: %s", release["link"])
            table_artifacts(runner)
            run.write_manifest("running")  # the diff reads this run's inputs, code and tables from its manifest
            create_markdown_artifact(key="changes", markdown=changes(), description="pbbq diff against the last run")
            timings = {"flow_seconds": time.perf_counter() - started, "stages": runner.timings}
            atomic_write_bytes(run.path / "timings.json", json_text(timings).encode("utf-8"))
            run.record_file(run.path / "timings.json")  # listed, like every file of the run; its times differ per run
    return str(run.path)
