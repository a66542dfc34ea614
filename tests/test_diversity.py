"""The diversity stage's units and tables (PBBQ §3.5, Table 2, Appendix C): template texts masked, the template-
and instance-level tables on hand-computed texts, their Markdown and their plots."""

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbbq.tasks.diversity import (
    METRICS,
    TABLE2,
    TABLE2_INSTANCES,
    DiversityParams,
    mask_placeholders,
    metric_charts,
    table2_markdown,
    template_diversity_table,
    template_units,
)
from pbbq.tasks.text.categories import CATEGORIES
from pbbq.tasks.text.languages.fa import tokenize_fa
from tests.diversity_support import (
    diversity_table,
    make_examples,
    make_templates,
    reference_bleu_scores,
    template_row,
    tiny_bert,
)

tiny_model = pytest.fixture(tiny_bert, scope="module", name="tiny_model")  # built once for this file


# ------------------------------------------------------------------------------------ template texts, masked


def test_placeholders_become_one_neutral_word() -> None:
    text = "یک {stereo} و یک {nonstereo} در صف {lex} منتظر بودند."
    assert mask_placeholders(text, where="t") == "یک فلانی و یک فلانی در صف فلانی منتظر بودند."
    assert mask_placeholders("بی‌نشانگر", where="t") == "بی‌نشانگر"


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{Nonstereo} رفت", "unknown placeholder '{Nonstereo}'"), ("{stereo} رفت}", "unmatched brace")],
)
def test_an_unknown_placeholder_names_the_template_and_column(text: str, problem: str) -> None:
    templates = pd.DataFrame([template_row("AGE-01-T1", "Age", "{stereo} و {nonstereo}", text, "{nonstereo} رفت")])
    with pytest.raises(ValueError, match=re.escape(problem)) as error:
        template_units(templates)
    assert "template 'AGE-01-T1', column 'disambiguated_fa'" in str(error.value)
    assert "04_disambiguate templates" in str(error.value)


def test_template_units_mask_every_text_of_the_templates_out_of_review() -> None:
    units = template_units(make_templates())
    assert units["template_id"].tolist() == ["AGE-01-T1"] * 3 + ["GEN-01-T1"] * 3 + ["REL-01-T1"] * 3
    assert units["column"].tolist() == ["ambiguous_fa", "disambiguated_fa", "disambiguated_counter_biased_fa"] * 3
    assert units["text"].tolist() == [
        "فلانی و فلانی در پارک بودند",
        "فلانی در پارک خندید",
        "فلانی در پارک خندید",
        "فلانی کتاب خرید",
        "فلانی دوید",
        "فلانی نشستند",
        "فلانی و فلانی در پارک بودند",
        "فلانی دوید",
        "فلانی دوید",
    ]


def test_template_units_reject_an_empty_text_and_missing_columns() -> None:
    empty = pd.DataFrame([template_row("AGE-01-T1", "Age", "{stereo} و {nonstereo}", "", "")])
    with pytest.raises(ValueError, match="template 'AGE-01-T1', column 'disambiguated_fa': empty"):
        template_units(empty)
    with pytest.raises(ValueError, match="counter_biased_source"):
        template_units(make_templates().drop(columns="counter_biased_source"))


def _bleu(precisions: list[float], sys_len: int, ref_len: int) -> float:
    """BLEU (0-100) from its n-gram precisions (in %), with the brevity penalty of Papineni et al."""
    penalty = 1.0 if sys_len > ref_len else math.exp(1 - ref_len / sys_len)
    return penalty * math.exp(sum(math.log(p) for p in precisions) / len(precisions))


def _reference_ngd(token_lists: list[list[str]]) -> float:
    """C.3 written out: Σ_{n=1..4} #unique n-grams / #n-grams of the concatenated token lists."""
    tokens = [token for tokens in token_lists for token in tokens]
    grams = [[tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)] for n in range(1, 5)]
    return sum(len(set(g)) / len(g) for g in grams)


# The expected values below are worked by hand from the masked texts; NEUTRAL = فلانی, stop words و در بودند.
# Age, units sorted: A = فلانی در پارک خندید, B = فلانی و فلانی در پارک بودند.
AGE_NGD = 6 / 10 + 7 / 9 + 7 / 8 + 7 / 7  # D⊕ = A B: 6 types of 10; 2-grams 'فلانی در', 'در پارک' twice
AGE_TTR = 2 / 3  # stop words and فلانی out: پارک خندید پارک
# A against B: p1 3/4 (فلانی clipped to 1), p2 2/3, p3 1/2, p4 0/1 -> 100 / (2 * 1); BP exp(1 - 6/4).
# B against A: p1 3/6 (فلانی's 3 clipped to A's 1), p2 2/5, p3 1/4, p4 0/3 -> 100 / (2 * 3); BP 1.
AGE_SELF_BLEU = (_bleu([75, 200 / 3, 50, 50], 4, 6) + _bleu([50, 40, 25, 100 / 6], 6, 4)) / 200
# Gender, sorted: فلانی دوید, فلانی نشستند, فلانی کتاب خرید (the mirror exception: 3 units)
GENDER_NGD = 5 / 7 + 1 + 1 + 1
GENDER_TTR = 1.0  # دوید نشستند کتاب خرید
# the two 2-word units: p1 1/2, p2 0/1 -> 50, order 2 -> 50 each; the 3-word one: p1 1/3, p2 0/2 -> 25,
# p3 0/1 -> 100 / (4 * 1) = 25, order 3, BP 1 (closest other length 2 < 3)
GENDER_SELF_BLEU = (50 + 50 + (100 / 3 * 25 * 25) ** (1 / 3)) / 300


def test_template_table_on_hand_computed_texts() -> None:
    table = template_diversity_table(make_templates())
    assert list(table.columns) == TABLE2.names
    assert table["category"].tolist() == ["Age", "Gender", "Religion", "Average", "Overall"]
    rows = table.set_index("category")
    assert rows["n_templates"].tolist() == [1, 1, 1, 3, 3]
    assert rows["n_units"].tolist() == [2, 3, 2, 7, 5]  # Overall: 5 distinct texts of the 7

    assert rows.loc["Age", "ngd"] == pytest.approx(AGE_NGD, abs=1e-12)
    assert rows.loc["Age", "ngd_mean"] == pytest.approx(AGE_NGD / 4, abs=1e-12)
    assert rows.loc["Age", "ttr"] == pytest.approx(AGE_TTR, abs=1e-12)
    assert rows.loc["Age", "self_bleu"] == pytest.approx(AGE_SELF_BLEU, abs=1e-12)
    assert rows.loc["Gender", "ngd"] == pytest.approx(GENDER_NGD, abs=1e-12)
    assert rows.loc["Gender", "ttr"] == pytest.approx(GENDER_TTR, abs=1e-12)
    assert rows.loc["Gender", "self_bleu"] == pytest.approx(GENDER_SELF_BLEU, abs=1e-12)
    # Religion: فلانی دوید, فلانی و فلانی در پارک بودند -> TTR دوید پارک = 1
    assert rows.loc["Religion", "ttr"] == pytest.approx(1.0, abs=1e-12)

    for metric in ("ngd", "ngd_mean", "ttr", "self_bleu"):
        assert rows.loc["Average", metric] == pytest.approx(rows.loc[["Age", "Gender", "Religion"], metric].mean())
    overall = sorted(
        ["فلانی در پارک خندید", "فلانی و فلانی در پارک بودند", "فلانی کتاب خرید", "فلانی دوید", "فلانی نشستند"]
    )
    assert rows.loc["Overall", "ttr"] == pytest.approx(6 / 7, abs=1e-12)  # پارک خندید پارک کتاب خرید دوید نشستند
    assert rows.loc["Overall", "ngd"] == pytest.approx(_reference_ngd([s.split() for s in overall]), abs=1e-12)
    reference = reference_bleu_scores(overall, "none")
    assert rows.loc["Overall", "self_bleu"] == pytest.approx(reference.mean() / 100, abs=1e-12)
    assert table["homogenization"].isna().all()
    assert (table["homogenization_note"] == "not computed: no homogenization model given for this language").all()


def test_units_are_concatenated_in_sorted_order_for_ngd() -> None:
    # masked: p q (the ambiguous text, first in the table) and q p q (both continuations), p = فلانی, q = دوید.
    # Sorted, q p q comes first ('د' < 'ف'): D⊕ = q p q p q -> 2/5 + 2/4 + 2/3 + 2/2; in table order it would
    # be p q q p q -> 2/5 + 3/4 + 3/3 + 2/2
    templates = pd.DataFrame(
        [template_row("DIS-01-T1", "Disability", "{stereo} دوید", "دوید {stereo} دوید", "دوید {nonstereo} دوید")]
    )
    table = template_diversity_table(templates).set_index("category")
    assert table.loc["Disability", "ngd"] == pytest.approx(2 / 5 + 2 / 4 + 2 / 3 + 2 / 2, abs=1e-12)


def test_template_table_ignores_row_order_and_rows_in_review() -> None:
    templates = make_templates()
    table = template_diversity_table(templates)
    shuffled = templates.sample(frac=1, random_state=3)
    pd.testing.assert_frame_equal(table, template_diversity_table(shuffled))
    in_review = templates.assign(disambiguated_source="review")
    assert template_diversity_table(in_review).empty


def test_template_table_with_a_model(tiny_model: str) -> None:
    table = template_diversity_table(
        make_templates(), DiversityParams(homogenization_model=tiny_model, homogenization_num_layers=2)
    )
    rows = table.set_index("category")
    assert rows["homogenization"].notna().all()
    assert rows.loc["Average", "homogenization"] == pytest.approx(rows["homogenization"].iloc[:3].mean())
    assert rows.loc["Overall", "homogenization_note"] == f"BERTScore F1, {tiny_model} layer 2, all 10 pairs"
    assert rows.loc["Average", "homogenization_note"] == "mean of 3 of 3 categories"


# ------------------------------------------------------------------------------------------ instance level


def test_instance_table_rows_units_and_metrics() -> None:
    table = diversity_table(make_examples())
    assert list(table.columns) == TABLE2_INSTANCES.names
    assert table[["config", "category"]].values.tolist() == [
        [config, category]
        for config in ("fa", "fa-names", "en")
        for category in ("Age", "Gender", "Average", "Overall")
    ]
    fa = table[table["config"] == "fa"].set_index("category")
    assert fa["n_units"].tolist() == [3, 2, 5, 5]
    # the names config pools its seeds' distinct contexts: 1 per category, so Self-BLEU has no reference
    names = table[table["config"] == "fa-names"].set_index("category")
    assert names.loc["Age", "n_units"] == 1 and math.isnan(names.loc["Age", "self_bleu"])
    # Gender, fa, sorted: 'زن و مرد ...' before 'مرد و زن ...'; words زن و مرد در اداره کار می‌کنند twice, stop
    # words و در کار می‌کنند out (hazm) -> زن مرد اداره twice: 3 / 6
    assert fa.loc["Gender", "ttr"] == pytest.approx(3 / 6, abs=1e-12)
    gender = [s[:-1].split() for s in ("زن و مرد در اداره کار می‌کنند.", "مرد و زن در اداره کار می‌کنند.")]
    assert fa.loc["Gender", "ngd"] == pytest.approx(_reference_ngd(gender), abs=1e-12)
    for metric in ("ngd", "ttr", "self_bleu"):
        assert fa.loc["Average", metric] == pytest.approx((fa.loc["Age", metric] + fa.loc["Gender", metric]) / 2)
    everything = sorted({context for contexts in _examples_fa().values() for context in contexts})
    reference = reference_bleu_scores([" ".join(tokenize_fa(s)) for s in everything], "none")
    assert fa.loc["Overall", "self_bleu"] == pytest.approx(reference.mean() / 100, abs=1e-12)
    en = table[table["config"] == "en"].set_index("category")
    # English is lowercased and NLTK's stop words go: old man young man park -> 4 / 5
    assert en.loc["Age", "ttr"] == pytest.approx(4 / 5, abs=1e-12)
    assert table["homogenization"].isna().all()
    assert table["homogenization_note"].str.startswith("not computed").all()


def _examples_fa() -> dict[str, list[str]]:
    frame = make_examples().query("lang == 'fa' and variant == 'original'")
    return {str(k): sorted(set(v)) for k, v in frame.groupby("category")["context"]}


def test_instance_table_ignores_row_order_and_checks_columns() -> None:
    examples = make_examples()
    shuffled = examples.sample(frac=1, random_state=5)
    pd.testing.assert_frame_equal(diversity_table(examples), diversity_table(shuffled))
    with pytest.raises(ValueError, match="context"):
        diversity_table(examples.drop(columns="context"))


def test_instance_table_with_a_model_per_language(tiny_model: str) -> None:
    table = diversity_table(
        make_examples(), DiversityParams(homogenization_model=tiny_model, homogenization_num_layers=2)
    )
    fa = table[table["config"] == "fa"].set_index("category")
    assert fa["homogenization"].notna().all()
    assert fa.loc["Average", "homogenization"] == pytest.approx(fa.loc[["Age", "Gender"], "homogenization"].mean())
    assert fa.loc["Overall", "homogenization_note"] == f"BERTScore F1, {tiny_model} layer 2, all 10 pairs"
    en = table[table["config"] == "en"]
    assert en["homogenization"].isna().all()
    assert "no homogenization model" in en["homogenization_note"].iloc[0]


# ----------------------------------------------------------------------------------------------- reporting


def test_markdown_of_both_levels() -> None:
    templates = template_diversity_table(make_templates())
    markdown = table2_markdown(templates, "Template texts")
    assert markdown.startswith("## Template texts\n\n| Category | # templates | # units | NGD ↑ | NGD ÷ 4 ↑ | TTR ↑ |")
    assert "###" not in markdown
    assert (
        f"| Age | 1 | 2 | {AGE_NGD:.4f} | {AGE_NGD / 4:.4f} | {AGE_TTR:.4f} | {AGE_SELF_BLEU:.4f} | not computed |"
        in (markdown)
    )
    assert "| **Average** | **3** | **7** |" in markdown
    assert "- Age, Gender, Religion, Average, Overall: not computed: no homogenization model" in markdown

    instances = table2_markdown(diversity_table(make_examples()), "Instances")
    assert "### fa\n" in instances and "### fa-names\n" in instances and "### en\n" in instances
    assert "| Category | # units | NGD ↑ | NGD ÷ 4 ↑ | TTR ↑ | Self-BLEU ↓ | BERTScore ↓ |" in instances
    assert "| Gender | 2 | " in instances and "# templates" not in instances


def test_charts_of_both_levels() -> None:
    for table, prefix in (
        (template_diversity_table(make_templates()), "diversity"),
        (diversity_table(make_examples()), "diversity_instances"),
    ):
        charts = metric_charts(table, prefix)
        assert list(charts) == [f"{prefix}_{metric}.png" for metric in METRICS]
        assert all(png.startswith(b"\x89PNG") for png in charts.values())
        assert metric_charts(table, prefix) == charts


@pytest.mark.parametrize("level", ["templates", "instances"])
def test_each_chart_is_drawn_from_its_metric_alone(level: str) -> None:
    """The charts of a table share one figure: none keeps anything of the one drawn before it (its limits, ticks,
    layout), whatever those showed (far larger values, no bar at all), nor of a table drawn before."""
    table = template_diversity_table(make_templates()) if level == "templates" else diversity_table(make_examples())
    charts = list(metric_charts(table).values())
    for k, metric in enumerate(METRICS):
        for others in (math.nan, 40.0):
            alone = table.assign(**{other: others for other in METRICS if other != metric})
            assert list(metric_charts(alone).values())[k] == charts[k], (metric, others)
    empty = metric_charts(table.iloc[:0])
    assert len(set(empty.values())) == len(METRICS)  # the empty axes, each with its own labels


def test_charts_are_those_of_a_figure_per_chart(tmp_path: Path) -> None:
    """Sharing one figure gives each chart the bytes of a figure of its own (as the charts were drawn before),
    on a paper-like instance table (three configs, 18 rows, TTR an order of magnitude below NGD: the layout fitted
    to one chart's labels must not carry into the next), with and without bars left out (NaN)."""
    figure_per_chart = pytest.importorskip("benchmarks.diversity_stage").figure_per_chart
    categories = [*sorted(CATEGORIES), "Average", "Overall"]
    ngd = np.linspace(0.04, 0.24, len(categories))
    table = pd.DataFrame(
        {
            "config": np.repeat(["fa", "fa-names", "en"], len(categories)),
            "category": categories * 3,
            "ngd": np.tile(ngd, 3),
            "ttr": np.tile(ngd / 12, 3),
            "self_bleu": 1.0,
            "homogenization": np.nan,
        }
    )
    for drawn in (table, table.assign(ngd=table["ngd"].where(table["category"] != "Category 3"))):
        expected = [path.read_bytes() for path in figure_per_chart(drawn, tmp_path)]
        assert list(metric_charts(drawn).values()) == expected
