"""The files of a synthetic build, as bytes: the inputs (questionnaire, responses, templates, ratings, glossary,
names, 'unknown' phrasings, overrides) in the formats their loaders read, the synthetic languages' modules,
``build.toml`` and ``README.md``. Each marks itself synthetic.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..core.artifacts import REPO_ROOT
from ..core.inputs import DEMOGRAPHIC_COLUMNS, LIST_SEPARATOR, OVERRIDE_COLUMNS, QUESTIONNAIRE_COLUMNS, TEMPLATE_COLUMNS
from ..core.markdown import markdown_table
from ..names.tables import NAME_COLUMNS
from ..publish import SYNTHETIC_ID_PREFIX
from ..text.languages.fa import normalize_fa
from ..translate.glossary import GLOSSARY_COLUMNS
from .generate import Stereotype, SynthTemplate, rating_rows, response_rows
from .languages import LANGUAGE_MODULES, language_files
from .phrases import CATEGORY_SPECS, UNKNOWN_PHRASES, Term
from .scale import MIN_KAPPA, MIN_RELEVANCE, THRESHOLD, CategoryPlan

MODEL = "synthetic-stand-in"
"""The model name of the transcript: no model; :class:`.model.StandInModel` answers."""
SYNTHETIC_FA = "[ساختگی]"
SYNTHETIC_EN = "[SYNTHETIC]"
NOTE = (
    "SYNTHETIC (pbbq synth): placeholder data generated to build PBBQ at the paper's scale offline; it states "
    "nothing about any group and must not be published as PBBQ."
)
NAME_TABLE = REPO_ROOT / "annotations" / "names" / "names_fa.csv"
"""The bundled Persian name table; the synthetic one holds its rows of the groups the entities name."""


def _csv(header: Sequence[str], rows: Iterable[Sequence[str]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def _joined(terms: Iterable[Term]) -> str:
    return LIST_SEPARATOR.join(t.fa for t in terms)


LLM_SECTION = {"provider": "openai", "model": MODEL, "mode": "replay"}
"""The ``[llm]`` section of build.toml (and the transcript's): replay, so the build makes no call."""
FILES = {
    "questionnaire": "survey/questionnaire.csv",
    "responses": "survey/responses.csv",
    "templates": "annotations/templates.csv",
    "ratings": "annotations/ratings.csv",
    "unknown_phrases": "annotations/unknown_phrases.csv",
    "names": "annotations/names/names_fa.csv",
    "glossary": "annotations/glossary.csv",
    "disambiguation_overrides": "annotations/disambiguation_overrides.csv",
}
TRANSCRIPT = "transcript.jsonl.gz"


def _targets_toml(targets: Sequence[str]) -> str:
    """build.toml's sections for more than one target: the synthetic languages' folder and the targets."""
    if len(targets) == 1:
        return ""
    return f"""
[languages]
modules = ["{LANGUAGE_MODULES}"]   # SYNTHETIC languages {", ".join(targets[1:])}: English under other codes

[translate]
targets = {json.dumps(list(targets))}
"""


def _build_toml(scale: str, seed: int, targets: Sequence[str]) -> str:
    inputs = "\n".join(f'{name} = "{path}"' for name, path in FILES.items())
    llm = "\n".join(f'{key} = "{value}"' for key, value in LLM_SECTION.items())
    called = f"--scale {scale} --seed {seed}" + (f" --targets {len(targets)}" if len(targets) > 1 else "")
    return f"""# SYNTHETIC build configuration, written by `pbbq synth {called}`.
# Every input below is SYNTHETIC: placeholder stereotypes, survey answers, templates, annotator ratings and LLM
# answers (a deterministic stand-in wrote them, no model). It builds PBBQ at the paper's scale offline, to measure
# the builder; its examples say nothing about any group or model. Publish refuses to upload it (synthetic = true).
# Build it:  pbbq build --config build.toml     Paths are relative to this file.

[inputs]
{inputs}

[llm]
# replay: every answer comes from the synthetic transcript; no key, no network
{llm}
transcript = "{TRANSCRIPT}"

[crawl]
# no sources: stage 01 is skipped (the questionnaire is written directly)

[survey_filter]
threshold = {THRESHOLD}          # the design: accepted stereotypes are over it, the others at or under

[kappa_gate]
min_kappa = {MIN_KAPPA}
min_relevance = {MIN_RELEVANCE}

[names]
gender_llm = false        # the rule table decides every reference: the transcript holds no gender answers
{_targets_toml(targets)}
[diversity]
# no homogenization_model: BERTScore homogenization is off (reported as not computed)

[publish]
dry_run = true
synthetic = true          # the card says SYNTHETIC and no upload happens (force_synthetic = true overrides)
"""


def _readme(scale: str, seed: int, plans: Sequence[CategoryPlan]) -> str:
    counts = [(p.stereotypes, p.accepted, p.templates + len(p.failing), p.templates, p.examples) for p in plans]
    totals = tuple(sum(count[i] for count in counts) for i in range(5))
    rows = [(p.category, *count) for p, count in zip(plans, counts, strict=True)] + [("total", *totals)]
    headers = ("category", "stereotypes", "accepted", "templates", "pass the gate", "`fa` examples")
    table = markdown_table(
        headers, [[f"{c:,}" if isinstance(c, int) else c for c in row] for row in rows], right_from=1
    )
    return f"""# SYNTHETIC PBBQ build inputs (`pbbq synth --scale {scale} --seed {seed}`)

**Nothing in this folder is real data.** The stereotypes, survey responses, templates, annotator ratings,
glossary and LLM answers were generated by `pbbq synth` (tasks/synth/__init__.py) from a small placeholder phrase book,
to build PBBQ at the paper's scale offline (run time, memory, audits). They state nothing about any group; the
examples built from them must never be published or evaluated as PBBQ. Every id starts with `{SYNTHETIC_ID_PREFIX}`,
`build.toml` sets `[publish] synthetic = true` (the dataset card says SYNTHETIC and the upload is refused), and
the transcript's header says `"synthetic": true`. The name table holds rows of the bundled
`annotations/names/names_fa.csv` (real first names) for the groups the entities name.

Build:  `pbbq build --config build.toml`

{table}
"""


def _name_rows(templates: Sequence[SynthTemplate]) -> bytes:
    """The bundled name table's rows of every group a template's entity names (notes marked synthetic)."""
    table = pd.read_csv(NAME_TABLE, dtype=str, keep_default_na=False)
    words = {}
    for row in table.drop_duplicates("group").itertuples():
        for word in [row.group, *filter(None, row.aliases.split(LIST_SEPARATOR))]:
            words[normalize_fa(word)] = row.group
    named = {words[w] for t in templates for e in (*t.stereo, *t.nonstereo) for w in e.fa.split() if w in words}
    rows = table[table["group"].isin(named)]
    return _csv(
        NAME_COLUMNS,
        (
            [*(r[c] for c in NAME_COLUMNS[:-1]), f"{NOTE} Copied from annotations/names/names_fa.csv: {r['note']}"]
            for _, r in rows.iterrows()
        ),
    )


def _label(stereotype: Stereotype) -> Term:
    return CATEGORY_SPECS[stereotype.category].groups[stereotype.group].label


def input_files(
    scale: str,
    seed: int,
    targets: Sequence[str],
    plans: Sequence[CategoryPlan],
    stereotypes: Sequence[Stereotype],
    templates: Sequence[SynthTemplate],
    rng: np.random.Generator,
) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    files[FILES["questionnaire"]] = _csv(
        QUESTIONNAIRE_COLUMNS,
        (
            [
                s.stereotype_id,
                s.category,
                f"{SYNTHETIC_FA} {_label(s).fa} {s.trait.statement.fa}.",
                f"{SYNTHETIC_EN} {_label(s).en[:1].upper()}{_label(s).en[1:]} {s.trait.statement.en}.",
                _label(s).fa,
                LIST_SEPARATOR.join(CATEGORY_SPECS[s.category].groups[g].label.fa for g in s.others),
                s.source,
            ]
            for s in stereotypes
        ),
    )
    files[FILES["responses"]] = _csv(
        ["respondent_id", *DEMOGRAPHIC_COLUMNS, *(s.stereotype_id for s in stereotypes)],
        response_rows(stereotypes, rng),
    )
    files[FILES["templates"]] = _csv(
        TEMPLATE_COLUMNS,
        (
            [
                t.template_id,
                t.stereotype.stereotype_id,
                t.ambiguous.fa,
                t.stereotype.trait.continuation.fa if t.disambiguation == "human" else "",
                "",
                "",
                t.stereotype.trait.negative.fa,
                t.stereotype.trait.nonnegative.fa,
                _joined(t.stereo),
                _joined(t.nonstereo),
                _joined(t.lex),
                "",
            ]
            for t in templates
        ),
    )
    files[FILES["ratings"]] = _csv(
        ["template_id", "item_id", "annotator_id", "target_label", "relevance"],
        (row for t in templates for row in rating_rows(t, rng)),
    )
    copies = targets[1:]  # the synthetic languages' columns: the English again
    files[FILES["unknown_phrases"]] = _csv(
        ["phrase_fa", "phrase_en", *(f"phrase_{code}" for code in copies)],
        ([p.fa, p.en, *(p.en for _ in copies)] for p in UNKNOWN_PHRASES),
    )
    files[FILES["disambiguation_overrides"]] = _csv(
        OVERRIDE_COLUMNS,
        (
            [t.template_id, "biased", t.stereotype.trait.continuation.fa]
            for t in templates
            if t.disambiguation == "override"
        ),
    )
    terms = {w.fa: w.en for spec in CATEGORY_SPECS.values() if spec.glossary for g in spec.groups for w in g.words}
    files[FILES["glossary"]] = _csv(
        [*GLOSSARY_COLUMNS, *(f"term_{code}" for code in copies)],
        ([fa, en, f"{NOTE} Placeholder group term.", *(en for _ in copies)] for fa, en in terms.items()),
    )
    files[FILES["names"]] = _name_rows(templates)
    files |= language_files(targets)
    files["build.toml"] = _build_toml(scale, seed, targets).encode("utf-8")
    files["README.md"] = _readme(scale, seed, plans).encode("utf-8")
    return files
