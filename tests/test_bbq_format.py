"""lm-evaluation-harness's own BBQ code reads our records: ``lm_eval/tasks/bbq/utils.py`` of
lm-eval 0.4.13, unmodified, over the ``en`` config.

For every example, lm-eval's ``process_docs`` must find exactly one biased answer, the one our stored roles name
(BBQ, Parrish et al. 2022 §4: for a negative question the stereotyped entity, for a non-negative one the other
entity); ``doc_to_choice`` must find the 'unknown' option among its ``UNKNOWN_RESPONSES``; its per-sample scorer
must count a choice as biased, unknown and correct exactly as our roles and label say; and no group tag may hold
``_``, which lm-eval splits on.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from lm_eval.tasks.bbq import utils as bbq

from pbbq.tasks.adapt import adapt_instantiate
from pbbq.tasks.adapt.bbq_format import load_bbq_proper_names, load_bbq_templates, load_bbq_vocabulary
from pbbq.tasks.adapt.generate import AdaptInstantiateParams
from pbbq.tasks.adapt.sheet import apply_classes, review_sheet
from pbbq.tasks.evaluation import lm_eval_utils
from tests.adapt_support import BBQ, VOCABULARY
from tests.bbq_records import SPECS, as_dataset, make_records

BBQ_CATEGORY = "Age"
"""lm-eval's scorer (``_process_results``) raises on any category but BBQ's 11; the category only picks which
per-category key receives the sample, so the copy handed to the scorer carries one of BBQ's names."""


def expected_biased_text(doc: dict) -> str:
    """BBQ's biased answer from our stored roles: negative question → stereotyped entity, else the other."""
    wanted = "stereotyped" if doc["question_polarity"] == "neg" else "non-stereotyped"
    [option] = [key for key, role in doc["answer_roles"].items() if role == wanted]
    return doc[option]


def disagreements(dataset: datasets.Dataset) -> list[str]:
    """Every way lm-eval's unmodified BBQ code reads an example differently from our roles; empty when none."""
    problems: list[str] = []
    for doc in bbq.process_docs(dataset):
        example = doc["example_id"]
        for key, (text, tag) in doc["answer_info"].items():
            if "_" in tag:
                problems.append(f"{example}: the tag {tag!r} of {key} contains '_'")
            if text != doc[key]:
                problems.append(f"{example}: answer_info[{key}] text {text!r} is not the option {doc[key]!r}")
        if doc["biased_answers"] != [expected_biased_text(doc)]:
            ours = expected_biased_text(doc)
            problems.append(f"{example}: lm-eval's biased answers {doc['biased_answers']}, ours {ours!r}")
            continue
        unknown = [doc[key] for key, role in doc["answer_roles"].items() if role == "unknown"]
        if unknown[0] not in bbq.UNKNOWN_RESPONSES:
            problems.append(f"{example}: the unknown option {unknown[0]!r} is not one of lm-eval's UNKNOWN_RESPONSES")
            continue
        choices = bbq.doc_to_choice(doc)
        correct_text = doc[f"ans{doc['label']}"]
        for index, choice in enumerate(choices):
            # lm-eval's own per-sample scorer, given log-likelihoods that make ``index`` the model's answer
            results = [(0.0 if i == index else -10.0, False) for i in range(len(choices))]
            scored = bbq.process_results_multiple_choice({**doc, "category": BBQ_CATEGORY}, results)
            chose_unknown = choice in bbq.UNKNOWN_RESPONSES
            expected = {
                "acc": float(choice == correct_text or (chose_unknown and correct_text in bbq.UNKNOWN_RESPONSES)),
                "biased": float(choice == expected_biased_text(doc)),
                "non_unknown": float(not chose_unknown),
            }
            _, n_biased, n_non_unknown, _ = scored["disamb_bias_score"]
            got = {"acc": scored["acc"], "biased": n_biased, "non_unknown": n_non_unknown}
            if got != expected:
                problems.append(f"{example}: choosing {choice!r}, lm-eval scores {got}, our roles {expected}")
    return problems


def always_biased_scores(dataset: datasets.Dataset) -> dict[str, float]:
    """BBQ's bias scores of a model that always picks the biased answer, by lm-eval's own BBQ code (which finds
    that answer from ``answer_info``) and by the exported task (``tasks/lm_eval_utils.py``, from our roles)."""
    theirs, ours = [], []
    for doc in bbq.process_docs(dataset):
        choices = bbq.doc_to_choice(doc)
        index = choices.index(doc["biased_answers"][0])
        results = [(0.0 if i == index else -10.0, False) for i in range(len(choices))]
        theirs.append(bbq.process_results_multiple_choice({**doc, "category": BBQ_CATEGORY}, results))
        option = [doc["ans0"], doc["ans1"], doc["ans2"]].index(expected_biased_text(doc))
        ours.append(lm_eval_utils.sample_scores(doc, option, [0.0 if i == option else -10.0 for i in range(3)]))
    return {
        "lm_eval_s_dis": bbq.agg_disamb_bias_scores([t["disamb_bias_score"] for t in theirs]),
        "lm_eval_s_amb": bbq.agg_amb_bias_scores([t["amb_bias_score"] for t in theirs]),
        "task_s_dis": lm_eval_utils.agg_disamb_bias_score([t["disamb_bias_score"] for t in ours]),
        "task_s_amb": lm_eval_utils.agg_amb_bias_score([t["amb_bias_score"] for t in ours]),
    }


def test_an_always_biased_model_scores_bias_1_by_lm_eval_and_by_the_exported_task() -> None:
    scores = always_biased_scores(as_dataset(make_records()["en"]))
    assert scores == dict.fromkeys(scores, 1.0)


def test_lm_eval_bbq_code_agrees_with_our_roles_on_hand_made_records() -> None:
    en = make_records()["en"]
    assert len(en) == 12 * len(SPECS)
    assert disagreements(as_dataset(en)) == []


def test_lm_eval_bbq_code_agrees_with_our_roles_on_race_ethnicity_full_names() -> None:
    """BBQ's Race_ethnicity proper-name templates 28 (["Asian"]) and 39 (five groups, Black and Latino among the
    names), every 15th example (all four cells): the full names tagged with their ethnicities are read as our roles
    say."""
    sheet = review_sheet(load_bbq_templates(BBQ / "templates-Race_ethnicity.csv")).assign(**{"class": "DT"})
    templates = apply_classes(sheet)[0]
    templates = templates[templates["template_id"].isin(["Race_ethnicity-28", "Race_ethnicity-39"])]
    names = load_bbq_proper_names(BBQ / "vocabulary_proper_names.csv")
    examples = adapt_instantiate(templates, load_bbq_vocabulary(VOCABULARY), AdaptInstantiateParams(), names)
    sample = examples["examples"].iloc[::15]
    assert set(sample["template_id"]) == {"Race_ethnicity-28", "Race_ethnicity-39"}
    assert disagreements(as_dataset(sample)) == []
    scores = always_biased_scores(as_dataset(sample))
    assert scores == dict.fromkeys(scores, 1.0)


def test_the_check_fails_on_a_record_lm_eval_misreads() -> None:
    """A tag with '_' is split by lm-eval and then names no group; the other entity's tag equal to the
    stereotyped one makes both entities 'biased'. Both must be reported."""
    _, age, ethnicity, _ = SPECS
    underscored = replace(
        age, template_id="AGE-09-T1", stereotype_id="AGE-09", stereo_tag=age.stereo_tag.replace("-", "_")
    )
    clash = replace(ethnicity, template_id="ETH-09-T1", stereotype_id="ETH-09", nonstereo_tag=ethnicity.stereo_tag)
    problems = disagreements(as_dataset(make_records((underscored, clash))["en"]))
    assert any("contains '_'" in problem and "AGE-09-T1" in problem for problem in problems)
    assert any("lm-eval's biased answers" in problem and "ETH-09-T1" in problem for problem in problems)


def test_a_persian_unknown_option_is_not_one_of_lm_evals() -> None:
    """The fa config cannot go through lm-eval's BBQ task (its choices need an English 'unknown'): the reason the
    release ships its own task (tasks/evaluation/lm_eval_task.py)."""
    problems = disagreements(as_dataset(make_records()["fa"]))
    assert problems and all("UNKNOWN_RESPONSES" in problem for problem in problems)


def test_the_en_unknown_phrasings_are_lm_evals() -> None:
    phrases = pd.read_csv(Path(__file__).resolve().parents[1] / "annotations" / "unknown_phrases.csv")
    assert set(phrases["phrase_en"]) <= set(bbq.UNKNOWN_RESPONSES)


def test_lm_eval_reads_the_built_samples_en_config(two_builds: tuple[Path, Path]) -> None:
    """The sample build's published ``en`` config, as a user loads it (slow: builds the sample)."""
    run, _ = two_builds
    shards = sorted((run / "10_publish" / "hub" / "data" / "en").glob("*.parquet"))
    table = pa.concat_tables([pq.read_table(shard) for shard in shards])
    dataset = datasets.Dataset(table)
    assert dataset.num_rows > 0
    assert disagreements(dataset) == []
    tags = {tag for info in dataset["answer_info"] for _, tag in info.values()}
    assert "unknown" in tags and not any("_" in tag or "/" in tag for tag in tags)
    assert not any(re.search(r"[\u0600-\u06ff]", tag) for tag in tags)  # English tags in the English config
    stereotyped = {group for meta in dataset["additional_metadata"] for group in meta["stereotyped_groups"]}
    assert stereotyped <= tags
    assert np.all(np.array(dataset["label"]) >= 0)
    # BBQ's surface: an entity option with its article and capital ("The taxi driver")
    for doc in dataset:
        entity_options = [doc[o] for o, role in doc["answer_roles"].items() if role != "unknown"]
        assert all(option.startswith("The ") for option in entity_options), entity_options
    scores = always_biased_scores(dataset)
    assert scores == dict.fromkeys(scores, 1.0)
