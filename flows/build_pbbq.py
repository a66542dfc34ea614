"""The build-pbbq flow: the PBBQ paper's Figure 1 as a Prefect DAG (docs/architecture.md §1).

crawl → survey → survey_filter → kappa_gate → disambiguate (LLM) → instantiate → statistics. Each stage is a cached
task (inputs + code), writes ``outputs/<run_id>/NN_<stage>/`` and adds itself to the run's manifest. This
module only wires.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from pbbq.flows.config import load_config
from pbbq.flows.diff import changes_since_previous
from pbbq.flows.runs import mark_killed_runs, outputs_folder
from pbbq.tasks.artifacts import RunFolder, StageOutput, display_path
from pbbq.tasks.candidates import load_lexicon
from pbbq.tasks.crawl import crawl_counts, crawl_task, fetch_sources, load_prompt
from pbbq.tasks.disambiguate import Prompts, disambiguate_task
from pbbq.tasks.diversity import diversity_task
from pbbq.tasks.glossary import load_glossary
from pbbq.tasks.inputs import instruction_like, load_inputs
from pbbq.tasks.instantiate import instantiate_task
from pbbq.tasks.kappa_gate import kappa_gate_task
from pbbq.tasks.llm import export_transcript, usage_summary
from pbbq.tasks.names import load_gender_prompt, load_name_table, names_task
from pbbq.tasks.publish import create_release_artifact, publish_stage
from pbbq.tasks.statistics import statistics_task
from pbbq.tasks.survey_filter import survey_filter_task
from pbbq.tasks.translate import TranslatePrompts, translate_task
from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run
from prefect.states import Crashed

TRANSCRIPT_NOTE = (
    "The LLM answers this PBBQ build used: import it (llm.transcript) and build in replay mode to rebuild it "
    "byte for byte with no API key."
)


class StageRunner:
    """Runs a stage task against the run's result cache, writes its folder and logs one progress line."""

    def __init__(self, run: RunFolder, cache: Path) -> None:
        self.run, self.cache = run, cache

    def __call__(
        self, folder: str, stage: Any, *args: Any, inputs: Mapping[str, str], report: Mapping[str, Any] | None = None
    ) -> StageOutput:
        """``report``: this run's figures merged into the stage's report (the crawl's fetch, never cached)."""
        state = stage.with_options(result_storage=self.cache)(*args, return_state=True)
        output: StageOutput = state.result()
        if report:
            output = dataclasses.replace(output, report={**output.report, **report})
        record = self.run.write_stage(folder, output, inputs=inputs, cached=state.name == "Cached")
        logger = get_run_logger()
        logger.info(record.summary())
        for warning in output.report.get("warnings", []):
            logger.warning("%s: %s", folder, warning)
        return output


def mark_crashed(killed: list[dict[str, Any]]) -> None:
    """Say that the builds of killed runs crashed: their run folders read ``incomplete`` now, and their Prefect
    flow runs, left Running by a process that could not report its end, become Crashed."""
    logger = get_run_logger()
    with get_client(sync_client=True) as client:
        for manifest in killed:
            logger.warning("run %s: its build was killed; marked incomplete", manifest["run_id"])
            flow_run_id = manifest.get("process", {}).get("flow_run_id")
            if not flow_run_id:
                continue
            try:
                state = client.read_flow_run(flow_run_id).state
            except ObjectNotFound:  # recorded on another Prefect server
                continue
            if state is not None and state.is_running():
                message = f"the process of run {manifest['run_id']} ended without reporting (killed)"
                client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)


def _table_artifact(key: str, frame: Any, description: str) -> None:
    create_table_artifact(key=key, table=frame.astype(str).to_dict(orient="records"), description=description)


@flow(name="build-pbbq")
def build_pbbq(
    config: str | None = None,
    run_id: str | None = None,
    outputs: str | None = None,
    repo_id: str | None = None,
    dry_run: bool | None = None,
) -> str:
    """Build PBBQ from a configuration (default: the bundled sample) and return the run folder. ``repo_id``
    and ``dry_run`` override the configuration's [publish] section."""
    build = load_config(Path(config) if config else None)
    if repo_id is not None or dry_run is not None:
        publish = dataclasses.replace(
            build.publish,
            repo_id=repo_id if repo_id is not None else build.publish.repo_id,
            dry_run=dry_run if dry_run is not None else build.publish.dry_run,
        )
        build = dataclasses.replace(build, publish=publish)
    root = outputs_folder(outputs)
    mark_crashed(mark_killed_runs(root))
    run = RunFolder.create(root, run_id, build.parameters(), process={"flow_run_id": str(flow_run.id)})
    stage = StageRunner(run, root / ".cache" / "prefect-results")
    llm = build.llm
    if not llm.store_path.is_absolute():  # not configured: one response store per outputs folder
        llm = dataclasses.replace(llm, store_path=root / ".cache" / "llm" / "responses.sqlite")
    get_run_logger().info("run %s → %s", run.run_id, run.path)
    with run.recording():
        tables = load_inputs(build.inputs)
        run.warnings += instruction_like(tables, build.inputs)
        for warning in run.warnings:
            get_run_logger().warning("input: %s", warning)
        for name, frame in tables.items():
            if name in build.inputs:
                run.record_input(name, build.inputs[name], len(frame))
        name_table = load_name_table(build.inputs["names"], tables["templates"])
        run.record_input("names", build.inputs["names"], len(name_table))
        glossary = load_glossary(build.inputs["glossary"])
        run.record_input("glossary", build.inputs["glossary"], len(glossary))
        if build.transcript is not None:
            run.record_input("transcript", build.transcript, None)
        crawled = fetch_sources(build.crawl, root / ".crawl", log=get_run_logger().info)  # the network: not cached
        for name, path in crawled.files.items():
            run.record_input(name, path, None)
        lexicon = load_lexicon(build.crawl.lexicon_path)
        run.record_input("lexicon", build.crawl.lexicon_path, len(lexicon))
        hashes = {name: entry["sha256"] for name, entry in run.inputs.items()}

        extractor = build.crawl.llm_extractor  # only then does the LLM configuration enter the cache key
        crawl = stage(
            "01_crawl",
            crawl_task,
            crawled.posts,
            lexicon,
            build.crawl,
            llm if extractor else None,
            build.transcript if extractor else None,
            load_prompt() if extractor else "",
            inputs={"posts": crawled.sha256, "lexicon": hashes["lexicon"]},
            report=crawled.report,
        )

        survey = stage(
            "02_survey",
            survey_filter_task,
            tables["questionnaire"],
            tables["responses"],
            build.survey_filter,
            inputs={k: hashes[k] for k in ("questionnaire", "responses")},
        )
        gate = stage(
            "03_kappa_gate",
            kappa_gate_task,
            tables["templates"],
            tables["ratings"],
            survey["stereotypes"],
            build.kappa_gate,
            inputs={
                **{k: hashes[k] for k in ("templates", "ratings")},
                "stereotypes": run.artifact_hash("02_survey", "stereotypes"),
            },
        )
        prompts = Prompts.load()
        disambiguated = stage(
            "04_disambiguate",
            disambiguate_task,
            gate["gated"],
            survey["stereotypes"],
            tables["disambiguation_overrides"],
            prompts,
            llm,
            build.transcript,
            build.disambiguate,
            inputs={"gated": run.artifact_hash("03_kappa_gate", "gated"), "prompts": prompts.sha256},
        )
        examples = stage(
            "05_instantiate",
            instantiate_task,
            disambiguated["templates"],
            survey["stereotypes"],
            build.instantiate,
            inputs={
                "templates": run.artifact_hash("04_disambiguate", "templates"),
                "stereotypes": run.artifact_hash("02_survey", "stereotypes"),
            },
        )
        labeller = build.names.gender_llm  # only then does the LLM configuration enter the cache key
        proxies = stage(
            "06_names",
            names_task,
            examples["examples"],
            name_table,
            build.names,
            llm if labeller else None,
            build.transcript if labeller else None,
            load_gender_prompt() if labeller else "",
            inputs={"examples": run.artifact_hash("05_instantiate", "examples"), "names": hashes["names"]},
        )
        translation_prompts = TranslatePrompts.load()
        english = stage(
            "07_translate",
            translate_task,
            examples["examples"],
            tables["unknown_phrases"],
            glossary,
            translation_prompts,
            llm,
            build.transcript,
            build.translate,
            inputs={
                "examples": run.artifact_hash("05_instantiate", "examples"),
                "glossary": hashes["glossary"],
                "prompts": translation_prompts.sha256,
            },
        )
        dataset = pd.concat([examples["examples"], proxies["examples"], english["examples"]], ignore_index=True)
        dataset_hashes = {
            "fa": run.artifact_hash("05_instantiate", "examples"),
            "fa-names": run.artifact_hash("06_names", "examples"),
            "en": run.artifact_hash("07_translate", "examples"),
        }
        diversity = stage(
            "08_diversity",
            diversity_task,
            dataset,
            disambiguated["templates"],
            build.diversity,
            inputs={**dataset_hashes, "templates": run.artifact_hash("04_disambiguate", "templates")},
        )
        stats = stage(
            "09_statistics",
            statistics_task,
            survey["stereotypes"],
            gate["templates"],
            dataset,
            examples["dropped_pairs"],
            crawl_counts(crawl),
            inputs={
                **dataset_hashes,
                "stereotypes": run.artifact_hash("02_survey", "stereotypes"),
                "templates": run.artifact_hash("03_kappa_gate", "templates"),
                "dropped_pairs": run.artifact_hash("05_instantiate", "dropped_pairs"),
            },
        )
        transcript = run.path / "transcript.jsonl"
        used = {
            *crawl["candidates"]["llm_request_id"].loc[lambda ids: ids != ""],
            *disambiguated["attempts"]["request_id"],
            *proxies["examples"]["llm_request_ids"].explode().dropna(),
            *english["segments"]["request_ids"].explode().dropna(),
        }
        export_transcript(llm, used, transcript, note=TRANSCRIPT_NOTE)
        run.record_file(transcript, rows=len(used))
        release_manifest = run.write_manifest("built", target=run.path / "10_publish" / "manifest.json")
        run.record_file(release_manifest)
        publish = publish_stage(
            run.path / "10_publish",
            dataset,
            table1=stats["table1"],
            table2=diversity["table2"],
            funnel=stats["funnel"],
            manifest_path=release_manifest,
            transcript_path=transcript,
            build_id=run.run_id,
            build_config=display_path(build.path),
            params=build.publish,
        )
        run.write_stage("10_publish", publish, inputs={"manifest": publish.report["manifest_sha256"]}, cached=False)
        run.record_tree(Path(publish.report["folder"]))
        create_release_artifact(publish.report)
        logger = get_run_logger()
        for line in usage_summary({r.folder: r.report for r in run.stages}):
            logger.info("LLM %s", line)
        logger.info("release: %s", publish.report["link"])
        _table_artifact("funnel", stats["funnel"], "From surveyed stereotypes to examples, this build")
        _table_artifact("table-1", stats["table1"], "Templates and samples per category and config (Table 1)")
        _table_artifact("table-2", diversity["table2"], "Diversity per category on template texts (Table 2)")
        _table_artifact(
            "table-2-instances", diversity["table2_instances"], "Diversity per category and config, on instances"
        )
        _table_artifact(
            "survey-filter",
            survey["stereotypes"][["stereotype_id", "category", "acceptance", "ci_low", "ci_high", "kept", "reason"]],
            "Acceptance per stereotype (keep > threshold)",
        )
        _table_artifact(
            "kappa-gate",
            gate["templates"][["template_id", "category", "kappa", "kappa_note", "mean_relevance", "kept", "reason"]],
            "Fleiss' kappa and mean relevance per template",
        )
        create_markdown_artifact(
            key="changes", markdown=changes_since_previous(run.path), description="pbbq diff against the last run"
        )
    return str(run.path)
