"""The dataset card of a release: the README.md the Hub shows (docs/architecture.md §1, publish).

The YAML header, built with ``huggingface_hub.DatasetCardData``, declares every config with its parquet files
(split ``test``) and its features, written from the same Arrow schema the parquet files are written with, so
``datasets`` loads exactly what the card declares. The body explains the benchmark to a person: what PBBQ is,
a content warning, intended and prohibited uses (after the PBBQ paper's ethics statement, §7), how this build
was made with its own counts (the funnel, Table 1 and Table 2), every field of a record, how to score a model
(§4.2), how to rebuild the release from its transcript, its limitations (§8) and how to cite the paper.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd
import pyarrow as pa
from huggingface_hub import DatasetCard, DatasetCardData

from ..core.markdown import markdown_table
from ..core.stage import ReleaseConfig
from ..kappa_gate import GateParams
from ..names.strength import FOLDS, REPEATS
from ..text.categories import CATEGORIES
from ..text.languages import LANGUAGES, language

PRETTY_NAME = "PBBQ: Persian Bias Benchmark for Question Answering"
PAPER_TITLE = "PBBQ: A Persian Bias Benchmark Dataset Curated with Human-AI Collaboration for Large Language Models"
PAPER_AUTHORS = (
    "Farsi, Farhan and Bali, Shayan and Valeh, Fatemeh and Ghofrani, Parsa and Pakniat, Alireza and "
    "Kashfipour, Seyedkian and Payberah, Amir H."
)
PAPER_DATASET_URL = "https://huggingface.co/datasets/yoyo-research-group/PBBQ"
STAND_IN_NOTE = (
    "> **STAND-IN ANSWERS — NOT PBBQ DATA.** Every LLM answer of this build (disambiguated contexts, English\n"
    "> translations) is placeholder text written offline by the stand-in (`pbbq build --stand-in`), not a model's.\n"
    "> It shows what a change of the inputs does to the counts; its texts say nothing about any group or model: do\n"
    "> not publish, cite or evaluate with it.\n"
)
"""The note a stand-in build's card opens with (``tasks/llm/stand_in.py``)."""
SAMPLE_STAND_IN_MODEL = "sample-stand-in"
"""The model name of the bundled sample's transcript, whose answers people wrote (``prompts/transcripts/stand_ins``)."""
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
)

FIELD_DOCS: dict[str, str] = {
    "example_id": "Stable id of the example, derived from its content (the same inputs give the same id).",
    "template_id": "The template the example was filled from.",
    "stereotype_id": "The surveyed stereotype the template expresses.",
    "category": "One of the 16 bias categories of the paper, in English (e.g. `Ethnicity`).",
    "question_index": "Groups the examples that share a question (BBQ's field; here the template id).",
    "question_polarity": "`neg`: the question asks who fits the negative stereotype; `nonneg`: its complement.",
    "context_condition": "`ambig`: the context does not answer the question; `disambig`: it does.",
    "context": "The text the model reads.",
    "question": "The question about the context.",
    "ans0": "Option 0.",
    "ans1": "Option 1.",
    "ans2": "Option 2.",
    "label": "Index (0-2) of the correct option.",
    "answer_info": "BBQ's field: per option `[text, group tag]`; the 'unknown' option's tag is `unknown`.",
    "additional_metadata": "BBQ's field: `subcategory`, `stereotyped_groups` (the stereotyped group's tag), "
    "`version` of the record format, `source` (the stereotype id and where it came from).",
    "answer_roles": "The role of each option: `stereotyped`, `non-stereotyped` or `unknown` (see below).",
    "target_loc": "Index (0-2) of the option that holds the stereotyped entity.",
    "assignment": "`biased`, `counter_biased` (disambiguated contexts) or `none` (ambiguous contexts).",
    "entity_order": "`stereo_first` or `nonstereo_first`: which entity the context mentions first.",
    "stereo_entity": "The entity the stereotype is about, as written in the context.",
    "nonstereo_entity": "The other entity, as written in the context.",
    "lexical_variant": "The optional wording variant the template was filled with (empty when it has none).",
    "lang": "${languages}.",
    "variant": "`original` (groups named explicitly) or `names-<seed>` (a name-proxy variant, see below).",
    "source_example_id": "For a name-proxy variant or a translation, the example it was made from; else empty.",
    "llm_request_ids": "Keys of the LLM requests that wrote parts of this example, as recorded in `transcript.jsonl`.",
}
"""What every published column means; a column without an entry here cannot be published."""

TABLE2_HEADERS: dict[str, str] = {
    "category": "Category",
    "n_templates": "# templates",
    "n_units": "# units",
    "ngd": "NGD ↑",
    "ngd_mean": "NGD ÷ 4 ↑",
    "ttr": "TTR ↑",
    "self_bleu": "Self-BLEU ↓",
    "homogenization": "BERTScore ↓",
}


CARD_TEMPLATE = Path(__file__).with_name("templates") / "dataset_card.md"
"""The card's Markdown body, with ``${name}`` for what each build fills in (``string.Template``)."""
CATEGORIES_PARAGRAPH = (
    "The stereotypes cover the {count} categories of the PBBQ paper ({names}). A stereotype is used only if most "
    "respondents of a survey of Persian speakers had heard of it or believed it."
)
"""PBBQ's card on its categories, named from the category table (:data:`~pbbq.tasks.text.categories.CATEGORIES`)."""
CARD_LINE_WIDTH = 112
"""The width the card's generated paragraphs are wrapped at, as its template's own are."""


BBQ_CITATION = """```bibtex
@inproceedings{parrish-etal-2022-bbq,
  title     = {{BBQ}: A hand-built bias benchmark for question answering},
  author    = {Parrish, Alicia and Chen, Angelica and Nangia, Nikita and Padmakumar, Vishakh and Phang, Jason and
               Thompson, Jana and Htut, Phu Mon and Bowman, Samuel R.},
  booktitle = {Findings of the Association for Computational Linguistics: ACL 2022},
  year      = {2022},
  pages     = {2086--2105}
}
```"""
"""BBQ, whose templates an adaptation build's examples are made from (CC BY 4.0 asks to cite it)."""


@dataclass(frozen=True)
class CardBody:
    """What a card says that depends on the pipeline's input path: its title, its Markdown body
    (``string.Template``), the language its examples are built in, the benchmark's short name and what to cite.
    What each config holds its pipeline declares (:class:`~pbbq.tasks.core.stage.ReleaseConfig`)."""

    pretty_name: str
    template: str
    source: str = "fa"
    """The language code of the examples before translation (``fa``; ``en`` on the adaptation path)."""
    short_name: str = "PBBQ"
    citation: str = ""
    """The card's BibTeX block; empty: the PBBQ paper's (:func:`_citation`)."""


PBBQ_BODY = CardBody(pretty_name=PRETTY_NAME, template="")
"""What PBBQ's card says (its template: :data:`CARD_TEMPLATE`)."""


def adapt_card_body() -> CardBody:
    """The card of an adaptation build (BBQ's templates adapted to a culture, PakBBQ §3.1): English is the source,
    every target's config its instance-level translation (step 4)."""
    return CardBody(
        pretty_name="BBQ adapted to a culture (PBBQ builder, adaptation path)",
        template=CARD_TEMPLATE.with_name("dataset_card_adapt.md").read_text(encoding="utf-8"),
        source="en",
        short_name="this benchmark",
        citation=BBQ_CITATION,
    )


@dataclass(frozen=True)
class CardParams:
    """What the card says about the build that the tables do not: its id, the configuration file it was
    built from (for the rebuild command), the Hub repository (None in a dry run), license and title."""

    build_id: str
    build_config: str = "configs/sample.toml"
    repo_id: str | None = None
    license: str = "cc-by-4.0"
    pretty_name: str = PRETTY_NAME
    min_kappa: float = GateParams.min_kappa
    min_relevance: float = GateParams.min_relevance
    """The kappa gate's thresholds of the build (``[kappa_gate]``), which the card states."""
    funnel_labels: Mapping[str, str] = field(default_factory=dict)
    """The funnel steps' labels, from the stages' declarations (``flows/pipeline.py``); a step without one
    shows its name."""
    transcript_header: Mapping[str, Any] | None = None
    """The header line of the build's transcript (its model, provider, ``stand_in``); None: no transcript."""
    body: CardBody | None = None
    """The card's body as its pipeline declares it (:func:`adapt_card_body`); None: PBBQ's (:data:`CARD_TEMPLATE`)."""
    release_configs: Mapping[str, ReleaseConfig] = field(default_factory=dict)
    """The configs as the pipeline declares them: what each holds, in which language."""
    review: str = ""
    """The section on what people reviewed (``pbbq.tasks.review.report.card_section``), after the body; empty
    without review rounds."""


@dataclass(frozen=True)
class ConfigInfo:
    """One published config as the card describes it."""

    name: str
    rows: int
    data_files: str
    langs: tuple[str, ...]
    variants: tuple[str, ...]
    num_bytes: int
    download_size: int


def arrow_type_yaml(dtype: pa.DataType) -> dict[str, Any]:
    """The ``datasets`` YAML form of an Arrow type (``dtype: string``, ``struct: [...]``, ``list: string``)."""
    if pa.types.is_struct(dtype):
        return {"struct": [{"name": field.name, **arrow_type_yaml(field.type)} for field in dtype]}
    if pa.types.is_list(dtype):
        inner = arrow_type_yaml(dtype.value_type)
        return {"list": inner["dtype"] if "dtype" in inner else next(iter(inner.values()))}
    names = {
        pa.string(): "string",
        pa.int64(): "int64",
        pa.int32(): "int32",
        pa.float64(): "float64",
        pa.bool_(): "bool",
    }
    if dtype not in names:
        raise TypeError(f"no dataset card feature for Arrow type {dtype}")
    return {"dtype": names[dtype]}


def features_yaml(schema: pa.Schema) -> list[dict[str, Any]]:
    """The ``features`` list of a config in the card, one entry per column of ``schema``."""
    return [{"name": field.name, **arrow_type_yaml(field.type)} for field in schema]


def size_category(rows: int) -> str:
    """The Hub's size bucket for a number of examples."""
    for limit, name in SIZE_CATEGORIES:
        if rows < limit:
            return name
    return "n>100M"


def card_data(configs: Sequence[ConfigInfo], schema: pa.Schema, card: CardParams) -> DatasetCardData:
    """The YAML header: configs with their files, features per config, license, languages (those of the
    configs, in their order: the source's first), tasks, tags (the source language's name among them), and the size
    bucket of all configs' examples together."""
    languages = list(dict.fromkeys(lang for config in configs for lang in config.langs))
    default = configs[0].name  # the source's examples: the first config of the pipeline (or of config_key)
    return DatasetCardData(
        pretty_name=card.pretty_name,
        license=card.license,
        language=languages,
        multilinguality="multilingual" if len(languages) > 1 else "monolingual",
        task_categories=["question-answering", "multiple-choice"],
        task_ids=["multiple-choice-qa"],
        size_categories=size_category(sum(config.rows for config in configs)),
        annotations_creators=["expert-generated"],
        language_creators=["expert-generated"]
        if _people_wrote(card.transcript_header)
        else ["expert-generated", "machine-generated"],
        source_datasets=["original"],
        tags=["bias", "fairness", "stereotypes", "social-bias", "bbq", language(_body(card).source).name.lower()],
        configs=[
            {
                "config_name": config.name,
                "data_files": [{"split": "test", "path": config.data_files}],
                **({"default": True} if config.name == default else {}),
            }
            for config in configs
        ],
        dataset_info=[
            {
                "config_name": config.name,
                "features": features_yaml(schema),
                "splits": [{"name": "test", "num_bytes": config.num_bytes, "num_examples": config.rows}],
                "download_size": config.download_size,
                "dataset_size": config.num_bytes,
            }
            for config in configs
        ],
    )


def _body(card: CardParams) -> CardBody:
    """What the card's path says (:class:`CardBody`): its own, or PBBQ's."""
    return card.body or PBBQ_BODY


def translated(configs: Sequence[ConfigInfo], source: str = "fa") -> list[str]:
    """The configs that translate ``source``'s examples (each named by its language's code: ``en``, ``ur``), in
    release order."""
    return [config.name for config in configs if config.name in LANGUAGES and config.name != source]


def _listed(words: Sequence[str], conjunction: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return f" {conjunction} ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _config_doc(config: ConfigInfo, declared: Mapping[str, ReleaseConfig]) -> tuple[str, str]:
    """A config's language and contents as its pipeline declares them, else its languages and variants."""
    if config.name in declared:
        return language(declared[config.name].language).name, declared[config.name].description
    return ", ".join(config.langs), f"Examples of variant(s) {', '.join(config.variants)}."


def _config_section(configs: Sequence[ConfigInfo], card: CardParams) -> str:
    rows = []
    for config in configs:
        language, contents = _config_doc(config, card.release_configs)
        rows.append([f"`{config.name}`", language, contents, f"{config.rows:,}", f"`{config.data_files}`"])
    source = f'"{card.repo_id}"' if card.repo_id else '"path/to/this/folder"'
    return f"""## Configurations

All examples are in a single split, `test`: {_body(card).short_name} is meant for evaluation, not for training.

{markdown_table(["Config", "Language", "Contents", "Examples", "Files"], rows)}{_empty_note(configs)}

```python
from datasets import load_dataset

pbbq = load_dataset({source}, "{configs[0].name}", split="test")
```
"""


def _empty_note(configs: Sequence[ConfigInfo]) -> str:
    """What the card says of configs without examples (a stage of the build kept nothing for them), as a
    paragraph after the configurations table; nothing when every config has examples."""
    empty = [f"`{config.name}`" for config in configs if config.rows == 0]
    if not empty:
        return ""
    if len(empty) == len(configs):
        lead = "This release is empty: no config holds any example."
    else:
        lead = f"{', '.join(empty)} {'holds' if len(empty) == 1 else 'hold'} no example."
    return (
        f"\n\n**{lead}** The funnel below shows where the examples stopped, and the `warnings` of `manifest.json` "
        "name the stage that kept nothing."
    )


def _funnel_section(funnel: pd.DataFrame, configs: Sequence[ConfigInfo], labels: Mapping[str, str]) -> str:
    steps = funnel[["step", "count"]].itertuples(index=False)
    rows = [[labels.get(step, step), f"{count:,}"] for step, count in steps]
    rows += [[f"Published in `{config.name}`", f"{config.rows:,}"] for config in configs]
    return markdown_table(["Step", "Count"], rows)


def _table1_section(table1: pd.DataFrame) -> str:
    """One table per config when ``table1`` has a config column, else one table."""
    groups = table1.groupby("config", sort=False) if "config" in table1.columns else [(None, table1)]
    parts = []
    for config, part in groups:
        rows = part[["category", "templates", "samples"]].itertuples(index=False)
        table = markdown_table(["Category", "# Templates", "# Samples"], list(rows), bold=("Total",))
        parts.append((f"Config `{config}`:\n\n" if config is not None else "") + table)
    return "\n\n".join(parts)


def _answers_sentence(header: Mapping[str, Any] | None) -> str:
    """Who wrote the build's LLM answers, as its transcript's header says: a model, the sample's human-written
    stand-ins, or the offline stand-in's placeholders (docs/architecture.md §6)."""
    if header is None:
        return (
            "No transcript came with this release, so this card cannot say which model wrote its LLM answers; "
            "the `[llm]` parameters of `manifest.json` name the model the build was configured with."
        )
    if header.get("stand_in") is True:
        return (
            "In this build no model wrote anything: every LLM answer is placeholder text from the offline stand-in "
            "(`pbbq build --stand-in`)."
        )
    if header.get("model") == SAMPLE_STAND_IN_MODEL:
        return (
            "In this build no model wrote the LLM answers: they are the bundled sample's stand-ins, texts people "
            "wrote (`prompts/transcripts/stand_ins/`) and recorded as the transcript of model "
            f"`{SAMPLE_STAND_IN_MODEL}`."
        )
    return (
        f"In this build the LLM answers came from model `{header.get('model')}` (provider "
        f"`{header.get('provider')}`), as the header of `transcript.jsonl` records."
    )


def _people_wrote(header: Mapping[str, Any] | None) -> bool:
    """The build's LLM answers are the bundled sample's stand-ins, which people wrote."""
    return header is not None and header.get("stand_in") is not True and header.get("model") == SAMPLE_STAND_IN_MODEL


def _inputs_note(header: Mapping[str, Any] | None) -> str:
    """Who made the adaptation's human inputs: the bundled sample's were written for it (its stand-in answers say
    it is the sample), a real build's by its reviewers and annotators."""
    if _people_wrote(header):
        return (
            "The bundled sample's review sheet, vocabulary and ratings (`annotations/bbq/`) were written for the "
            "sample: no expert classed its templates and no annotator rated them."
        )
    return "The review sheet, the vocabulary and the ratings are the build's inputs, listed in `manifest.json`."


def _limitations(header: Mapping[str, Any] | None, targets: Sequence[str] = ("en",)) -> dict[str, str]:
    """The limitations of the texts an LLM writes in a real build, said of whoever wrote them in this one, and of
    the translations into each target language (``targets``: codes)."""
    names = [language(code).name for code in targets]
    configs, either = _listed(names), _listed(names, "or")
    if header is not None and header.get("stand_in") is True:
        return {
            "continuations_limit": "The disambiguated continuations are placeholder text, not a model's: this build "
            "shows counts and checks, not texts to read.",
            "translations_limit": f"The {configs} configs are placeholder translations, not a model's.",
        }
    if _people_wrote(header):
        return {
            "continuations_limit": "The disambiguated continuations were written by people standing in for an LLM "
            "(the bundled sample) and checked automatically as an LLM's would be.",
            "translations_limit": f"The {configs} configs were translated by people standing in for an LLM (the "
            f"bundled sample); culturally specific terms and names may not carry the same connotations in {either}.",
        }
    return {
        "continuations_limit": "The disambiguated continuations were written by an LLM and checked automatically, not "
        "each read by a person; some may read unnaturally.",
        "translations_limit": f"The {configs} configs are machine translations; culturally specific terms and names "
        f"may not carry the same connotations in {either}.",
    }


def _name_proxy_section(strength: pd.DataFrame | None) -> str:
    """Per group, how strongly its names stand for it (:mod:`pbbq.tasks.names.strength`), and which groups are over
    the threshold, hence may be named in ``<lang>-names`` (``fa-names``; the adaptation path's ``en-names``)."""
    if strength is None or strength.empty:
        return "The names' strength was not measured in this build, and no group was left out for it."
    first = strength.iloc[0]
    source, names = first["lang"], f"{first['lang']}-names"
    margin = float(first["threshold"]) - float(first["chance"])
    rows = [
        [
            row.category,
            row.group,
            f"{row.n_groups}",
            f"{row.strength:.2f}",
            f"{row.chance:.2f}",
            f"{row.threshold:.2f}",
            ("kept" if row.strong else "left out (`weak_proxy`)") + (" by people" if by_people else ""),
        ]
        for row in strength.sort_values(["lang", "category", "strength"], ascending=[True, True, False]).itertuples()
        for by_people in [bool(row.strong) != (row.n_groups > 1 and row.strength >= row.threshold)]
    ]
    people = any(row[-1].endswith(" by people") for row in rows)
    kept = strength[strength["strong"]]
    kept_text = "; ".join(
        f"{category}: {', '.join(sorted(part['group']))}" for category, part in kept.groupby("category", sort=True)
    )
    return (
        "How well each group's first names tell it from the other groups of its category, measured on the "
        "name table: a classifier over the names' character 2-4-grams (TF-IDF and logistic regression), trained "
        f"on the names of the category's groups, gives back the share of a group's held-out names ({FOLDS}-fold "
        f"cross-validation, repeated {REPEATS} times with a fixed seed). Chance is 1 / the number of groups; a "
        f"group is kept when its strength reaches chance + {margin:.2f} (for 10 names, one more name given back "
        f"than chance would). An example enters `{names}` only when both of its groups are kept; the others stay "
        f"in `{source}` (funnel: `weak_proxy`). Ten names per group are little evidence, and character n-grams miss "
        "what a reader knows of a name, so a kept group is one whose names look alike, not proof that a reader "
        "recognises the group.\n\n"
        + markdown_table(["Category", "Group", "# groups", "Strength", "Chance", "Threshold", f"`{names}`"], rows)
        + (
            "\n\nA group marked 'by people' was decided by a review round's readers, not by the classifier's strength "
            "shown (the section 'Review by people' gives their share)."
            if people
            else ""
        )
        + f"\n\n{'Groups kept' if people else 'Groups over the threshold'}: {kept_text or 'none'}. "
        f"An example needs both of its groups {'kept' if people else 'over it'}, "
        f"so a category can keep a group and still have no example in `{names}` (its pairs meet a group "
        f"{'not kept' if people else 'under the threshold'}); Table 1 below counts the examples `{names}` holds per "
        "category."
    )


def _table2_section(table2: pd.DataFrame | None) -> str:
    """Table 2 per config; a metric that no row has (its note says why, e.g. no BERTScore model given) is left
    out of the table and said in a sentence."""
    if table2 is None:
        return "Not computed in this build (the diversity stage did not run)."
    notes = [column for column in table2.columns if column.endswith("_note")]
    metrics = [column for column in table2.columns if column != "config" and column not in notes]
    groups = table2.groupby("config", sort=False) if "config" in table2.columns else [(None, table2)]
    parts = []
    for config, part in groups:
        absent = [c for c in metrics if f"{c}_note" in notes and part[c].isna().all()]
        columns = [c for c in metrics if c not in absent]
        table = markdown_table(
            [TABLE2_HEADERS.get(column, column) for column in columns],
            list(part[columns].itertuples(index=False)),
            bold=("Average", "Overall"),
        )
        said = [f"{c}_note" for c in absent]
        remarks = sorted({str(value) for column in notes if column not in said for value in part[column].dropna()})
        sentences = [
            f"The {TABLE2_HEADERS.get(c, c).rstrip(' ↑↓')} column is left out: no category has it in this build "
            f"({'; '.join(sorted({str(v) for v in part[f'{c}_note'].dropna() if str(v)}))})."
            for c in absent
        ]
        text = (f"Config `{config}`:\n\n" if config is not None else "") + table
        parts.append(
            text + "".join(f"\n\n{sentence}" for sentence in sentences) + "".join(f"\n\n- {r}" for r in remarks if r)
        )
    return "\n\n".join(parts)


def _table2_instances_section(table2_instances: pd.DataFrame | None) -> str:
    if table2_instances is None:
        return "`08_diversity/table2_instances` of the build's run folder."
    return "\n\n" + _table2_section(table2_instances)


def _fields_section(schema: pa.Schema, codes: Sequence[str]) -> str:
    """Every published column and its meaning; ``lang`` lists the languages of the release (``codes``: the source's
    first, then each target's)."""
    undocumented = [field.name for field in schema if field.name not in FIELD_DOCS]
    if undocumented:
        raise KeyError(f"dataset card: no description for the column(s) {undocumented}; add them to FIELD_DOCS")
    languages = _listed([f"`{code}` ({language(code).name})" for code in codes], "or")
    rows = [
        [f"`{field.name}`", f"`{field.type}`", Template(FIELD_DOCS[field.name]).safe_substitute(languages=languages)]
        for field in schema
    ]
    return markdown_table(["Field", "Type", "Meaning"], rows)


def _rebuild_section(card: CardParams, manifest_sha256: str | None, has_transcript: bool) -> str:
    manifest = (
        f"`manifest.json` (sha256 `{manifest_sha256}`) lists every artifact of build `{card.build_id}` with its "
        "sha256 and row count, the hashes of the inputs it was made from, the code version and every parameter."
        if manifest_sha256 is not None
        else f"This release of build `{card.build_id}` carries no `manifest.json`, so its files cannot be traced "
        "to the build's inputs, code and parameters."
    )
    transcript = (
        "`transcript.jsonl` holds every LLM request and answer the build used. To rebuild the release byte for "
        "byte with no API key, check out the PBBQ builder at the commit the manifest names, set "
        '`transcript = "<path to the downloaded transcript.jsonl>"` in the `[llm]` section of the build '
        "configuration (its answers are imported into the response store before the LLM stages) and run:"
        if has_transcript
        else "No LLM transcript was supplied with this release, so a rebuild has to call a model again for the "
        "stages that use one (`PBBQ_LLM_MODE=live`). With a transcript, this command replays the answers:"
    )
    return f"""## Rebuilding this release

{manifest} {transcript}

```bash
PBBQ_LLM_MODE=replay pbbq build --config {card.build_config}
```

Replay answers only from recorded responses (a request with no recorded answer is an error that names it), so
the same inputs, parameters and answers give byte-identical parquet files, whose hashes the manifest lists.
"""


def _citation() -> str:
    return f"""```bibtex
@misc{{pbbq,
  title  = {{{{{PAPER_TITLE}}}}},
  author = {{{PAPER_AUTHORS}}},
  note   = {{Dataset: {PAPER_DATASET_URL}}}
}}
```"""


def render_card(
    configs: Sequence[ConfigInfo],
    schema: pa.Schema,
    *,
    table1: pd.DataFrame,
    table2: pd.DataFrame | None,
    funnel: pd.DataFrame,
    manifest_sha256: str | None,
    has_transcript: bool,
    card: CardParams,
    table2_instances: pd.DataFrame | None = None,
    proxy_strength: pd.DataFrame | None = None,
) -> DatasetCard:
    """The dataset card of a release: the YAML header from :func:`card_data`, then the Markdown body."""
    body = _body(card)
    targets = translated(configs, body.source)
    return DatasetCard(
        f"---\n{card_data(configs, schema, card).to_yaml()}\n---\n"
        + Template(card.body.template if card.body else CARD_TEMPLATE.read_text(encoding="utf-8")).substitute(
            pretty_name=card.pretty_name,
            build_id=card.build_id,
            paper_dataset_url=PAPER_DATASET_URL,
            categories=_categories_paragraph(),
            configs=_config_section(configs, card),
            min_kappa=f"{card.min_kappa:g}",
            min_relevance=f"{card.min_relevance:g}",
            answers=_answers_sentence(card.transcript_header),
            inputs_note=_inputs_note(card.transcript_header),
            **_limitations(card.transcript_header, targets),
            translated_languages=_listed([language(code).name for code in targets], "or"),
            translated_configs=_listed(["`-names`", *(f"`{code}`" for code in targets)]),
            translated_examples=_listed([language(code).name for code in targets]),
            name_proxies=_name_proxy_section(proxy_strength),
            funnel=_funnel_section(funnel, configs, card.funnel_labels),
            table1=_table1_section(table1),
            table2=_table2_section(table2),
            table2_instances=_table2_instances_section(table2_instances),
            fields=_fields_section(schema, list(dict.fromkeys([body.source, *targets]))),
            rebuild=_rebuild_section(card, manifest_sha256, has_transcript),
            license=card.license,
            citation=body.citation or _citation(),
        )
        + card.review
    )


def _categories_paragraph() -> str:
    """The card's paragraph naming the benchmark's categories, in the paper's order."""
    text = CATEGORIES_PARAGRAPH.format(count=len(CATEGORIES), names=", ".join(CATEGORIES))
    return textwrap.fill(text, width=CARD_LINE_WIDTH, break_on_hyphens=False)


def card_with_note(card: str, note: str) -> str:
    """The dataset card with ``note`` first after its YAML header."""
    head, end, body = card.partition("\n---\n")
    return f"{head}{end}\n{note}{body}" if end else f"{note}\n{card}"
