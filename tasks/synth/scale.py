"""The scale plan of a synthetic build: the paper's counts (PBBQ Table 1, §3.2, Appendix E) and what each
category gets of them at a scale (:func:`plan`), down to the sizes of its templates (:func:`template_sizes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..kappa_gate import GateParams
from ..survey_filter import SurveyParams
from .phrases import CATEGORY_SPECS, TRAITS, Category

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
THRESHOLD = SurveyParams.threshold
MIN_KAPPA, MIN_RELEVANCE = GateParams.min_kappa, GateParams.min_relevance
"""The thresholds the design is made for, the stages' defaults (PBBQ §3.2; PakBBQ §3.2), written into build.toml."""
FAIL_KINDS = ("kappa", "relevance", "rejected", "kappa")
"""The reasons the failing templates fail, in turn: kappa < 0.2, mean relevance < 1.5, stereotype rejected."""
MAX_LEX = 5


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


def template_sizes(total: int, count: int, spec: Category, rng: np.random.Generator) -> list[int]:
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


def factor_size(size: int, spec: Category, rng: np.random.Generator) -> tuple[int, int, int]:
    """(stereotyped entities, non-stereotyped entities, lexical variants) whose product is ``size``."""
    smax, nmax = _caps(spec)
    options = [
        (s, n, size // (s * n))
        for s in range(1, smax + 1)
        for n in range(1, nmax + 1)
        if size % (s * n) == 0 and size // (s * n) <= MAX_LEX
    ]
    return options[int(rng.integers(len(options)))]
