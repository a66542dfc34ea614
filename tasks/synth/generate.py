"""The generation of a synthetic build's rows: stereotypes, templates (with their entities, lexical variants and
ambiguous contexts), annotator ratings and survey responses, each drawn from one seeded generator so that a scale
and seed give the same rows. Their counts come from the scale plan (:mod:`.scale`), their words from the phrase
book (:mod:`.phrases`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.inputs import DEMOGRAPHIC_COLUMNS
from ..kappa_gate import template_kappa
from ..publish import SYNTHETIC_ID_PREFIX
from .phrases import (
    CATEGORY_SPECS,
    CLOSERS,
    DESCRIPTORS,
    FRAMES,
    HEADS,
    LEX_POOLS,
    TRAITS,
    Category,
    Group,
    Term,
    Trait,
)
from .scale import (
    DEMOGRAPHICS,
    MIN_KAPPA,
    MIN_RELEVANCE,
    RESPONDENTS,
    THRESHOLD,
    CategoryPlan,
    SynthError,
    factor_size,
    template_sizes,
)

SOURCES = (("expert", 0.55), ("crawl", 0.38), ("survey-write-in", 0.07))
ITEMS, ANNOTATORS = 6, 3
"""Items per template and annotators per item, as the bundled ratings have them."""


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
    """'pass', 'single' (passes with every rating alike), or a reason in :data:`.scale.FAIL_KINDS`."""
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


def draw_stereotypes(plans: Sequence[CategoryPlan], rng: np.random.Generator) -> list[Stereotype]:
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


def draw_templates(
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
        sizes = template_sizes(p.units, p.templates, spec, rng)
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
            n_stereo, n_other, n_lex = factor_size(size, spec, rng)
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


def rating_rows(template: SynthTemplate, rng: np.random.Generator) -> list[list[str]]:
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


def response_rows(stereotypes: Sequence[Stereotype], rng: np.random.Generator) -> list[list[str]]:
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
