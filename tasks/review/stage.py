"""``[review]``: a build's review decisions (DESIGN §9). A configuration with a ``[review]`` section names its
decisions file (``pbbq review import`` writes it); the pipeline then wires the decisions into the stages whose
machine output people judged (:func:`pbbq.flows.pipeline.reviewed`): disambiguate (contexts), each translate stage
(translations per language) and names (names), and adds this stage, which states what people checked: every
decision with what the build did with it (applied, stale, unresolved, absent), the agreement per round and
question, and the items the reviewers disagreed on. A configuration without ``[review]`` runs the pipeline as it was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from ..core.artifacts import StageOutput
from ..core.run_folder import display_path
from ..core.stage import Input, Stage, Table
from .agreement import AGREEMENT_COLUMNS, agreement, below
from .apply import STATUS_COLUMNS, resolve
from .decisions import ADJUDICATED_COLUMNS, adjudicate, load_decisions
from .items import content_hash
from .names import HUMAN_STRENGTH, reviewed_name_table

STAGE_NAME = "review"


@dataclass(frozen=True)
class ReviewParams:
    decisions: str = ""
    """The decisions file (``pbbq review import``), relative to the configuration."""
    require: bool = False
    """Release only reviewed items: a machine-written context or translation without an applied decision is
    dropped (``review_required``)."""
    min_alpha: float = 0.667
    """Krippendorff's alpha a round's question must reach; one under it is reported (a warning), not hidden."""
    label: str = ""
    """What the card says first of the decisions (the bundled samples': people standing in for reviewers)."""

    def __post_init__(self) -> None:
        if not self.decisions:
            raise ValueError("decisions: name the decisions file (pbbq review import writes it)")

    def relative_to(self, folder: Path) -> ReviewParams:
        return replace(self, decisions=str((folder / self.decisions).resolve()))

    @property
    def decisions_path(self) -> Path:
        """The decisions file, as the build loads it (:data:`DECISIONS`)."""
        return Path(self.decisions)

    def as_report(self) -> dict[str, Any]:
        """The section as the manifest records it: the decisions file relative to the repository when inside it
        (:func:`~pbbq.tasks.core.run_folder.display_path`), so a release does not carry the builder's folder."""
        return {**asdict(self), "decisions": display_path(self.decisions_path)}


@dataclass(frozen=True)
class ReviewRules:
    """What the reviewed stages need of ``[review]`` besides the decisions (a resource, so it is in their key)."""

    require: bool = False


DECISIONS = Input("review_decisions", load_decisions, section=STAGE_NAME, key="decisions_path")
"""``[review] decisions``: the decisions table."""

STATUS = pa.schema([(c, pa.int64() if c == "n_reviewers" else pa.string()) for c in STATUS_COLUMNS])
AGREEMENT = pa.schema(
    [
        (
            c,
            pa.float64()
            if c in ("alpha", "fleiss_kappa", "cohen_kappa")
            else pa.int64()
            if c.startswith("n_")
            else pa.string(),
        )
        for c in AGREEMENT_COLUMNS
    ]
)
DISAGREEMENT = pa.schema([(c, pa.int64() if c == "n_reviewers" else pa.string()) for c in ADJUDICATED_COLUMNS])


def machine_texts(attempts: pd.DataFrame, key: str, text: str) -> dict[str, str]:
    """The machine's accepted answer per item (its last attempt that broke no rule)."""
    passed = attempts[attempts["failures"] == ""]
    return dict(zip(passed[key], passed[text], strict=True))


def current_hashes(
    contexts: pd.DataFrame | None, translations: dict[str, tuple[pd.DataFrame, pd.DataFrame]]
) -> dict[str, dict[str, str]]:
    """Per kind, item id → the hash of what the build's machine wrote now (contexts from disambiguate's attempts;
    translations from each translate stage's attempts and its segments' source text)."""
    hashes: dict[str, dict[str, str]] = {}
    if contexts is not None:
        biased = contexts[contexts["assignment"] == "biased"]
        hashes["contexts"] = {
            f"{t}:biased": content_hash(text) for t, text in machine_texts(biased, "template_id", "answer").items()
        }
    for lang, (segments, attempts) in translations.items():
        source = next(c for c in segments.columns if c.startswith("text_") and c != f"text_{lang}")
        originals = dict(zip(segments["segment_id"], segments[source], strict=True))
        hashes[f"translations:{lang}"] = {
            s: content_hash(originals[s], text)
            for s, text in machine_texts(attempts, "segment_id", f"text_{lang}").items()
            if s in originals
        }
    return hashes


def human_strengths(name_table: pd.DataFrame, decisions: pd.DataFrame) -> dict[str, float]:
    """Each judged group's human proxy strength (``lang:group``), which decides it in place of the classifier."""
    table = reviewed_name_table(name_table, decisions).dropna(subset=[HUMAN_STRENGTH])
    groups = table.drop_duplicates(["lang", "group"])
    return {f"{r.lang}:{r.group}": round(float(getattr(r, HUMAN_STRENGTH)), 4) for r in groups.itertuples()}


def review(
    decisions: pd.DataFrame,
    params: ReviewParams,
    contexts: pd.DataFrame | None = None,
    name_table: pd.DataFrame | None = None,
    **translated: pd.DataFrame,
) -> StageOutput:
    """Every decision's status against this build, the agreement per round and question, the disagreements.
    Adapted templates' decisions are measured, not applied (``measured``): the adaptation's sheet decides."""
    langs = sorted({name.split("__")[1] for name in translated})
    pairs = {lang: (translated[f"segments__{lang}"], translated[f"attempts__{lang}"]) for lang in langs}
    hashes = current_hashes(contexts, pairs)
    if name_table is not None:
        hashes["names"] = {
            f"name-{digest[:12]}": digest
            for digest in (
                content_hash(*row)
                for row in zip(*(name_table[c].tolist() for c in ("lang", "group", "name", "gender")), strict=True)
            )
        }
    parts = []
    for kind in sorted(set(decisions["kind"])):
        status = resolve(decisions, kind, hashes.get(kind, {})).statuses
        parts.append(status.assign(status="measured") if kind == "adapt" else status)
    statuses = pd.concat(parts or [pd.DataFrame(columns=STATUS_COLUMNS)], ignore_index=True)
    measured = agreement(decisions)
    decided = adjudicate(decisions)
    disagreements = decided[decided["how"] != "unanimous"].reset_index(drop=True)
    low = below(measured, params.min_alpha)
    report = {
        "stage": STAGE_NAME,
        "parameters": asdict(params) | {"decisions": Path(params.decisions).name},
        "counts": {
            "decisions": len(decisions),
            "items": len(decided),
            "reviewers": int(decisions["reviewer"].nunique()),
            "applied": int((statuses["status"] == "applied").sum()),
            "stale": int((statuses["status"] == "stale").sum()),
        },
        "by_kind": {
            kind: {
                "items": len(group),
                "reviewers_per_item": float(group["n_reviewers"].astype(int).mean()),
                "by_status": {str(k): int(v) for k, v in group["status"].value_counts().sort_index().items()},
                "applied": {
                    str(k): int(v)
                    for k, v in group.loc[group["status"] == "applied", "verdict"].value_counts().sort_index().items()
                },
            }
            for kind, group in statuses.groupby("kind", sort=True)
        },
        "stale": statuses.loc[statuses["status"] == "stale", ["kind", "item_id"]].to_dict(orient="records"),
        "agreement": measured.astype(object).where(measured.notna(), None).to_dict(orient="records"),
        "below_min_alpha": [f"{r.round_id} {r.kind} {r.question}" for r in low.itertuples()],
        "disagreements": len(disagreements),
        "names_decided_by_people": human_strengths(name_table, decisions) if name_table is not None else {},
        "warnings": [
            f"review round {r.round_id}: {r.kind} {r.question} alpha "
            + ("undefined" if pd.isna(r.alpha) else f"{r.alpha:.3f}")
            + f" is under min_alpha {params.min_alpha}"
            for r in low.itertuples()
        ],
    }
    return StageOutput(
        tables={"decisions": statuses, "agreement": measured, "disagreements": disagreements},
        schemas={"decisions": STATUS, "agreement": AGREEMENT, "disagreements": DISAGREEMENT},
        report=report,
    )


def review_stage(contexts: bool, translate_stages: dict[str, str], name_table: Input | None = None) -> Stage:
    """The review stage of a pipeline whose disambiguate stage exists (``contexts``), whose translate stages are
    ``translate_stages`` (language → folder) and whose names stage reads ``name_table``."""
    inputs: dict = {"decisions": DECISIONS}
    if name_table is not None:
        inputs["name_table"] = name_table
    if contexts:
        inputs["contexts"] = Table("04_disambiguate", "attempts")
    for lang, folder in translate_stages.items():
        inputs[f"segments__{lang}"] = Table(folder, "segments")
        inputs[f"attempts__{lang}"] = Table(folder, "attempts")
    return Stage(
        "08_review",
        STAGE_NAME,
        review,
        inputs=inputs,
        outputs={"decisions": STATUS, "agreement": AGREEMENT, "disagreements": DISAGREEMENT},
        params=ReviewParams,
        ranges={"min_alpha": (-1, 1)},
        words=("review decisions", "applied", "stale or unresolved"),
        imports=("krippendorff", "statsmodels.stats.inter_rater"),
    )
