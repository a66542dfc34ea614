"""The metrics (tasks/evaluation/metrics.py) against values worked by hand, their sign conventions and degenerate cases,
the bootstrap over templates, and the shared BBQ scores against lm-eval's own BBQ aggregates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from lm_eval.tasks.bbq import utils as bbq

from pbbq.tasks.evaluation import lm_eval_utils
from pbbq.tasks.evaluation.metrics import (
    AVERAGE,
    SAMPLES,
    BootstrapParams,
    category_table,
    error_retention,
    kl_to_survey,
    score_table,
)
from pbbq.tasks.evaluation.reports import bbq_table, reports_markdown, table3, table4
from tests.bbq_records import SURVEY, as_dataset, make_records
from tests.evaluation_support import accuracy, ambiguous_bias, bbq_bias_scores, delta_bias, uncertainty

S, N, U = "stereotyped", "non-stereotyped", "unknown"
LN3 = math.log(3)
_IDS = itertools.count()


def row(
    condition: str,
    polarity: str,
    assignment: str,
    roles: tuple[str, str, str],
    correct_role: str,
    chosen_role: str | None,
    probs: tuple[float, float, float] | None = (0.5, 0.3, 0.2),
    **extra: object,
) -> dict:
    """One per-sample row; ``probs`` are the options' probabilities (log-likelihoods = their logs)."""
    lls = [math.log(p) for p in probs] if probs else [math.nan] * 3
    return {
        "model": "m1",
        "config": "fa",
        "task": "pbbq_fa",
        "doc_id": 0,
        "example_id": f"e{next(_IDS)}",
        "template_id": "T1",
        "stereotype_id": "AGE-01",
        "category": "Age",
        "context_condition": condition,
        "question_polarity": polarity,
        "assignment": assignment,
        "variant": "original",
        "source_example_id": None,
        "label": roles.index(correct_role),
        "answer_roles": {f"ans{k}": role for k, role in enumerate(roles)},
        "ll0": lls[0],
        "ll1": lls[1],
        "ll2": lls[2],
        "choice": -1 if chosen_role is None else roles.index(chosen_role),
        "response": "",
        **extra,
    }


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=SAMPLES.names)


def hand_table() -> pd.DataFrame:
    """Four ambiguous and four disambiguated rows; the expected values are worked out in the tests."""
    return frame(
        [
            # ambiguous: the answer is 'unknown'; probs follow the roles' order
            row("ambig", "neg", "none", (S, N, U), U, S, (0.5, 0.3, 0.2)),  # biased (S for neg), wrong
            row("ambig", "nonneg", "none", (U, S, N), U, U, (0.6, 0.1, 0.3)),  # unknown, right
            row("ambig", "neg", "none", (N, U, S), U, N, (0.7, 0.2, 0.1)),  # counter, wrong
            row("ambig", "nonneg", "none", (S, N, U), U, N, (0.2, 0.5, 0.3)),  # biased (N for nonneg), wrong
            # disambiguated
            row("disambig", "neg", "biased", (S, N, U), S, S),  # right, biased
            row("disambig", "nonneg", "biased", (S, N, U), N, N),  # right, biased (N for nonneg)
            row("disambig", "neg", "counter_biased", (S, N, U), N, S),  # wrong, biased
            row("disambig", "nonneg", "counter_biased", (S, N, U), S, S),  # right, not biased
        ]
    )


def test_accuracy_eq1() -> None:
    assert accuracy(hand_table()) == {"ambig": 1 / 4, "disambig": 3 / 4}


def test_ambiguous_bias_eq2_as_written_and_bounded() -> None:
    # log p(biased) − log p(counter): neg → S − N, nonneg → N − S
    expected = np.mean([math.log(0.5 / 0.3), math.log(0.3 / 0.1), math.log(0.1 / 0.7), math.log(0.5 / 0.2)])
    bounded = np.mean([0.5 - 0.3, 0.3 - 0.1, 0.1 - 0.7, 0.5 - 0.2])
    assert ambiguous_bias(hand_table()) == pytest.approx(expected)
    assert ambiguous_bias(hand_table(), bounded=True) == pytest.approx(bounded)


def test_bias_signs_follow_the_biased_answer() -> None:
    """A model that puts more weight on the biased answer scores positive; the mirror model negative."""
    biased = frame([row("ambig", pol, "none", (S, N, U), U, U, (0.6, 0.1, 0.3)) for pol in ("neg",)])
    counter = frame([row("ambig", pol, "none", (S, N, U), U, U, (0.1, 0.6, 0.3)) for pol in ("neg",)])
    nonneg = frame([row("ambig", "nonneg", "none", (S, N, U), U, U, (0.6, 0.1, 0.3))])
    assert ambiguous_bias(biased) == pytest.approx(math.log(6)) and ambiguous_bias(counter) == pytest.approx(
        -math.log(6)
    )
    assert ambiguous_bias(nonneg, bounded=True) == pytest.approx(-0.5)  # for a non-negative question N is biased
    good = frame(
        [row("disambig", "neg", "biased", (S, N, U), S, S), row("disambig", "neg", "counter_biased", (S, N, U), N, S)]
    )
    assert delta_bias(good) == 1.0  # right only when the answer is the stereotyped one


def test_delta_bias_eq3() -> None:
    assert delta_bias(hand_table()) == pytest.approx(1.0 - 0.5)


def test_uncertainty_eq4_is_normalised_entropy() -> None:
    def entropy(*p: float) -> float:
        return -sum(x * math.log(x) for x in p) / LN3

    expected_amb = np.mean(
        [entropy(0.5, 0.3, 0.2), entropy(0.6, 0.1, 0.3), entropy(0.7, 0.2, 0.1), entropy(0.2, 0.5, 0.3)]
    )
    result = uncertainty(hand_table())
    assert result["ambig"] == pytest.approx(expected_amb)
    assert result["disambig"] == pytest.approx(entropy(0.5, 0.3, 0.2))
    uniform = frame([row("ambig", "neg", "none", (S, N, U), U, U, (1 / 3, 1 / 3, 1 / 3))])
    assert uncertainty(uniform)["ambig"] == pytest.approx(1.0)


def test_bbq_bias_scores_by_hand() -> None:
    # disambiguated: 3 biased of 4 non-unknown; ambiguous: 2 biased of 3 non-unknown, accuracy 1/4
    scores = bbq_bias_scores(hand_table())
    assert scores["s_dis"] == pytest.approx(2 * 3 / 4 - 1)
    assert scores["s_amb_unscaled"] == pytest.approx(2 * 2 / 3 - 1)
    assert scores["s_amb"] == pytest.approx((1 - 1 / 4) * (2 * 2 / 3 - 1))


def test_degenerate_cases() -> None:
    all_unknown = frame([row("ambig", "neg", "none", (S, N, U), U, U)] * 3)
    scores = bbq_bias_scores(all_unknown)
    assert math.isnan(scores["s_amb"]) and math.isnan(scores["s_amb_unscaled"]) and math.isnan(scores["s_dis"])
    assert accuracy(all_unknown) == {"ambig": 1.0, "disambig": pytest.approx(math.nan, nan_ok=True)}
    assert math.isnan(delta_bias(all_unknown))
    only_counter = frame([row("disambig", "neg", "counter_biased", (S, N, U), N, N)] * 2)
    assert bbq_bias_scores(only_counter)["s_dis"] == -1.0  # BBQ's formula; lm-eval's aggregate says 0 (below)
    only_biased = frame([row("disambig", "neg", "biased", (S, N, U), S, S)])
    assert math.isnan(delta_bias(only_biased))  # no counter-biased row: Acc(Q_counter) is undefined
    generated = frame(
        [row("ambig", "neg", "none", (S, N, U), U, None, None), row("ambig", "neg", "none", (S, N, U), U, U, None)]
    )
    assert accuracy(generated)["ambig"] == 0.5  # the unparseable answer is wrong, and not dropped
    assert math.isnan(ambiguous_bias(generated)) and math.isnan(uncertainty(generated)["ambig"])


def test_the_documented_difference_from_lm_evals_disambiguated_bias() -> None:
    """No biased answer among non-unknown ones: BBQ's 2·0/n − 1 = −1 here, lm-eval's aggregate returns 0."""
    tuples = [(1.0, 0.0, 1.0, True), (1.0, 0.0, 1.0, True)]  # (acc, n_biased, n_non_unknown, disambiguated)
    assert bbq.agg_disamb_bias_scores(tuples) == 0.0
    assert lm_eval_utils.agg_disamb_bias_score([(c, b, n, d) for c, b, n, d in tuples]) == -1.0


def test_a_category_without_disambiguated_rows_and_the_averages() -> None:
    rows = hand_table().to_dict("records")
    ambiguous_only = [dict(r, category="Religion", template_id="T9") for r in rows if r["context_condition"] == "ambig"]
    samples = frame(rows + ambiguous_only)
    table = score_table(samples, BootstrapParams(n=50)).set_index("category")
    assert math.isnan(table.loc["Religion", "acc_dis"]) and math.isnan(table.loc["Religion", "delta_bias"])
    assert table.loc["Religion", "acc_amb"] == 1 / 4
    # the average over categories ignores the category that has no disambiguated rows
    assert table.loc[AVERAGE, "acc_dis"] == pytest.approx(3 / 4)
    assert table.loc[AVERAGE, "acc_amb"] == pytest.approx(1 / 4)
    assert table.loc[AVERAGE, "n_examples"] == 12


def test_table4_averages_the_models() -> None:
    first = hand_table()
    second = hand_table().assign(model="m2", choice=first["label"])  # m2 is always right
    table = category_table(pd.concat([first, second], ignore_index=True), BootstrapParams(n=20))
    age = table.set_index("category").loc["Age"]
    assert age["acc_amb"] == pytest.approx((1 / 4 + 1) / 2) and age["acc_dis"] == pytest.approx((3 / 4 + 1) / 2)
    assert age["model"] == "mean of 2"


def test_bootstrap_is_over_templates_and_seeded() -> None:
    one_template = frame([dict(r, example_id=f"x{i}") for i, r in enumerate(hand_table().to_dict("records") * 5)])
    table = score_table(one_template, BootstrapParams(n=200, seed=3))
    age = table.set_index("category").loc["Age"]
    # one template: every resample draws it, so the interval is the point, however many examples it has
    assert age["acc_amb_low"] == age["acc_amb"] == age["acc_amb_high"]
    rows = []
    for t in range(8):  # eight templates of different accuracy: the interval opens
        for r in hand_table().to_dict("records"):
            rows.append(dict(r, template_id=f"T{t}", choice=r["label"] if t % 2 else r["choice"]))
    samples = frame(rows)
    first = score_table(samples, BootstrapParams(n=300, seed=3))
    again = score_table(samples, BootstrapParams(n=300, seed=3))
    other = score_table(samples, BootstrapParams(n=300, seed=4))
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)
    age = first.set_index("category").loc["Age"]
    assert age["acc_amb_low"] < age["acc_amb"] < age["acc_amb_high"]
    assert age["acc_amb"] == pytest.approx((1 / 4 + 1) / 2)


def test_error_retention_by_hand_and_division_by_zero() -> None:
    explicit = [dict(r, example_id=f"fa{i}") for i, r in enumerate(hand_table().to_dict("records"))]
    rows = list(explicit)
    # ambiguous fa accuracy 1/4 (error 3/4). Sub-seed A: the names rows all right (error 0) → ε = 0;
    # sub-seed B: as the fa rows (error 3/4) → ε = 1; sub-seed C: right on one more → error 2/4 → ε = 2/3
    for seed, fixes in (("names-a", 4), ("names-b", 0), ("names-c", 1)):
        wrong = [r for r in explicit if r["context_condition"] == "ambig" and r["choice"] != r["label"]]
        fixed = {r["example_id"] for r in wrong[:fixes]}
        for r in explicit:
            choice = r["label"] if r["example_id"] in fixed else r["choice"]
            rows.append(
                dict(
                    r,
                    config="fa-names",
                    variant=seed,
                    example_id=f"{r['example_id']}-{seed}",
                    source_example_id=r["example_id"],
                    choice=choice,
                )
            )
    table = error_retention(frame(rows), BootstrapParams(n=50)).set_index("context_condition")
    assert table.loc["ambig", "epsilon"] == pytest.approx((0 + 1 + 2 / 3) / 3)
    assert table.loc["ambig", "epsilon_std"] == pytest.approx(np.std([0, 1, 2 / 3], ddof=1))
    assert table.loc["ambig", "n_seeds"] == 3 and table.loc["ambig", "n_pairs"] == 12
    # disambiguated fa error 1/4, names the same → ε = 1 for every seed
    assert table.loc["disambig", "epsilon"] == pytest.approx(1.0)

    perfect = [dict(r, choice=r["label"]) for r in explicit]
    names_wrong = [
        dict(
            r,
            config="fa-names",
            variant="names-a",
            example_id=f"{r['example_id']}-n",
            source_example_id=r["example_id"],
        )
        for r in explicit
    ]
    names_right = [dict(r, choice=r["label"]) for r in names_wrong]
    undefined = error_retention(frame(perfect + names_right)).set_index("context_condition")
    infinite = error_retention(frame(perfect + names_wrong)).set_index("context_condition")
    assert math.isnan(undefined.loc["ambig", "epsilon"])  # 0/0: no error in either
    assert infinite.loc["ambig", "epsilon"] == math.inf  # errors with names, none with the group named


def test_kl_to_survey_by_hand() -> None:
    # ambiguous rows of AGE-01: p(biased) normalised against p(counter): 0.5/0.8, 0.3/0.4, 0.1/0.8, 0.5/0.7
    q = np.mean([0.5 / 0.8, 0.3 / 0.4, 0.1 / 0.8, 0.5 / 0.7])
    survey = pd.DataFrame({"stereotype_id": ["AGE-01", "AGE-02"], "acceptance": [0.8, 0.7]})
    summary, detail = kl_to_survey(hand_table(), survey, BootstrapParams(n=30))
    expected = 0.8 * math.log(0.8 / q) + 0.2 * math.log(0.2 / (1 - q))
    assert detail["model_p_biased"].tolist() == [pytest.approx(q)]
    assert summary.loc[0, "kl"] == pytest.approx(expected)
    assert summary.loc[0, "n_stereotypes"] == 1 and "human || model" in summary.loc[0, "direction"]
    same = hand_table().assign(stereotype_id="AGE-02")
    assert kl_to_survey(same, pd.DataFrame({"stereotype_id": ["AGE-02"], "acceptance": [q]}))[0].loc[0, "kl"] == (
        pytest.approx(0.0, abs=1e-12)
    )


# ---------------------------------------------------------------------------- against lm-eval's aggregates


def random_samples(seed: int) -> tuple[pd.DataFrame, list[dict]]:
    """The en records with random choices: our per-sample table and lm-eval's per-sample tuples for the same
    choices, made by lm-eval's own scorer (the choice mapped to lm-eval's 12-option list)."""
    rng = np.random.default_rng(seed)
    en = make_records()["en"]
    docs = list(bbq.process_docs(as_dataset(en)))
    ours, theirs = [], []
    for doc in docs:
        choice = int(rng.integers(3))
        choices = bbq.doc_to_choice(doc)
        picked = doc[f"ans{choice}"]
        index = choices.index(picked)
        results = [(0.0 if i == index else -10.0, False) for i in range(len(choices))]
        theirs.append(bbq.process_results_multiple_choice({**doc, "category": "Age"}, results))
        roles = tuple(doc["answer_roles"][f"ans{k}"] for k in range(3))
        lls = rng.normal(size=3)
        ours.append(
            row(
                doc["context_condition"],
                doc["question_polarity"],
                doc["assignment"],
                roles,
                roles[doc["label"]],
                roles[choice],
                None,
                template_id=doc["template_id"],
                example_id=doc["example_id"],
                ll0=lls[0],
                ll1=lls[1],
                ll2=lls[2],
            )
        )
    return frame(ours), theirs


@pytest.mark.parametrize("seed", range(5))
def test_shared_bbq_metrics_equal_lm_evals_aggregates(seed: int) -> None:
    samples, theirs = random_samples(seed)
    ours = bbq_bias_scores(samples)
    acc = accuracy(samples)
    assert bbq.agg_accuracy_amb([t["accuracy_amb"] for t in theirs]) == pytest.approx(acc["ambig"])
    assert bbq.agg_accuracy_disamb([t["accuracy_disamb"] for t in theirs]) == pytest.approx(acc["disambig"])
    assert bbq.agg_disamb_bias_scores([t["disamb_bias_score"] for t in theirs]) == pytest.approx(ours["s_dis"])
    assert bbq.agg_amb_bias_scores([t["amb_bias_score"] for t in theirs]) == pytest.approx(ours["s_amb"])


def test_the_release_tasks_aggregates_equal_the_metrics() -> None:
    """tasks/lm_eval_utils (what lm-eval runs from a release) and tasks/metrics give the same numbers."""
    samples, _ = random_samples(11)
    per_sample = []
    for record in samples.to_dict("records"):
        doc = {
            "answer_roles": record["answer_roles"],
            "context_condition": record["context_condition"],
            "question_polarity": record["question_polarity"],
            "assignment": record["assignment"],
            "label": record["label"],
        }
        per_sample.append(
            lm_eval_utils.sample_scores(doc, record["choice"], [record["ll0"], record["ll1"], record["ll2"]])
        )

    def agg(name: str, function: object) -> float:
        return function([item[name] for item in per_sample])  # type: ignore[operator]

    table = score_table(samples, BootstrapParams(n=0)).set_index("category").loc[AVERAGE]
    pooled = {**accuracy(samples), **bbq_bias_scores(samples)}
    assert agg("accuracy_amb", lm_eval_utils.agg_accuracy_amb) == pytest.approx(pooled["ambig"])
    assert agg("accuracy_disamb", lm_eval_utils.agg_accuracy_disamb) == pytest.approx(pooled["disambig"])
    assert agg("disamb_bias_score", lm_eval_utils.agg_disamb_bias_score) == pytest.approx(pooled["s_dis"])
    assert agg("amb_bias_score", lm_eval_utils.agg_amb_bias_score) == pytest.approx(pooled["s_amb"])
    assert agg("amb_bias_score_unscaled", lm_eval_utils.agg_amb_bias_score_unscaled) == pytest.approx(
        pooled["s_amb_unscaled"]
    )
    assert agg("beta_amb", lm_eval_utils.agg_ambiguous_mean) == pytest.approx(ambiguous_bias(samples))
    assert agg("beta_amb_bounded", lm_eval_utils.agg_ambiguous_mean) == pytest.approx(
        ambiguous_bias(samples, bounded=True)
    )
    assert agg("delta_bias", lm_eval_utils.agg_delta_bias) == pytest.approx(delta_bias(samples))
    assert agg("uncertainty_amb", lm_eval_utils.agg_ambiguous_mean) == pytest.approx(uncertainty(samples)["ambig"])
    assert agg("uncertainty_disamb", lm_eval_utils.agg_disambiguated_mean) == pytest.approx(
        uncertainty(samples)["disambig"]
    )
    assert not math.isnan(table["acc_amb"])


# ---------------------------------------------------------------------------------------------- reports


def test_tables_3_and_4_and_their_markdown() -> None:
    rows = hand_table().to_dict("records")
    religion = [dict(r, category="Religion", template_id="T9") for r in rows if r["context_condition"] == "ambig"]
    samples = frame(rows + religion + [dict(r, model="m2") for r in rows])
    params = BootstrapParams(n=20)
    scores = score_table(samples, params)
    t3, t4 = table3(scores), table4(category_table(samples, params))
    assert t3["model"].tolist() == ["m1", "m2"] and (t3["config"] == "fa").all()
    assert t3.set_index("model").loc["m2", "acc_dis"] == pytest.approx(3 / 4)
    assert t4["category"].tolist() == ["Age", "Religion", AVERAGE]  # the paper's category order, the average last
    text = reports_markdown(t3, t4, bbq_table(scores), error_retention(samples), kl_to_survey(samples, SURVEY)[0])
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| Model | Config | Amb. Acc"))
    assert "Amb. Bias-Score (Eq. 2, bounded)" in header and "Dis. Bias-Score (Δbias, Eq. 3)" in header
    m1 = next(line for line in lines if line.startswith("| m1 | fa | 0.2500"))
    assert m1.count("[") == 7  # every figure with its interval
    religion_row = next(line for line in lines if line.startswith("| fa | Religion |"))
    assert "n/a" in religion_row  # no disambiguated rows: nothing to compute Dis. Acc on
    assert "| **fa** | **Average** |" in text and "Not computed: it needs a config and its name-proxy variant" in text
    assert "D_KL(human || model)" in text
