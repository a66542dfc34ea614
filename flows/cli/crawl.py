"""``pbbq crawl``, ``pbbq questionnaire`` and ``pbbq responses``: the survey's side of the DAG (PBBQ §3.2).

pbbq crawl [--sample | --config FILE | --sources FILE] [--recorded-pages DIR] [--outputs DIR] [--run-id ID]
    crawls the sources into ``<outputs>/<run>/01_crawl/`` (posts, candidates, clusters, review.csv, report.json),
    keeping the scrubbed posts and the cursors under ``<outputs>/.crawl/`` for the next run.
pbbq questionnaire --reviewed SHEET [--questionnaire FILE] [--forms DIR] [--versions N] [--seed N]
    adds the experts' kept rows to the questionnaire and writes the respondents' form, one CSV per version.
pbbq responses --export FILE [FILE ...] [--questionnaire FILE] [--out FILE] [--write-ins FILE]
    turns a form tool's response export into ``survey/responses.csv``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from .arguments import integer, run_id

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository (``pbbq.tasks.core.artifacts.REPO_ROOT``, not imported here: ``pbbq --help`` must not load pandas)."""
SURVEY = REPO_ROOT / "survey"


class CrawlConfigError(ValueError):
    """A ``[crawl]`` section that cannot be used."""


def crawl_section(path: Path) -> tuple[Any, dict[str, Any], Path | None]:
    """The ``[crawl]`` section of a TOML file (a build configuration or a file of its own) as CrawlParams with
    its paths resolved against the file, and the ``[llm]`` section with its transcript, for the extractor."""
    from ...tasks.crawl import CrawlParams

    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CrawlConfigError(f"{path}: cannot read the configuration ({exc})") from None
    values = raw.get("crawl", {})
    known = {f.name for f in fields(CrawlParams)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise CrawlConfigError(
            f"{path}: [crawl] has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    try:
        params = CrawlParams(**values).relative_to(path.parent)
    except (TypeError, ValueError) as exc:
        raise CrawlConfigError(f"{path}: [crawl] {exc}") from None
    llm = dict(raw.get("llm", {}))
    transcript = llm.pop("transcript", None)
    if "store_path" in llm:
        llm["store_path"] = (path.parent / llm["store_path"]).resolve()
    return params, llm, (path.parent / transcript).resolve() if transcript else None


def add_crawl_commands(subparsers: Any) -> None:
    """Register ``crawl``, ``questionnaire`` and ``responses`` on the ``pbbq`` parser; handler in ``args.handler``."""
    crawl = subparsers.add_parser("crawl", help="crawl the stereotype sources into candidates and a review sheet")
    where = crawl.add_mutually_exclusive_group()
    where.add_argument("--sample", action="store_true", help="the sample's [crawl] (synthetic recorded pages)")
    where.add_argument("--config", type=Path, help="a TOML file with a [crawl] section (e.g. a build configuration)")
    where.add_argument("--sources", type=Path, help="a sources file, default parameters (default: crawl/sources.toml)")
    crawl.add_argument("--recorded-pages", type=Path, help="answer preview requests from this folder (no network)")
    crawl.add_argument("--outputs", type=Path, help="where runs go (default: $PBBQ_OUTPUTS or outputs/)")
    crawl.add_argument("--run-id", type=run_id, help="name of the run folder (default: time + random suffix)")
    crawl.set_defaults(handler=crawl_command)

    questionnaire = subparsers.add_parser("questionnaire", help="the reviewed sheet into the questionnaire and form")
    questionnaire.add_argument("--reviewed", type=Path, required=True, help="the experts' review.csv, filled in")
    questionnaire.add_argument("--questionnaire", type=Path, default=SURVEY / "questionnaire.csv")
    questionnaire.add_argument("--forms", type=Path, help="folder of the form CSVs (default: forms/ beside it)")
    questionnaire.add_argument(
        "--versions", type=integer(1), default=2, help="form versions, each shuffled (default 2)"
    )
    questionnaire.add_argument("--seed", type=integer(0), default=42, help="seed of the shuffles (default 42)")
    questionnaire.set_defaults(handler=questionnaire_command)

    responses = subparsers.add_parser("responses", help="a form tool's response export into responses.csv")
    responses.add_argument("--export", type=Path, nargs="+", required=True, help="the export CSV(s), one per version")
    responses.add_argument("--questionnaire", type=Path, default=SURVEY / "questionnaire.csv")
    responses.add_argument("--out", type=Path, default=SURVEY / "responses.csv")
    responses.add_argument("--write-ins", type=Path, help="where the scrubbed write-ins go (default: beside --out)")
    responses.set_defaults(handler=responses_command)


def crawl_command(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ...tasks.core.run_folder import RunFolder
    from ...tasks.crawl import CrawlParams, crawl, load_prompt, with_fetch_report
    from ...tasks.crawl.candidates import load_lexicon
    from ...tasks.crawl.fetch import fetch_sources, fetch_summary
    from ...tasks.crawl.sources import DEFAULT_SOURCES, configured_sources
    from ..audit.runs import outputs_folder

    llm_section: dict[str, Any] = {}
    transcript = None
    if args.sample or args.config:
        params, llm_section, transcript = crawl_section(args.config or REPO_ROOT / "configs" / "sample.toml")
    else:
        params = CrawlParams(sources=str((args.sources or DEFAULT_SOURCES).resolve()))
    if args.recorded_pages:
        params = replace(params, recorded_pages=str(args.recorded_pages.resolve()))
    client, prompt = None, ""
    if params.llm_extractor:
        from ...tasks.llm import LLMConfig, open_llm

        client, prompt = open_llm(LLMConfig.from_mapping(llm_section), transcript), load_prompt()
    configured_sources(params)  # a wrong sources file fails here, before a run folder exists
    outputs = outputs_folder(str(args.outputs) if args.outputs else None)
    run = RunFolder.create(outputs, args.run_id, {"crawl": asdict(params)})
    with run.recording():
        fetched = fetch_sources(params, outputs / ".crawl", log=lambda line: print(line, file=sys.stderr))
        for name, path in fetched.files.items():
            run.record_input(name, path, None)
        lexicon = load_lexicon(params.lexicon_path)
        run.record_input("lexicon", params.lexicon_path, len(lexicon))
        output = with_fetch_report(
            crawl(posts=fetched.posts, lexicon=lexicon, params=params, client=client, prompt=prompt), fetched
        )
        run.write_stage("01_crawl", output, inputs={"posts": fetched.sha256}, cached=False)
    for warning in output.report.get("warnings", []):
        print(f"pbbq crawl: warning: {warning}", file=sys.stderr)
    if output.report.get("skipped"):
        print(f"crawl skipped: {output.report['skip_reason']}")
    counts = output.report["counts"]
    print(fetch_summary(output.report, counts["posts"], fetched.posts["source"].nunique()))
    print(
        f"{counts['candidates']} candidate stereotypes in them, in {counts['clusters']} clusters of "
        f"near-duplicates; review sheet: {run.path / '01_crawl' / 'review.csv'}"
    )
    print(run.path)
    return 0


def _write_all(files: dict[Path, bytes]) -> None:
    """Write files that are all checked already, each through a temporary file and a rename."""
    from ...tasks.core.artifacts import atomic_write_bytes

    for path, data in files.items():
        atomic_write_bytes(path, data)


def questionnaire_command(args: argparse.Namespace) -> int:
    """Check the sheet, the new questionnaire and every form first; then write them (a failure changes no file)."""
    from ...tasks.crawl.survey_form import form_files, kept_rows, questionnaire_update

    sheet = kept_rows(args.reviewed)
    update = questionnaire_update(args.questionnaire, sheet)
    forms = form_files(
        update.questionnaire, args.forms or args.questionnaire.parent / "forms", args.versions, args.seed
    )
    update.write()
    _write_all(forms)
    decided = ", ".join(f"{n} {name}" for name, n in sheet.decisions.items())
    print(f"{args.reviewed}: {decided}")
    new_ids = ", ".join(update.added["stereotype_id"]) or "-"
    print(f"{len(update.added)} new stereotype(s): {new_ids} → {args.questionnaire}")
    for entry in update.already:
        print(f"row {entry['row']} ({entry['cluster_id']}): already in the questionnaire as {entry['stereotype_id']}")
    for path in forms:
        print(f"form: {path}")
    return 0


def _csv_bytes(frame: Any) -> bytes:
    return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def responses_command(args: argparse.Namespace) -> int:
    """Check the exports and the responses file they make first; then write it (a failure changes no file)."""
    from ...tasks.core.inputs import load_questionnaire, load_responses
    from ...tasks.crawl.survey_form import read_form_exports

    questionnaire = load_questionnaire(args.questionnaire)
    imported = read_form_exports(args.export, questionnaire)
    responses = _csv_bytes(imported.responses)
    load_responses(args.out, questionnaire["stereotype_id"], data=responses)  # what will be written must load
    write_ins = args.write_ins or args.out.with_name("write_ins.csv")
    files = {args.out: responses}
    if len(imported.write_ins):
        files[write_ins] = _csv_bytes(imported.write_ins)
    _write_all(files)
    report = imported.report
    print(f"{report['respondents']} respondents → {args.out}")
    for duplicate in report["duplicates"]:
        print(f"duplicate submission left out: {duplicate['submission']} (same answers as {duplicate['same_as']})")
    if report["missing_answers"]:
        print("missing answers: " + json.dumps(report["missing_answers"], ensure_ascii=False))
    if report["not_in_any_export"]:
        print("questions in no export (empty for everyone): " + ", ".join(report["not_in_any_export"]))
    if report["write_ins"]:
        print(f"{report['write_ins']} write-in(s), scrubbed → {write_ins}")
    return 0
