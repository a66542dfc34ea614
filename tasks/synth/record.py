"""The transcript of a synthetic build: the build's own stages (survey filter, kappa gate, disambiguate,
instantiate, translate into every target) run on the written inputs against the real LLM client, its transport
the stand-in model (:mod:`.model`); every answer they used is written as the transcript the build replays, and
what the stages found per category is checked against the plan.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.inputs import load_inputs
from ..core.stage import Resource
from ..disambiguate import Prompts, disambiguate
from ..instantiate import instantiate
from ..kappa_gate import kappa_gate
from ..llm import LLMClient, LLMConfig, ResponseStore
from ..names.tables import load_name_table
from ..survey_filter import survey_filter
from ..text.languages import using
from ..translate import translate_stage
from ..translate.glossary import load_glossary
from .files import LLM_SECTION, MODEL, TRANSCRIPT
from .generate import SynthTemplate
from .model import StandInModel
from .scale import TABLE1, CategoryPlan, SynthError

MEMORY = Path(":memory:")
"""Where synth's response stores are: SQLite in memory (a commit per answer on disk costs ~1 ms)."""
CREATED_AT = "1970-01-01T00:00:00+00:00"
"""Every transcript record's time: fixed, so that a seed gives the same bytes."""
TRANSCRIPT_NOTE = (
    "SYNTHETIC answers: no model wrote them. pbbq synth ran the build's own stages against the real LLM client, "
    "its transport replaced by a deterministic stand-in that computes each answer from the request (placeholder "
    "Persian continuations and English translations from a small phrase book; a few first answers break a rule "
    "on purpose, so retries are recorded too)."
)


ReadConfig = Callable[[Path], Any]
"""Reads a ``build.toml`` into the build's configuration: :func:`pbbq.flows.config.load_config`, passed in by the
caller (a task does not import the flows, which sit above it: docs/architecture.md §2)."""


def record_transcript(
    folder: Path,
    templates: Sequence[SynthTemplate],
    seed: int,
    targets: Sequence[str],
    log: Callable[[str], None],
    read_config: ReadConfig,
) -> tuple[pd.DataFrame, int, dict[str, float]]:
    """Run the build's stages on the written inputs with the stand-in (reading build.toml adds the synthetic
    languages), translating into every target as the build's translate stages do, and write the transcript of
    every request they made. Returns the counts per category (a column per target) and the requests."""
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    build = read_config(folder / "build.toml")
    with using(build.registry):  # the synthetic languages build.toml adds
        tables = load_inputs(build.inputs)
        load_name_table(build.inputs["names"], tables["templates"])
        glossary = load_glossary(build.inputs["glossary"])
        seconds["load"] = time.perf_counter() - clock
        config = dataclasses.replace(LLMConfig.from_mapping(LLM_SECTION, env={}), mode="live", store_path=MEMORY)
        store = ResponseStore(MEMORY)
        client = LLMClient(config, store, transport=StandInModel(templates, seed, targets))
        clock = time.perf_counter()
        survey = survey_filter(tables["questionnaire"], tables["responses"], build.survey_filter)
        gate = kappa_gate(tables["templates"], tables["ratings"], survey["stereotypes"], build.kappa_gate)
        log(
            f"survey: {int(survey['stereotypes']['kept'].sum())} of {len(survey['stereotypes'])} stereotypes accepted; "
            f"gate: {len(gate['gated'])} of {len(gate['templates'])} templates kept"
        )
        prompts = Prompts.load()
        overrides = tables["disambiguation_overrides"]
        disambiguated = disambiguate(
            gate["gated"], survey["stereotypes"], overrides, prompts, client, build.disambiguate
        )
        examples = instantiate(disambiguated["templates"], survey["stereotypes"], build.instantiate)["examples"]
        seconds["stages to instantiate"] = time.perf_counter() - clock
        log(f"disambiguate: {len(disambiguated['attempts'])} answers; instantiate: {len(examples):,} fa examples")
        clock = time.perf_counter()
        used = set(disambiguated["attempts"]["request_id"])
        translated: dict[str, pd.DataFrame] = {}
        for number, code in enumerate(targets):
            stage = translate_stage(code, first=number == 0)
            resources = {
                name: source.load()
                for name, source in stage.inputs.items()
                if name in ("prompts", "pair") and isinstance(source, Resource)
            }
            output = stage.run(
                examples,
                tables["unknown_phrases"],
                glossary,
                client=client,
                **resources,
                params=build.params(stage.name),
            )
            translated[code] = output["examples"]
            used |= set(output["segments"]["request_ids"].explode().dropna())
            log(
                f"{stage.name}: {len(output['segments']):,} segments, {len(output['attempts']):,} answers; "
                f"{len(output['examples']):,} {code} examples"
            )
        seconds["translate"] = time.perf_counter() - clock
        clock = time.perf_counter()
        with ResponseStore(MEMORY) as final:
            for key in sorted(used):
                record = store.get(key)
                if record is None:
                    raise SynthError(f"request {key[:12]} was made but not recorded")
                final.put(dataclasses.replace(record, created_at=CREATED_AT))
            header = {"note": TRANSCRIPT_NOTE, "synthetic": True, "generator": "pbbq synth"}
            count = final.export_jsonl(folder / TRANSCRIPT, header=header | {"provider": "openai", "model": MODEL})
        store.close()
        seconds["transcript"] = time.perf_counter() - clock
        stereotypes = survey["stereotypes"]
        counts = (
            pd.DataFrame(
                {
                    "stereotypes": stereotypes.groupby("category").size(),
                    "accepted": stereotypes[stereotypes["kept"]].groupby("category").size(),
                    "templates": gate["templates"].groupby("category").size(),
                    "gated": gate["gated"].groupby("category").size(),
                    "fa": examples.groupby("category").size(),
                    **{code: frame.groupby("category").size() for code, frame in translated.items()},
                }
            )
            .reindex(list(TABLE1))
            .fillna(0)
            .astype("int64")
        )
        return counts, count, seconds


def check_counts(counts: pd.DataFrame, plans: Sequence[CategoryPlan]) -> None:
    """What the build's stages found must be the plan: a difference is a bug of the generator."""
    for p in plans:
        found = counts.loc[p.category]
        wanted = {
            "stereotypes": p.stereotypes,
            "accepted": p.accepted,
            "templates": p.templates + len(p.failing),
            "gated": p.templates,
            **{code: p.examples for code in counts.columns[counts.columns.get_loc("fa") :]},
        }
        wrong = {k: (int(found[k]), v) for k, v in wanted.items() if int(found[k]) != v}
        if wrong:
            raise SynthError(f"{p.category}: the build's stages found {wrong} (found, planned)")
