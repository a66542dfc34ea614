"""The annotation gate (PakBBQ §3.2: Fleiss' kappa < 0.2 or mean relevance < 1.5 drops a template; PBBQ §3.2
keeps only templates of accepted stereotypes) on small hand-made ratings, every kappa worked by hand.

Fleiss (1971): P_i = (Σ_j n_ij² − n) / (n(n − 1)) per item of n ratings, P̄ their mean, p_j the share of all
ratings in category j, P_e = Σ_j p_j², κ = (P̄ − P_e) / (1 − P_e).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from pbbq.tasks.core.schemas import TEMPLATE
from pbbq.tasks.kappa_gate import (
    SINGLE_LABEL,
    GateParams,
    RatingsError,
    fleiss_kappa_per_template,
    kappa_gate,
    template_kappa,
)

S, N, X = "stereo", "nonstereo", "neither"

UNEVEN = [[S, S, S], [S, S, N], [S, S, S], [S, N, X], [X, X, X]]
"""P_i = 1, 1/3, 1, 0, 1 → P̄ = 2/3; shares 9/15, 2/15, 4/15 → P_e = 101/225; κ = (2/3 − 101/225)/(124/225)
= 49/124 = 0.395161. Randolph's free-marginal kappa (P_e = 1/3) would give 0.5."""
KAPPA_UNEVEN = 49 / 124
DISAGREE = [[S, N, X], [N, S, X], [X, S, N]]
"""P_i = 0 for all items, shares 1/3 each → P_e = 1/3; κ = (0 − 1/3)/(2/3) = −0.5."""


def _ratings(template_id: str, labels: list[list[str]], relevance: int | list[int] = 3) -> pd.DataFrame:
    """One row per item and annotator; ``relevance`` one value for all rows or one per row in item order."""
    rows = [
        {"template_id": template_id, "item_id": f"I{i}", "annotator_id": f"A{a}", "target_label": label}
        for i, item in enumerate(labels)
        for a, label in enumerate(item)
    ]
    frame = pd.DataFrame(rows, columns=["template_id", "item_id", "annotator_id", "target_label"])
    frame["relevance"] = relevance
    return frame


def _counted(template_id: str, stereo_per_item: list[int], raters: int = 4) -> pd.DataFrame:
    """Items whose ``raters`` annotators say 'stereo' this many times and 'neither' otherwise."""
    return _ratings(template_id, [[S] * k + [X] * (raters - k) for k in stereo_per_item])


def _templates(*pairs: tuple[str, str]) -> pd.DataFrame:
    ids = {"template_id": [t for t, _ in pairs], "stereotype_id": [s for _, s in pairs]}
    return pd.DataFrame(ids, dtype=object).assign(ambiguous_fa="متن")


def _stereotypes(kept: dict[str, bool]) -> pd.DataFrame:
    return pd.DataFrame(
        {"stereotype_id": list(kept), "category": [f"C-{s}" for s in kept], "kept": list(kept.values())}
    )


def _reasons(output: Any) -> dict[str, str]:
    return output["templates"].set_index("template_id")["reason"].to_dict()


def test_parameters_are_pakbbqs() -> None:
    assert GateParams() == GateParams(min_kappa=0.2, min_relevance=1.5)


def test_fleiss_kappa_with_uneven_category_shares() -> None:
    kappa, note = template_kappa(_ratings("T", UNEVEN))
    assert kappa == pytest.approx(KAPPA_UNEVEN, rel=1e-12) and note == ""


def test_fleiss_kappa_with_even_shares_and_total_disagreement() -> None:
    # P_i = 1, 1/3, 1, 1/3 → P̄ = 2/3; p(a) = p(b) = 1/2 → P_e = 1/2; κ = (2/3 − 1/2) / (1 − 1/2) = 1/3
    kappa, _ = template_kappa(_ratings("T", [["a", "a", "a"], ["a", "a", "b"], ["b", "b", "b"], ["a", "b", "b"]]))
    assert kappa == pytest.approx(1 / 3, rel=1e-12)
    assert template_kappa(_ratings("T", DISAGREE))[0] == pytest.approx(-0.5, rel=1e-12)
    # two annotators: (a,a), (b,b), (a,b), (b,a) → P̄ = 1/2 = P_e → κ = 0
    assert template_kappa(_ratings("T", [["a", "a"], ["b", "b"], ["a", "b"], ["b", "a"]]))[0] == 0.0


def test_items_may_be_rated_by_different_annotators() -> None:
    """Fleiss' kappa needs the same number of ratings per item, not the same raters (Fleiss 1971)."""
    ratings = _ratings("T", UNEVEN)
    ratings["annotator_id"] = ratings["item_id"] + "-" + ratings["annotator_id"]  # 15 annotators, 3 per item
    kappa, note = template_kappa(ratings)
    assert kappa == pytest.approx(KAPPA_UNEVEN, rel=1e-12) and note == ""
    figures = fleiss_kappa_per_template(ratings).iloc[0]
    assert (figures["n_items"], figures["n_annotators"]) == (5, 15)


def test_single_label_agreement_is_defined_as_one() -> None:
    assert template_kappa(_ratings("T", [[S] * 3] * 4)) == (1.0, SINGLE_LABEL)
    # two labels, each item unanimous: Fleiss gives 1 itself, no note
    assert template_kappa(_ratings("T", [[S] * 3, [X] * 3])) == (1.0, "")


def test_ratings_no_kappa_can_be_computed_from() -> None:
    uneven_raters = _ratings("T", [[S, S, S], [S, X, X]]).iloc[:-1]
    with pytest.raises(RatingsError, match=r"^items rated by different numbers of annotators: \{'I0': 3, 'I1': 2\}$"):
        template_kappa(uneven_raters)
    with pytest.raises(RatingsError, match=r"^each item needs at least 2 annotators$"):
        template_kappa(_ratings("T", [[S], [X]]))
    twice = _ratings("T", [[S, X], [S, S]])
    twice.loc[1, "annotator_id"] = "A0"
    with pytest.raises(RatingsError, match=r"^an annotator rated the same item twice$"):
        template_kappa(twice)
    # the stage names the template
    ratings = pd.concat([_ratings("T1", UNEVEN), _ratings("T2", [[S], [X]])])
    with pytest.raises(RatingsError, match=r"^template T2: each item needs at least 2 annotators$"):
        fleiss_kappa_per_template(ratings)
    assert template_kappa(_ratings("T", [[S, S], [X, S], [X, X]]))[1] == ""  # two annotators are enough


def test_the_stage_figures_are_each_templates_own_from_one_grouping() -> None:
    """All templates' ratings grouped at once give each template the figures it has alone: a template's kappa
    counts only the labels it uses (T2 never says 'neither'), templates in any row order, items shared by id."""
    ratings = pd.concat(
        [
            _ratings("T3", DISAGREE, relevance=[1, 2, 3, 3, 3, 3, 1, 2, 2]),
            _ratings("T1", UNEVEN),
            _ratings("T2", [[S, N], [N, N], [S, S]], relevance=2),
            _ratings("T4", [[S] * 3] * 4),
        ]
    ).sample(frac=1, random_state=3)
    figures = fleiss_kappa_per_template(ratings).set_index("template_id")
    assert list(figures.index) == ["T1", "T2", "T3", "T4"]
    for template_id, group in ratings.groupby("template_id"):
        kappa, note = template_kappa(group)
        row = figures.loc[template_id]
        assert (row.kappa, row.kappa_note) == (kappa, note)
        assert (row.n_items, row.n_annotators) == (group["item_id"].nunique(), group["annotator_id"].nunique())
        assert row.mean_relevance == group["relevance"].mean()
    assert figures.loc["T1", "kappa"] == pytest.approx(KAPPA_UNEVEN)
    assert figures.loc["T4", "kappa_note"] == SINGLE_LABEL
    # the first failing template in id order is named, whatever its rows' order
    broken = pd.concat([_ratings("T9", [[S], [X]]), ratings, _ratings("T5", UNEVEN).iloc[:-1]])
    with pytest.raises(RatingsError, match=r"^template T5: items rated by different numbers of annotators"):
        fleiss_kappa_per_template(broken)


def test_kappa_at_and_just_past_the_threshold() -> None:
    """Dropped only below 0.2 (PakBBQ §3.2). With four annotators: stereo 0,0,2,2,3,3 times → P_i = 1,1,1/3,1/3,
    1/2,1/2, P̄ = 11/18; shares 10/24, 14/24 → P_e = 37/72; κ = 7/35 = 0.2 exactly. Stereo 0,0,1,1,3 times →
    P̄ = 0.7, P_e = 0.625, κ = 0.075/0.375 = 0.2, which statsmodels computes as 0.19999999999999987. Stereo
    0,0,2,2,3 times → P̄ = 19/30, P_e = 109/200, κ = 53/273 = 0.19414."""
    ratings = pd.concat(
        [_counted("AT", [0, 0, 2, 2, 3, 3]), _counted("ROUNDED", [0, 0, 1, 1, 3]), _counted("BELOW", [0, 0, 2, 2, 3])]
    )
    templates = _templates(("AT", "S1"), ("ROUNDED", "S1"), ("BELOW", "S1"))
    stereotypes = _stereotypes({"S1": True})
    output = kappa_gate(templates, ratings, stereotypes, GateParams())
    kappas = output["templates"].set_index("template_id")["kappa"]
    assert kappas["AT"] == 0.2
    assert kappas["ROUNDED"] == pytest.approx(0.2, abs=1e-15) and kappas["ROUNDED"] < 0.2
    assert kappas["BELOW"] == pytest.approx(53 / 273, rel=1e-12)
    assert _reasons(output) == {"AT": "", "ROUNDED": "", "BELOW": "kappa_below_threshold"}
    stricter = kappa_gate(templates, ratings, stereotypes, GateParams(min_kappa=0.2 + 1e-6))
    assert _reasons(stricter) == {k: "kappa_below_threshold" for k in ("AT", "ROUNDED", "BELOW")}
    looser = kappa_gate(templates, ratings, stereotypes, GateParams(min_kappa=53 / 273 - 1e-6))
    assert _reasons(looser) == {"AT": "", "ROUNDED": "", "BELOW": ""}


def test_a_kappa_within_floating_point_error_of_the_threshold_passes() -> None:
    """Kappa 0 exactly against thresholds a hair above it: 1e-9 counts as on it, 2e-9 does not."""
    ratings = _ratings("T", [[S, S], [X, X], [S, X], [X, S]])
    for min_kappa, reason in ((1e-9, ""), (2e-9, "kappa_below_threshold")):
        output = kappa_gate(_templates(("T", "S1")), ratings, _stereotypes({"S1": True}), GateParams(min_kappa))
        assert _reasons(output) == {"T": reason}


def test_relevance_at_and_just_past_the_threshold_and_its_mean_over_mixed_ratings() -> None:
    """The mean over every item and annotator, not the least or the greatest rating (PakBBQ §3.2)."""
    agree = [[S, S], [X, X]]
    ratings = pd.concat(
        [
            _ratings("AT", agree, relevance=[1, 2, 2, 1]),  # 1.5
            _ratings("BELOW", [*agree, [S, S]], relevance=[1, 2, 1, 2, 1, 1]),  # 8/6 = 1.33; max 2 would keep
            _ratings("MIXED", agree, relevance=[1, 3, 2, 2]),  # 2.0; min 1 would drop
        ]
    )
    templates = _templates(("AT", "S1"), ("BELOW", "S1"), ("MIXED", "S1"))
    output = kappa_gate(templates, ratings, _stereotypes({"S1": True}), GateParams())
    relevance = output["templates"].set_index("template_id")["mean_relevance"].to_dict()
    assert relevance == {"AT": 1.5, "BELOW": pytest.approx(8 / 6, rel=1e-12), "MIXED": 2.0}
    assert _reasons(output) == {"AT": "", "BELOW": "relevance_below_threshold", "MIXED": ""}
    stricter = kappa_gate(templates, ratings, _stereotypes({"S1": True}), GateParams(min_relevance=1.5 + 1e-6))
    assert _reasons(stricter) == {"AT": "relevance_below_threshold", "BELOW": "relevance_below_threshold", "MIXED": ""}


def _gate_inputs() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    templates = _templates(
        ("T1", "S1"),  # kept
        ("T2", "S1"),  # kappa −0.5
        ("T3", "S1"),  # relevance 1
        ("T4", "S2"),  # stereotype not accepted (its ratings are fine)
        ("T5", "S1"),  # no ratings
        ("T9", "S1"),  # single label, listed before T6 to show the report sorts them
        ("T6", "S1"),  # single label
        ("T7", "S1"),  # kappa and relevance both below: kappa is reported
        ("T8", "S2"),  # not accepted and kappa below: not accepted is reported
        ("T10", "S2"),  # not accepted and no ratings
        ("T11", "S1"),  # a single item: kappa −0.5, not 'no ratings'
        ("T12", "S9"),  # a stereotype the survey never asked about
    )
    ratings = pd.concat(
        [
            _ratings("T1", UNEVEN, relevance=[3, 3, 2] * 5),
            _ratings("T2", DISAGREE),
            _ratings("T3", UNEVEN, relevance=1),
            _ratings("T4", UNEVEN),
            _ratings("T9", [[N] * 2] * 2, relevance=2),
            _ratings("T6", [[S] * 3] * 2),
            _ratings("T7", DISAGREE, relevance=1),
            _ratings("T8", DISAGREE),
            _ratings("T11", [[S, S, X]]),
            _ratings("T12", UNEVEN),
        ]
    )
    return templates, ratings, _stereotypes({"S1": True, "S2": False})


def test_every_template_gets_its_first_broken_rule_and_its_figures() -> None:
    templates, ratings, stereotypes = _gate_inputs()
    output = kappa_gate(templates, ratings, stereotypes, GateParams())
    table = output["templates"]
    assert list(table.columns) == [
        "template_id",
        "stereotype_id",
        "ambiguous_fa",
        "n_items",
        "n_annotators",
        "kappa",
        "kappa_note",
        "mean_relevance",
        "category",
        "reason",
        "kept",
    ]
    assert list(table["template_id"]) == list(templates["template_id"])
    assert table["n_items"].dtype == "int64" and table["n_annotators"].dtype == "int64"
    rows = table.set_index("template_id")
    assert rows["reason"].to_dict() == {
        "T1": "",
        "T2": "kappa_below_threshold",
        "T3": "relevance_below_threshold",
        "T4": "stereotype_not_accepted",
        "T5": "no_ratings",
        "T9": "",
        "T6": "",
        "T7": "kappa_below_threshold",
        "T8": "stereotype_not_accepted",
        "T10": "stereotype_not_accepted",
        "T11": "kappa_below_threshold",
        "T12": "stereotype_not_accepted",
    }
    assert rows["kept"].to_dict() == {t: r == "" for t, r in rows["reason"].items()}
    assert rows["n_items"].to_dict() == {
        **{"T1": 5, "T2": 3, "T3": 5, "T4": 5, "T5": 0, "T9": 2, "T6": 2, "T7": 3, "T8": 3},
        **{"T10": 0, "T11": 1, "T12": 5},
    }
    assert rows["n_annotators"].to_dict() == {
        **{"T1": 3, "T2": 3, "T3": 3, "T4": 3, "T5": 0, "T9": 2, "T6": 3, "T7": 3, "T8": 3},
        **{"T10": 0, "T11": 3, "T12": 3},
    }
    assert rows["kappa_note"].to_dict() == {t: SINGLE_LABEL if t in ("T6", "T9") else "" for t in rows.index}
    kappas = rows["kappa"]
    assert math.isnan(kappas["T5"]) and math.isnan(kappas["T10"])
    expected_kappa = {"T1": KAPPA_UNEVEN, "T2": -0.5, "T3": KAPPA_UNEVEN, "T4": KAPPA_UNEVEN, "T9": 1.0}
    expected_kappa |= {"T6": 1.0, "T7": -0.5, "T8": -0.5, "T11": -0.5, "T12": KAPPA_UNEVEN}
    assert kappas.drop(["T5", "T10"]).to_dict() == pytest.approx(expected_kappa, rel=1e-12)
    relevance = rows["mean_relevance"]
    assert math.isnan(relevance["T5"]) and math.isnan(relevance["T10"])
    assert relevance.drop(["T5", "T10"]).to_dict() == {
        **{"T1": pytest.approx(8 / 3, rel=1e-12), "T2": 3.0, "T3": 1.0, "T4": 3.0, "T9": 2.0, "T6": 3.0},
        **{"T7": 1.0, "T8": 3.0, "T11": 3.0, "T12": 3.0},
    }
    assert rows["category"].drop("T12").to_dict() == {
        t: "C-S2" if t in ("T4", "T8", "T10") else "C-S1" for t in rows.index if t != "T12"
    }
    assert pd.isna(rows.loc["T12", "category"])
    pd.testing.assert_frame_equal(output["gated"], table[table["kept"]])
    pd.testing.assert_frame_equal(output["dropped"], table[~table["kept"]])
    assert output.schemas == {"templates": TEMPLATE, "gated": TEMPLATE, "dropped": TEMPLATE}
    # the same inputs with both thresholds out of the way: only the survey and missing ratings drop
    loose = kappa_gate(templates, ratings, stereotypes, GateParams(min_kappa=-1.0, min_relevance=1.0))
    assert list(loose["gated"]["template_id"]) == ["T1", "T2", "T3", "T9", "T6", "T7", "T11"]


def test_every_report_field() -> None:
    templates, ratings, stereotypes = _gate_inputs()
    report = kappa_gate(templates, ratings, stereotypes, GateParams()).report
    drops = report.pop("drops")
    assert report == {
        "stage": "kappa_gate",
        "parameters": {"min_kappa": 0.2, "min_relevance": 1.5},
        "counts": {"in": 12, "out": 3},
        "dropped": {
            "total": 9,
            "by_reason": {
                "kappa_below_threshold": 3,
                "no_ratings": 1,
                "relevance_below_threshold": 1,
                "stereotype_not_accepted": 4,
            },
        },
        "single_label_templates": ["T6", "T9"],
    }
    assert [(d["template_id"], d["reason"]) for d in drops] == [
        ("T2", "kappa_below_threshold"),
        ("T3", "relevance_below_threshold"),
        ("T4", "stereotype_not_accepted"),
        ("T5", "no_ratings"),
        ("T7", "kappa_below_threshold"),
        ("T8", "stereotype_not_accepted"),
        ("T10", "stereotype_not_accepted"),
        ("T11", "kappa_below_threshold"),
        ("T12", "stereotype_not_accepted"),
    ]
    assert all(set(d) == {"template_id", "reason", "kappa", "mean_relevance"} for d in drops)
    figures = {d["template_id"]: (d["kappa"], d["mean_relevance"]) for d in drops}
    assert figures["T2"] == (pytest.approx(-0.5, rel=1e-12), 3.0)
    assert figures["T3"] == (pytest.approx(KAPPA_UNEVEN, rel=1e-12), 1.0)
    assert all(math.isnan(x) for x in figures["T5"])


def test_no_templates_and_no_ratings() -> None:
    stereotypes = _stereotypes({"S1": True})
    empty = kappa_gate(_templates(), _ratings("T", []), stereotypes, GateParams())
    assert len(empty["templates"]) == 0 and len(empty["gated"]) == 0
    assert empty.report["counts"] == {"in": 0, "out": 0} and empty.report["dropped"]["total"] == 0
    assert pd.api.types.is_string_dtype(empty["templates"]["reason"])  # text, as in a table with rows
    unrated = kappa_gate(_templates(("T1", "S1"), ("T2", "S1")), _ratings("T", []), stereotypes, GateParams())
    assert _reasons(unrated) == {"T1": "no_ratings", "T2": "no_ratings"}
    assert unrated["templates"]["n_items"].tolist() == [0, 0]


def test_a_repeated_template_or_stereotype_is_an_error_not_a_doubled_row() -> None:
    ratings = _ratings("T1", UNEVEN)
    with pytest.raises(pd.errors.MergeError):
        kappa_gate(_templates(("T1", "S1"), ("T1", "S1")), ratings, _stereotypes({"S1": True}), GateParams())
    stereotypes = pd.concat([_stereotypes({"S1": True}), _stereotypes({"S1": True})])
    with pytest.raises(pd.errors.MergeError):
        kappa_gate(_templates(("T1", "S1")), ratings, stereotypes, GateParams())
