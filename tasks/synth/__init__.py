"""Synthetic inputs at the PBBQ paper's scale (``pbbq synth``): a build that runs offline at paper scale.

:func:`synthesize` writes into one folder every input a build reads, each in exactly the format its loader
accepts, and a build configuration (``build.toml``) that ``pbbq build --config`` builds offline:

- ``survey/questionnaire.csv``: 307 stereotypes over the 16 categories (PBBQ §3.2), one trait each;
- ``survey/responses.csv``: 250 respondents with the Appendix E demographic counts, so that 233 stereotypes pass
  the survey filter (> 60 %, PBBQ §3.2);
- ``annotations/templates.csv`` and ``ratings.csv``: about 300 templates, of which the kappa gate (PakBBQ §3.2)
  keeps Table 1's 276 per category; the others fail it on kappa, on relevance, or belong to a stereotype the
  survey rejected;
- entity lists and lexical variants sized so that the ``fa`` examples of each category come to Table 1's
  count, rounded to a multiple of 12 (the examples of one entity pair and variant: :mod:`pbbq.tasks.instantiate`);
- ``annotations/glossary.csv``, ``annotations/names/names_fa.csv`` (the bundled name table's rows of the groups
  the entities name), ``annotations/unknown_phrases.csv``, ``annotations/disambiguation_overrides.csv``;
- ``transcript.jsonl.gz``: an answer to every LLM request the build makes, recorded by running the build's own
  stage functions (survey filter, kappa gate, disambiguate, instantiate, translate) against the real
  :class:`~pbbq.tasks.llm.LLMClient` whose transport is a deterministic stand-in (:class:`StandInModel`): it
  computes each answer from the request, so every answer passes the stage's validators (a few first answers
  break a rule on purpose, so the retries are exercised too).

**Everything here is synthetic and says so**: every id starts with ``SYNTH-`` (so every example id of the
build does), English statements with ``[SYNTHETIC]``, Persian ones with ``[ساختگی]``, notes say it, the
transcript's header and ``synth.json`` carry ``"synthetic": true``, and ``build.toml`` sets
``[publish] synthetic = true``: the publish stage writes a SYNTHETIC note into the dataset card and refuses to
upload (:mod:`pbbq.tasks.publish`). The texts are placeholders built from a small bilingual phrase book; they
state no finding about any group.

The same scale and seed give the same bytes in every file.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.artifacts import REPO_ROOT
from ..core.inputs import (
    DEMOGRAPHIC_COLUMNS,
    LIST_SEPARATOR,
    OVERRIDE_COLUMNS,
    QUESTIONNAIRE_COLUMNS,
    TEMPLATE_COLUMNS,
    load_inputs,
    swap_roles,
)
from ..core.markdown import markdown_table
from ..disambiguate import Prompts, disambiguate
from ..instantiate import NOT_TARGET, instantiate
from ..kappa_gate import kappa_gate, template_kappa
from ..llm import InProcessTransport, LLMClient, LLMConfig, LLMRequest, ResponseStore
from ..names.tables import NAME_COLUMNS, load_name_table
from ..publish import SYNTHETIC_ID_PREFIX
from ..survey_filter import survey_filter
from ..text.languages import language
from ..text.languages.fa import normalize_fa
from ..translate import translate_stage
from ..translate.glossary import GLOSSARY_COLUMNS, load_glossary
from ..translate.pair import Pair
from ..translate.requests import PROMPTS, prompt_files

# ------------------------------------------------------------------------------------------- the paper's counts

TABLE1: dict[str, tuple[int, int]] = {
    "Political Orientation": (15, 1296),
    "Socio-economic Status": (15, 720),
    "Educational Background": (15, 1632),
    "Disease": (12, 1956),
    "Domestic Area": (15, 3324),
    "Ethnicity": (15, 2720),
    "Family Structure": (16, 2400),
    "Profession": (15, 3648),
    "Property Ownership": (14, 1296),
    "Gender": (35, 1048),
    "Nationality": (24, 2904),
    "Age": (30, 6112),
    "Physical Appearance": (10, 4140),
    "Disability": (15, 2808),
    "Religion": (15, 2280),
    "Sexual Orientation": (15, 990),
}
"""PBBQ Table 1: templates and samples per category. Its rows sum to 276 templates and 39,274 samples, though its
Total row (and §3.3) says 37,742 samples; the synthetic build follows the rows."""
STEREOTYPES = 307
"""Stereotypes in the questionnaire (PBBQ §3.2)."""
ACCEPTED = 233
"""Stereotypes accepted by more than 60 % of the respondents (PBBQ §3.2)."""
FAILING_TEMPLATES = 24
"""Templates written beyond Table 1's 276 that the gate drops (not in the paper: about 300 written in all)."""
RESPONDENTS = 250
"""Survey respondents (PBBQ §3.2, Appendix E)."""
EXAMPLES_PER_UNIT = 12
"""Examples of one entity pair and lexical variant: 2 orders × (2 ambiguous + 4 disambiguated), instantiate."""
SCALES: dict[str, float] = {"paper": 1.0, "half": 0.5, "quarter": 0.25, "tiny": 0.01}
"""Share of the paper's templates, stereotypes and examples; ``tiny`` (a template per category) is for tests. No
scale above the paper's: the phrase book gives a category as many stereotypes as it has groups × traits (Gender: 40,
which the paper's 39 nearly fills), so BharatBBQ's 49,108 source examples (1.25 ×) would need a larger one."""
MAX_TARGETS = 27
"""English and the 26 synthetic languages ``xa`` … ``xz``."""
DEMOGRAPHICS: dict[str, dict[str, int]] = {
    "gender": {"male": 140, "female": 110},
    "age_band": {"18-24": 85, "25-34": 68, "35-44": 52, "45-54": 27, "55+": 18},
    "income_band": {"<100": 47, "100-200": 88, "200-310": 42, "310-510": 32, "510-750": 20, "750+": 8}
    | {"prefer_not_to_say": 13},
    "education": {"less_than_high_school": 15, "diploma": 60, "bachelor": 102, "master": 55, "phd": 13, "post_phd": 5},
    "sexual_orientation": {"homosexual": 19, "heterosexual": 198, "prefer_not_to_say": 33},
    "religion": {"islam": 203, "christianity": 5, "zoroastrianism": 7, "judaism": 2, "other": 6, "none": 19}
    | {"prefer_not_to_say": 8},
    "political_orientation": {"reformist": 30, "conservative": 23, "monarchist": 65, "communist": 8, "liberal": 53}
    | {"republican": 46, "other": 25},
}
"""The respondents' attributes, counts per level as PBBQ Appendix E gives them (as in survey/make_responses.py)."""
THRESHOLD = 0.60
MIN_KAPPA = 0.2
MIN_RELEVANCE = 1.5
"""The thresholds the design is made for (PBBQ §3.2; PakBBQ §3.2), written into build.toml."""

MEMORY = Path(":memory:")
"""Where synth's response stores are: SQLite in memory (a commit per answer on disk costs ~1 ms)."""
MODEL = "synthetic-stand-in"
"""The model name of the transcript: no model; :class:`StandInModel` answers."""
CREATED_AT = "1970-01-01T00:00:00+00:00"
"""Every transcript record's time: fixed, so that a seed gives the same bytes."""
SYNTHETIC_FA = "[ساختگی]"
SYNTHETIC_EN = "[SYNTHETIC]"
NOTE = (
    "SYNTHETIC (pbbq synth): placeholder data generated to build PBBQ at the paper's scale offline; it states "
    "nothing about any group and must not be published as PBBQ."
)
TRANSCRIPT_NOTE = (
    "SYNTHETIC answers: no model wrote them. pbbq synth ran the build's own stages against the real LLM client, "
    "its transport replaced by a deterministic stand-in that computes each answer from the request (placeholder "
    "Persian continuations and English translations from a small phrase book; a few first answers break a rule "
    "on purpose, so retries are recorded too)."
)


def target_codes(count: int) -> tuple[str, ...]:
    """The ``count`` target languages of a synthetic build: English, then synthetic languages ``xa``, ``xb``, …
    (:func:`_language_module`: English under another code, answered from the English phrase book). Not Urdu:
    its checks (script, gendered verbs) need real Urdu, and the phrase book has none."""
    if not 1 <= count <= MAX_TARGETS:
        raise SynthError(f"--targets {count} must be between 1 and {MAX_TARGETS}")
    return ("en", *(f"x{chr(ord('a') + n)}" for n in range(count - 1)))


LANGUAGE_MODULES = "languages"
"""The folder of a synthetic build's own language modules (``[languages] modules``), with their prompts."""


def _language_module(code: str) -> str:
    """A synthetic language's module: English's rules and checks under the code ``code``, its own glossary and
    'unknown' columns (``term_xa``, ``phrase_xa``) and its prompts beside it."""
    return f'''"""SYNTHETIC language {code!r}, written by `pbbq synth`: English under another code, so that a
synthetic build translates into several target languages. It is no language: its examples are the English phrase
book's placeholders, labelled synthetic like everything of the build."""

from dataclasses import replace
from pathlib import Path

from pbbq.tasks.text.languages import en

LANGUAGE = replace(
    en.LANGUAGE,
    code="{code}",
    name="Synthetic-{code.upper()}",
    glossary_column="term_{code}",
    unknown_column="phrase_{code}",
    prompts=Path(__file__).parent / "prompts",
)
'''


def _language_files(codes: Sequence[str]) -> dict[str, bytes]:
    """The modules of the synthetic languages among ``codes`` and their prompts: the builder's Persian → English
    prompts, each under the language's pair name and marked synthetic in its first line."""
    files: dict[str, bytes] = {}
    english = prompt_files(language("fa"), language("en"))
    for code in codes[1:]:
        files[f"{LANGUAGE_MODULES}/{code}.py"] = _language_module(code).encode("utf-8")
        for name in english:
            renamed = name.replace("fa-en", f"fa-{code}").replace("en-fa", f"{code}-fa")
            text = (PROMPTS / name).read_text(encoding="utf-8")
            marked = f"SYNTHETIC prompt (pbbq synth): prompts/{name} for the synthetic language {code}.\n{text}"
            files[f"{LANGUAGE_MODULES}/prompts/{renamed}"] = marked.encode("utf-8")
    return files


# ------------------------------------------------------------------------------------------------ phrase book

PHRASES: dict[str, Any] = tomllib.loads(Path(__file__).with_name("phrases.toml").read_text(encoding="utf-8"))
"""The phrase book's blocks (``phrases.toml`` beside this module; its header says how a block is written)."""


@dataclass(frozen=True)
class Term:
    """A Persian phrase (normalised as the loaders normalise it) and its English."""

    fa: str
    en: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "fa", normalize_fa(self.fa))


def _terms(block: str) -> tuple[Term, ...]:
    """``fa = en`` pairs separated by ``;`` or by lines."""
    pairs = [item.split("=") for line in block.strip().splitlines() for item in line.split(";") if item.strip()]
    return tuple(Term(fa.strip(), en.strip()) for fa, en in pairs)


@dataclass(frozen=True)
class Group:
    """A group: its plural label (the questionnaire's target or non-target group) and the words that make its
    entities (adjectives after a head noun, a gender head, or whole entity phrases: see :class:`Category`)."""

    label: Term
    words: tuple[Term, ...]


def _groups(block: str) -> tuple[Group, ...]:
    """One group per line, ``label_fa = label_en | word_fa = word_en; ...``; a line without ``|`` goes on with
    the words of the group above."""
    rows: list[list[str]] = []
    for line in block.strip().splitlines():
        if "|" in line:
            rows.append(line.split("|"))
        else:
            rows[-1][1] += f"; {line}"
    return tuple(Group(_terms(label)[0], _terms(words)) for label, words in rows)


@dataclass(frozen=True)
class Category:
    """How a category's entities are made. ``modifier``: a head noun and the group's adjective ('همسایه‌ی کرد',
    'Kurdish neighbor'); ``gender``: the group's gender head and a descriptor ('زن راننده', 'female driver');
    ``form``: the group's own phrases ('راننده‌ی تاکسی'). ``glossary``: the adjectives are glossary terms."""

    code: str
    kind: str
    groups: tuple[Group, ...]
    glossary: bool


NEUTRAL_HEADS = _terms(PHRASES["neutral_heads"])
"""Head nouns that give neither a gender nor an age (:mod:`pbbq.tasks.text.cues`), so no pair of them is confounded."""
HEADS: dict[str, tuple[Term, ...]] = {
    "neutral": NEUTRAL_HEADS,
    "male": _terms(PHRASES["heads"]["male"]),
    "female": _terms(PHRASES["heads"]["female"]),
}
DESCRIPTORS = _terms(PHRASES["descriptors"])
"""What follows the gender head of a Gender entity ('زن راننده'): a word that gives no gender or age."""

GROUPS: dict[str, str] = PHRASES["category_groups"]
CATEGORY_SPECS: dict[str, Category] = {
    "Age": Category("AGE", "modifier", _groups(GROUPS["Age"]), glossary=False),
    "Profession": Category("PRO", "form", _groups(GROUPS["Profession"]), glossary=False),
    "Socio-economic Status": Category("SES", "modifier", _groups(GROUPS["Socio-economic Status"]), glossary=True),
    "Educational Background": Category("EDU", "modifier", _groups(GROUPS["Educational Background"]), glossary=True),
    "Disability": Category("DIS", "modifier", _groups(GROUPS["Disability"]), glossary=True),
    "Disease": Category("DSE", "modifier", _groups(GROUPS["Disease"]), glossary=True),
    "Domestic Area": Category("DOM", "modifier", _groups(GROUPS["Domestic Area"]), glossary=True),
    "Ethnicity": Category("ETH", "modifier", _groups(GROUPS["Ethnicity"]), glossary=True),
    "Family Structure": Category("FAM", "modifier", _groups(GROUPS["Family Structure"]), glossary=True),
    "Gender": Category("GEN", "gender", _groups(GROUPS["Gender"]), glossary=False),
    "Property Ownership": Category("PRP", "form", _groups(GROUPS["Property Ownership"]), glossary=False),
    "Nationality": Category("NAT", "modifier", _groups(GROUPS["Nationality"]), glossary=True),
    "Physical Appearance": Category("APP", "modifier", _groups(GROUPS["Physical Appearance"]), glossary=True),
    "Political Orientation": Category("POL", "modifier", _groups(GROUPS["Political Orientation"]), glossary=True),
    "Religion": Category("REL", "modifier", _groups(GROUPS["Religion"]), glossary=True),
    "Sexual Orientation": Category("SEX", "modifier", _groups(GROUPS["Sexual Orientation"]), glossary=True),
}
"""Per category of PBBQ §3.1, its groups and how their entities are made (placeholders, not the paper's)."""


@dataclass(frozen=True)
class Trait:
    """A stereotyped trait: the questionnaire's statement, the two questions (PBBQ §3.4) and the two clauses of
    a disambiguated continuation (negative, non-negative), in Persian and English. No English pronoun."""

    statement: Term
    negative: Term
    nonnegative: Term
    negative_clause: Term
    nonnegative_clause: Term

    @property
    def continuation(self) -> Term:
        """The biased continuation: ``{stereo}`` has the negative trait (PBBQ §3.3.3, Appendix D)."""
        return Term(
            f"{{stereo}} {self.negative_clause.fa}، اما {{nonstereo}} {self.nonnegative_clause.fa}.",
            f"The {{stereo}} {self.negative_clause.en}, but the {{nonstereo}} {self.nonnegative_clause.en}.",
        )


def _traits(block: str) -> tuple[Trait, ...]:
    """Traits separated by blank lines, each five ``fa = en`` lines (see :class:`Trait`)."""
    return tuple(Trait(*_terms(chunk)) for chunk in block.strip().split("\n\n"))


TRAITS = _traits(PHRASES["traits"])
"""The traits the stereotypes are about: generic placeholders, each usable in any category."""

LEX_POOLS: dict[str, tuple[Term, ...]] = {
    "place": _terms(PHRASES["lex_pools"]["place"]),
    "occasion": _terms(PHRASES["lex_pools"]["occasion"]),
}
"""Lexical variants (PBBQ §3.3: the optional third placeholder), by the slot a frame has for them."""


def _frames(block: str) -> tuple[tuple[str, Term], ...]:
    """Two lines per opening: ``slot | Persian`` (slot ``-``: no lexical variant), then its English."""
    lines = block.strip().splitlines()
    pairs = [(head.split("|", 1), english.strip()) for head, english in zip(lines[::2], lines[1::2], strict=True)]
    return tuple((slot.strip().strip("-"), Term(fa.strip(), english)) for (slot, fa), english in pairs)


FRAMES = _frames(PHRASES["frames"])
"""Ambiguous-context openings (slot: the kind of lexical variant, '' for none). Symmetric in the two entities, so
they read right with the placeholders exchanged (instantiate's other order of mention)."""
CLOSERS = _terms(PHRASES["closers"])
"""Neutral sentences after an opening, so that every template's ambiguous context is its own."""
UNKNOWN_PHRASES = _terms(PHRASES["unknown_phrases"])
"""The 'unknown' option's phrasings, as annotations/unknown_phrases.csv has them."""
SOURCES = (("expert", 0.55), ("crawl", 0.38), ("survey-write-in", 0.07))
NAME_TABLE = REPO_ROOT / "annotations" / "names" / "names_fa.csv"
"""The bundled Persian name table; the synthetic one holds its rows of the groups the entities name."""
FAIL_KINDS = ("kappa", "relevance", "rejected", "kappa")
"""The reasons the failing templates fail, in turn: kappa < 0.2, mean relevance < 1.5, stereotype rejected."""
ITEMS, ANNOTATORS = 6, 3
"""Items per template and annotators per item, as the bundled ratings have them."""
MAX_LEX = 5
FIRST_FAILURES = {"disambiguate": 0.10, "context": 0.015}
"""Share of first answers that break a rule on purpose (no {nonstereo}; an untranslated context)."""

# -------------------------------------------------------------------------------------------------- the plan


class SynthError(ValueError):
    """A synthetic build that cannot be written as asked (one line)."""


def _round(value: float) -> int:
    """Half up (7.5 → 8, 8.5 → 9); Python's ``round`` rounds half to even (8.5 → 8)."""
    return int(np.floor(value + 0.5))


def _apportion(total: int, weights: Sequence[float], low: Sequence[int], high: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights``, each share within ``[low, high]`` (largest remainder)."""
    total = max(sum(low), min(total, sum(high)))
    shares = np.array(weights, dtype=float) * total / sum(weights)
    counts = [min(max(int(s), lo), hi) for s, lo, hi in zip(shares, low, high, strict=True)]
    order = sorted(range(len(counts)), key=lambda i: (-(shares[i] - int(shares[i])), i))
    while sum(counts) != total:
        step = 1 if sum(counts) < total else -1
        for i in order:
            if sum(counts) == total:
                break
            if low[i] <= counts[i] + step <= high[i]:
                counts[i] += step
    return counts


@dataclass(frozen=True)
class CategoryPlan:
    """What one category gets at a scale: stereotypes (accepted and rejected), templates that pass the gate
    (Table 1's count, scaled), the failing ones by reason, and entity-pair units (12 ``fa`` examples each)."""

    category: str
    accepted: int
    rejected: int
    templates: int
    failing: tuple[str, ...]
    units: int

    @property
    def stereotypes(self) -> int:
        return self.accepted + self.rejected

    @property
    def examples(self) -> int:
        return EXAMPLES_PER_UNIT * self.units


def plan(scale: str) -> list[CategoryPlan]:
    """Per category (in Table 1's order) the counts of a synthetic build at ``scale``: the paper's Table 1
    templates and samples (samples rounded to a multiple of 12), 307 stereotypes of which 233 accepted, and
    24 templates that fail the gate, all times the scale's share (at least one template per category)."""
    if scale not in SCALES:
        raise SynthError(f"scale {scale!r} is not one of {', '.join(SCALES)}")
    share = SCALES[scale]
    names = list(TABLE1)
    templates = [max(1, _round(TABLE1[c][0] * share)) for c in names]
    units = [max(t, _round(TABLE1[c][1] * share / EXAMPLES_PER_UNIT)) for c, t in zip(names, templates, strict=True)]
    accepted = _apportion(_round(ACCEPTED * share), templates, [1] * len(names), templates)
    rejected_total = max(2, _round((STEREOTYPES - ACCEPTED) * share))
    rejected = _apportion(rejected_total, templates, [0] * len(names), [rejected_total] * len(names))
    failing: list[list[str]] = [[] for _ in names]
    by_size = sorted(range(len(names)), key=lambda i: (-TABLE1[names[i]][0], i))
    with_rejected = [i for i in by_size if rejected[i]]
    turn = {"all": 0, "rejected": 0}
    for n in range(max(3, _round(FAILING_TEMPLATES * share))):
        kind = FAIL_KINDS[n % len(FAIL_KINDS)]
        if kind == "rejected":
            failing[with_rejected[turn["rejected"] % len(with_rejected)]].append(kind)
            turn["rejected"] += 1
        else:
            failing[by_size[turn["all"] % len(by_size)]].append(kind)
            turn["all"] += 1
    plans = [
        CategoryPlan(c, accepted[i], rejected[i], templates[i], tuple(failing[i]), units[i])
        for i, c in enumerate(names)
    ]
    for p in plans:
        combos = len(CATEGORY_SPECS[p.category].groups) * len(TRAITS)
        if p.stereotypes > combos:  # found now, not after the stages have run on the written inputs
            raise SynthError(
                f"scale {scale!r}: {p.category} needs {p.stereotypes} stereotypes; the phrase book makes {combos}"
            )
    return plans


def _caps(spec: Category) -> tuple[int, int]:
    """The most stereotyped and non-stereotyped entities a template of the category takes."""
    if spec.kind == "gender":  # one role per template: a woman and a man of one descriptor (the role parity gate)
        return (1, 1)
    return (3, 3) if spec.kind == "form" else (4, 4)


def _sizes(total: int, count: int, spec: Category, rng: np.random.Generator) -> list[int]:
    """``count`` template sizes (entity pairs × lexical variants, each a product the caps allow) summing to
    ``total``, each near an even share with some spread: the closest such sizes (least squares, dynamic
    programming over the running sum)."""
    smax, nmax = _caps(spec)
    sizes = sorted({s * n * v for s in range(1, smax + 1) for n in range(1, nmax + 1) for v in range(1, MAX_LEX + 1)})
    wanted = total / count * rng.uniform(0.6, 1.4, size=count)
    cost = np.full(total + 1, np.inf)
    cost[0] = 0.0
    picks = np.zeros((count, total + 1), dtype=np.int64)
    for t in range(count):
        best, pick = np.full(total + 1, np.inf), np.zeros(total + 1, dtype=np.int64)
        for size in (s for s in sizes if s <= total):
            candidate = np.full(total + 1, np.inf)
            candidate[size:] = cost[: total + 1 - size] + (size - wanted[t]) ** 2
            better = candidate < best
            best[better], pick[better] = candidate[better], size
        cost, picks[t] = best, pick
    if not np.isfinite(cost[total]):
        raise SynthError(f"{spec.code}: {total} entity-pair units cannot be split over {count} templates")
    out, left = [], total
    for t in range(count - 1, -1, -1):
        out.append(int(picks[t][left]))
        left -= out[-1]
    return out[::-1]


def _factor(size: int, spec: Category, rng: np.random.Generator) -> tuple[int, int, int]:
    """(stereotyped entities, non-stereotyped entities, lexical variants) whose product is ``size``."""
    smax, nmax = _caps(spec)
    options = [
        (s, n, size // (s * n))
        for s in range(1, smax + 1)
        for n in range(1, nmax + 1)
        if size % (s * n) == 0 and size // (s * n) <= MAX_LEX
    ]
    return options[int(rng.integers(len(options)))]


# ------------------------------------------------------------------------------------------------ generation


@dataclass
class Stereotype:
    """A questionnaire row: its group (an index into its category's groups), the groups it is contrasted with,
    its trait, and whether the survey is made to accept it."""

    stereotype_id: str
    category: str
    group: int
    others: tuple[int, ...]
    trait: Trait
    source: str
    accepted: bool


@dataclass
class SynthTemplate:
    """A templates.csv row before it is written, with what the ratings and the stand-in need to know of it."""

    template_id: str
    stereotype: Stereotype
    ambiguous: Term
    stereo: tuple[Term, ...]
    nonstereo: tuple[Term, ...]
    lex: tuple[Term, ...]
    fate: str
    """'pass', 'single' (passes with every rating alike), or a reason in :data:`FAIL_KINDS`."""
    disambiguation: str
    """Where the biased continuation comes from: 'llm', 'human' (the template's own) or 'override'."""


def _ezafe(head: Term) -> str:
    """A head noun as it stands before its adjective: 'همسایه' → 'همسایه‌ی'."""
    return f"{head.fa}\u200cی" if head.fa.endswith("ه") else head.fa


def _forms(spec: Category, group: Group, heads: str) -> list[Term]:
    """The entity phrases of ``group`` with heads of class ``heads`` (see :class:`Category`)."""
    if spec.kind == "form":
        return list(group.words)
    if spec.kind == "gender":
        head = group.words[0]
        return [Term(f"{head.fa} {d.fa}", f"{head.en} {d.en}") for d in DESCRIPTORS]
    return [Term(f"{_ezafe(h)} {w.fa}", f"{w.en} {h.en}") for h in HEADS[heads] for w in group.words]


def _entities(
    spec: Category, stereotype: Stereotype, n_stereo: int, n_other: int, rng: np.random.Generator
) -> tuple[tuple[Term, ...], tuple[Term, ...]]:
    """Entities of one template: all with heads of one class, so no pair differs in gender or age band except
    in the attribute the category is about (instantiate's confound gate builds every pair)."""
    classes = ["neutral"]
    if spec.kind == "modifier":
        target = spec.groups[stereotype.group]
        others = [spec.groups[g] for g in stereotype.others]
        for gendered in ("male", "female"):
            if len(_forms(spec, target, gendered)) >= n_stereo and (
                sum(len(_forms(spec, g, gendered)) for g in others) >= n_other
            ):
                classes.append(gendered)
    heads = classes[int(rng.integers(len(classes)))]
    stereo = _forms(spec, spec.groups[stereotype.group], heads)
    other = [form for g in stereotype.others for form in _forms(spec, spec.groups[g], heads)]
    if spec.kind == "gender":  # the same descriptor on both sides, so the pair differs in gender alone
        descriptor = int(rng.integers(len(DESCRIPTORS)))
        stereo, other = [stereo[descriptor]], [other[descriptor]]
    picked_stereo = [stereo[i] for i in sorted(rng.permutation(len(stereo))[:n_stereo])]
    picked_other = [other[i] for i in sorted(rng.permutation(len(other))[:n_other])]
    return tuple(picked_stereo), tuple(picked_other)


class _Openings:
    """Distinct ambiguous contexts: an opening and one closing sentence, then two once those run out."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def take(self, slot: str) -> Term:
        frames = [frame for kind, frame in FRAMES if kind == slot]
        for closers in (1, 2):
            for _ in range(200):
                frame = frames[int(self.rng.integers(len(frames)))]
                chosen = [CLOSERS[i] for i in self.rng.permutation(len(CLOSERS))[:closers]]
                text = Term(
                    " ".join([frame.fa, *(c.fa for c in chosen)]), " ".join([frame.en, *(c.en for c in chosen)])
                )
                if text.fa not in self.used:
                    self.used.add(text.fa)
                    return text
        raise SynthError(f"ran out of distinct ambiguous contexts for slot {slot!r}")


def _stereotypes(plans: Sequence[CategoryPlan], rng: np.random.Generator) -> list[Stereotype]:
    out = []
    for p in plans:
        spec = CATEGORY_SPECS[p.category]
        combos = [(g, t) for g in range(len(spec.groups)) for t in range(len(TRAITS))]
        order = rng.permutation(len(combos))[: p.stereotypes]
        rejected = set(rng.permutation(p.stereotypes)[: p.rejected].tolist())
        for k, index in enumerate(order):
            group, trait = combos[int(index)]
            pool = [g for g in range(len(spec.groups)) if g != group]
            others = sorted(int(g) for g in rng.permutation(pool)[: int(rng.integers(1, min(2, len(pool)) + 1))])
            source = SOURCES[int(rng.choice(len(SOURCES), p=[w for _, w in SOURCES]))][0]
            out.append(
                Stereotype(
                    f"{SYNTHETIC_ID_PREFIX}{spec.code}-{k + 1:03d}",
                    p.category,
                    group,
                    tuple(others),
                    TRAITS[trait],
                    source,
                    k not in rejected,
                )
            )
    return out


def _templates(
    plans: Sequence[CategoryPlan], stereotypes: Sequence[Stereotype], rng: np.random.Generator
) -> list[SynthTemplate]:
    openings = _Openings(rng)
    out: list[SynthTemplate] = []
    for p in plans:
        spec = CATEGORY_SPECS[p.category]
        mine = [s for s in stereotypes if s.category == p.category]
        accepted = [s for s in mine if s.accepted]
        rejected = [s for s in mine if not s.accepted]
        owners = list(accepted) + [
            accepted[int(i)] for i in rng.integers(len(accepted), size=p.templates - len(accepted))
        ]
        sizes = _sizes(p.units, p.templates, spec, rng)
        fates = ["pass"] * p.templates
        fates[int(rng.integers(p.templates))] = "single" if p.templates > 1 else "pass"
        plan_rows = list(zip(owners, sizes, fates, strict=True))
        for kind in p.failing:
            owner = (
                rejected[int(rng.integers(len(rejected)))]
                if kind == "rejected"
                else accepted[int(rng.integers(len(accepted)))]
            )
            plan_rows.append((owner, int(rng.integers(1, 5)), kind))
        numbers: dict[str, int] = {}
        rows = []
        for owner, size, fate in sorted(plan_rows, key=lambda row: row[0].stereotype_id):
            numbers[owner.stereotype_id] = numbers.get(owner.stereotype_id, 0) + 1
            n_stereo, n_other, n_lex = _factor(size, spec, rng)
            slot = "" if n_lex == 1 and rng.random() < 0.3 else ("place", "occasion")[int(rng.integers(2))]
            lex = (
                ()
                if not slot
                else tuple(LEX_POOLS[slot][i] for i in sorted(rng.permutation(len(LEX_POOLS[slot]))[:n_lex]))
            )
            stereo, other = _entities(spec, owner, n_stereo, n_other, rng)
            draw = rng.random()
            source = "human" if draw < 0.05 else "override" if draw < 0.06 else "llm"
            rows.append(
                SynthTemplate(
                    f"{owner.stereotype_id}-T{numbers[owner.stereotype_id]}",
                    owner,
                    openings.take(slot),
                    stereo,
                    other,
                    lex,
                    fate,
                    source,
                )
            )
        out += rows
    llm = [t for t in out if t.disambiguation == "llm" and t.fate in ("pass", "single")]
    for source in ("override", "human"):  # each path at least once, whatever the scale
        if not any(t.disambiguation == source for t in out):
            llm.pop().disambiguation = source
    return out


def _ratings(template: SynthTemplate, rng: np.random.Generator) -> list[list[str]]:
    """Items × annotators: labels and relevance whose Fleiss' kappa and mean relevance put the template where its
    fate says (checked with the gate's own :func:`~pbbq.tasks.kappa_gate.template_kappa`, redrawn until so)."""
    labels = ("stereo", "nonstereo", "neither")
    for _ in range(1000):
        rows = []
        for item in range(1, ITEMS + 1):
            truth = "stereo" if template.fate == "single" or item > 1 else labels[int(rng.integers(1, 3))]
            for annotator in range(1, ANNOTATORS + 1):
                if template.fate == "kappa":
                    label = labels[int(rng.integers(3))]
                elif template.fate == "single" or rng.random() < 0.92:
                    label = truth
                else:
                    label = labels[int(rng.integers(3))]
                low = template.fate == "relevance"
                relevance = int(rng.choice([1, 2, 3], p=[0.8, 0.2, 0.0] if low else [0.05, 0.3, 0.65]))
                rows.append(
                    [
                        template.template_id,
                        f"{template.template_id}-I{item}",
                        f"{SYNTHETIC_ID_PREFIX}A{annotator}",
                        label,
                        str(relevance),
                    ]
                )
        frame = pd.DataFrame(rows, columns=["template_id", "item_id", "annotator_id", "target_label", "relevance"])
        kappa, _ = template_kappa(frame)
        relevance = frame["relevance"].astype(int).mean()
        ok = {
            "kappa": kappa < MIN_KAPPA - 0.1 and relevance >= MIN_RELEVANCE + 0.2,
            "relevance": kappa >= MIN_KAPPA + 0.2 and relevance < MIN_RELEVANCE - 0.15,
        }.get(template.fate, kappa >= MIN_KAPPA + 0.2 and relevance >= MIN_RELEVANCE + 0.2)
        if ok:
            return rows
    raise SynthError(f"{template.template_id}: no ratings found for fate {template.fate!r}")


def _responses(stereotypes: Sequence[Stereotype], rng: np.random.Generator) -> list[list[str]]:
    """250 respondents: the Appendix E counts per attribute (each column shuffled on its own); per stereotype a
    share of 'yes' among those who answer, over 60 % when accepted, at or under it when not (PBBQ §3.2); one
    rejected stereotype sits exactly at 60 % (150 of 250, nobody skips it); about 1 % of cells are skipped."""
    columns = {
        column: [level for level, n in DEMOGRAPHICS[column].items() for _ in range(n)] for column in DEMOGRAPHIC_COLUMNS
    }
    columns = {column: [levels[i] for i in rng.permutation(RESPONDENTS)] for column, levels in columns.items()}
    answers: dict[str, list[str]] = {}
    at_threshold = next((s.stereotype_id for s in stereotypes if not s.accepted), None)
    for s in stereotypes:
        skipped = rng.random(RESPONDENTS) < 0.01 if s.stereotype_id != at_threshold else np.zeros(RESPONDENTS, bool)
        answering = np.flatnonzero(~skipped)
        n = len(answering)
        if s.stereotype_id == at_threshold:
            yes = round(THRESHOLD * n)
        elif s.accepted:
            yes = max(round(rng.uniform(0.64, 0.90) * n), int(np.floor(THRESHOLD * n)) + 1)
        else:
            yes = min(round(rng.uniform(0.25, 0.56) * n), int(np.floor(THRESHOLD * n)))
        cells = np.full(RESPONDENTS, "no", dtype=object)
        cells[skipped] = ""
        cells[rng.choice(answering, size=yes, replace=False)] = "yes"
        answers[s.stereotype_id] = cells.tolist()
    return [
        [
            f"{SYNTHETIC_ID_PREFIX}R{r + 1:03d}",
            *(columns[c][r] for c in DEMOGRAPHIC_COLUMNS),
            *(answers[s.stereotype_id][r] for s in stereotypes),
        ]
        for r in range(RESPONDENTS)
    ]


# ---------------------------------------------------------------------------------------------- the stand-in


def _tag(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, flags=re.DOTALL)
    if match is None:
        raise SynthError(f"the synthetic stand-in found no <{tag}> block in a request")
    return match.group(1)


def _fill(text: str, lex: str) -> str:
    return text.replace("{lex}", lex)


def _fails_first(seed: int, request: LLMRequest, share: float) -> bool:
    """Whether the first answer to this request breaks a rule on purpose (seeded, from the request)."""
    digest = hashlib.sha256(f"{seed}|{request.stage}|{request.context}".encode()).hexdigest()
    return len(request.messages) == 1 and int(digest[:8], 16) / 16**8 < share


def _group_english(group: Group) -> str:
    """A group's name in English as the translate stage checks it: without a leading article, and naming the group
    by its glossary word when its label holds one ('Jewish people' for «یهودی‌ها», where the label says 'Jews')."""
    english = re.sub(r"^(the|a|an)\s+", "", group.label.en, flags=re.IGNORECASE)
    for word in group.words:
        if word.fa in group.label.fa and word.en.lower() not in english.lower():
            return f"{word.en} people"
    return english


class StandInModel(InProcessTransport):
    """Answers the build's LLM requests from the synthetic phrase book, as a model that always follows the
    prompt would (PBBQ Appendix D; the translation prompts): each answer computed from the request.

    - disambiguate: the continuation of the trait its negative question names, ``{stereo}`` with the negative
      clause; a seeded tenth of first answers leaves out ``{nonstereo}`` (the retry then passes);
    - translate: an entity, a lexical variant or a question from the phrase book; a context by replacing its two
      entities (given in ``<phrases>``) with placeholders and looking the rest up among every template's
      contexts, then putting the entities' English in; a seeded 1.5 % of first answers are the Persian itself;
    - back-translation: the Persian the English was translated from, so chrF is 100.
    """

    def __init__(self, templates: Sequence[SynthTemplate], seed: int, targets: Sequence[str] = ("en",)) -> None:
        self.seed = seed
        self.traits = {t.negative.fa: t for t in TRAITS}
        self.phrases: dict[str, dict[str, str]] = {"entity": {}, "lex": {}, "question": {}, "context": {}}
        labels = {group.label.fa: _group_english(group) for spec in CATEGORY_SPECS.values() for group in spec.groups}
        self.phrases["group"] = labels | {f"{NOT_TARGET} {fa}": f"people other than {en}" for fa, en in labels.items()}
        for trait in TRAITS:
            self.phrases["question"].update(
                {trait.negative.fa: trait.negative.en, trait.nonnegative.fa: trait.nonnegative.en}
            )
        for t in templates:
            self.phrases["entity"].update({e.fa: e.en for e in (*t.stereo, *t.nonstereo)})
            self.phrases["lex"].update({v.fa: v.en for v in t.lex})
            cont = t.stereotype.trait.continuation
            for lex in t.lex or (Term("", ""),):
                for a_fa, a_en in (
                    (t.ambiguous.fa, t.ambiguous.en),
                    (swap_roles(t.ambiguous.fa), swap_roles(t.ambiguous.en)),
                ):
                    ambiguous = (_fill(a_fa, lex.fa), _fill(a_en, lex.en))
                    self.phrases["context"][ambiguous[0]] = ambiguous[1]
                    for c_fa, c_en in ((cont.fa, cont.en), (swap_roles(cont.fa), swap_roles(cont.en))):
                        self.phrases["context"][f"{ambiguous[0]} {c_fa}"] = f"{ambiguous[1]} {c_en}"
        self.kinds = {text: kind for code in targets for kind, text in Pair("fa", code).instructions.items()}
        self.sources: dict[str, set[str]] = {}

    def text(self, request: LLMRequest) -> str:
        first = request.messages[0][1]
        if request.stage == "disambiguate":
            trait = self.traits.get(_tag(first, "negative_trait"))
            if trait is None:
                raise SynthError(f"the synthetic stand-in knows no trait for {request.context}")
            text = trait.continuation.fa
            return (
                text.replace("{nonstereo}", "دیگری")
                if _fails_first(self.seed, request, FIRST_FAILURES["disambiguate"])
                else text
            )
        translating = request.stage.split("_")[0] == "translate"  # translate, translate_xa
        if translating and request.context.startswith("back "):
            english = _tag(first, "english_text")
            if english not in self.sources:
                raise SynthError(f"the synthetic stand-in translated nothing into {english[:60]!r}")
            return min(self.sources[english])
        if translating:
            kind = next((k for text, k in self.kinds.items() if text in (request.system or "")), None)
            persian = _tag(first, "persian_text")
            english = self._english(str(kind), persian, _tag(first, "phrases"))
            if kind == "context" and _fails_first(self.seed, request, FIRST_FAILURES["context"]):
                return persian
            self.sources.setdefault(" ".join(english.split()), set()).add(persian)
            return english
        raise SynthError(f"the synthetic stand-in has no answer for stage {request.stage!r}")

    def _english(self, kind: str, persian: str, phrases: str) -> str:
        if kind != "context":
            english = self.phrases.get(kind, {}).get(persian)
            if english is None:
                raise SynthError(f"the synthetic stand-in has no English for the {kind} {persian!r}")
            return english
        given = dict(line.split(" → ", 1) for line in phrases.splitlines() if " → " in line)
        if len(given) != 2:
            raise SynthError(f"a context request names {len(given)} entities, not 2: {persian[:60]!r}")
        entities = list(given)
        slots = dict(zip(entities, ("{stereo}", "{nonstereo}"), strict=True))
        pattern = "|".join(re.escape(e) for e in sorted(entities, key=len, reverse=True))
        skeleton = re.sub(rf"(?<![\w\u200c])(?:{pattern})(?![\w\u200c])", lambda m: slots[m.group(0)], persian)
        english = self.phrases["context"].get(skeleton)
        if english is None:
            raise SynthError(f"the synthetic stand-in has no English for the context {persian[:60]!r}")
        return english.replace("{stereo}", given[entities[0]]).replace("{nonstereo}", given[entities[1]])


# --------------------------------------------------------------------------------------------------- writing


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
    rows = [
        (p.category, p.stereotypes, p.accepted, p.templates + len(p.failing), p.templates, p.examples) for p in plans
    ]
    rows.append(("total", *(sum(row[i] for row in rows) for i in range(1, 6))))
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


def _input_files(
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
        ["respondent_id", *DEMOGRAPHIC_COLUMNS, *(s.stereotype_id for s in stereotypes)], _responses(stereotypes, rng)
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
        (row for t in templates for row in _ratings(t, rng)),
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
    files |= _language_files(targets)
    files["build.toml"] = _build_toml(scale, seed, targets).encode("utf-8")
    files["README.md"] = _readme(scale, seed, plans).encode("utf-8")
    return files


# ---------------------------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class SynthResult:
    """A written synthetic build: its folder, counts per category (planned and as the build's stages found them)
    and the seconds each step took."""

    folder: Path
    scale: str
    seed: int
    counts: pd.DataFrame
    requests: int
    seconds: dict[str, float]


ReadConfig = Callable[[Path], Any]
"""Reads a ``build.toml`` into the build's configuration: :func:`pbbq.flows.config.load_config`, passed in by the
caller (a task does not import the flows, which sit above it: docs/architecture.md §2)."""


def _record(
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
    disambiguated = disambiguate(gate["gated"], survey["stereotypes"], overrides, prompts, client, build.disambiguate)
    examples = instantiate(disambiguated["templates"], survey["stereotypes"], build.instantiate)["examples"]
    seconds["stages to instantiate"] = time.perf_counter() - clock
    log(f"disambiguate: {len(disambiguated['attempts'])} answers; instantiate: {len(examples):,} fa examples")
    clock = time.perf_counter()
    used = set(disambiguated["attempts"]["request_id"])
    translated: dict[str, pd.DataFrame] = {}
    for number, code in enumerate(targets):
        stage = translate_stage(code, first=number == 0)
        resources = {name: source.load() for name, source in stage.inputs.items() if name in ("prompts", "pair")}
        output = stage.run(
            examples, tables["unknown_phrases"], glossary, client=client, **resources, params=build.params(stage.name)
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


def _check(counts: pd.DataFrame, plans: Sequence[CategoryPlan]) -> None:
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


def synthesize(
    out: Path,
    scale: str = "paper",
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    *,
    read_config: ReadConfig,
    targets: int = 1,
) -> SynthResult:
    """Write a synthetic build into ``out`` (which must not exist or be empty): inputs, build.toml, README.md,
    synth.json and the transcript; translated into ``targets`` languages (:func:`target_codes`). The folder
    appears complete or not at all. ``read_config`` reads the build.toml written, whose stages run to record the
    transcript."""
    say = log or (lambda _: None)
    plans = plan(scale)
    codes = target_codes(targets)
    if seed < 0:
        raise SynthError(f"seed {seed} must be >= 0")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SynthError(f"{out} exists and is not an empty folder: choose a new --out")
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    stereotypes = _stereotypes(plans, rng)
    templates = _templates(plans, stereotypes, rng)
    files = _input_files(scale, seed, codes, plans, stereotypes, templates, rng)
    generated = time.perf_counter() - started
    say(f"generated {len(stereotypes)} stereotypes and {len(templates)} templates in {generated:.1f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}-synth-{os.getpid()}-{time.monotonic_ns()}"
    staging.mkdir()  # not mkdtemp: the folder takes the user's umask, as a build's files do
    try:
        for name, data in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(data)
        counts, requests, seconds = _record(staging, templates, seed, codes, say, read_config)
        _check(counts, plans)
        written = sorted(p for p in staging.rglob("*") if p.is_file())
        meta = {
            "synthetic": True,
            "generator": "pbbq synth",
            "note": NOTE,
            "scale": scale,
            "seed": seed,
            "targets": list(codes),
            "requests": requests,
            "counts": {c: {k: int(v) for k, v in row.items()} for c, row in counts.iterrows()},
            "files": {p.relative_to(staging).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in written},
        }
        (staging / "synth.json").write_text(
            json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = {"generate": generated, **seconds, "total": time.perf_counter() - started}
    return SynthResult(out, scale, seed, counts, requests, seconds)


def summary(result: SynthResult) -> list[str]:
    """The counts per category and in all (the examples per language: ``fa`` and each target), for the terminal."""
    c = result.counts
    widths = {"stereotypes": 12, "accepted": 10, "templates": 10, "gated": 7} | {
        column: 8 for column in c.columns[c.columns.get_loc("fa") :]
    }

    def line(name: str, row: pd.Series) -> str:
        return f"{name:<24}" + "".join(f"{row[column]:>{width},}" for column, width in widths.items())

    header = f"{'category':<24}" + "".join(f"{column:>{width}}" for column, width in widths.items())
    return [header, *(line(str(category), row) for category, row in c.iterrows()), line("total", c.sum())]
