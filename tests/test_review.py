"""Review rounds without a build (tasks/review): items, sample, assignment, the spreadsheet round trip, the
adjudication, agreement against hand-computed values, and decisions resolved against the build's hashes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.review.agreement import agreement, below, krippendorff_alpha
from pbbq.tasks.review.apply import resolve
from pbbq.tasks.review.decisions import DECISION_COLUMNS, adjudicate, check_decisions
from pbbq.tasks.review.items import ITEM_COLUMNS, content_hash
from pbbq.tasks.review.rounds import assign, stratified_sample
from pbbq.tasks.review.sheets import read_round, sheet_decisions, write_round


def _items(n: int = 12) -> pd.DataFrame:
    rows = []
    for i in range(n):
        text = f"{{stereo}} متن {i} بود، اما {{nonstereo}} نبود."
        rows.append(
            dict.fromkeys(ITEM_COLUMNS, "")
            | {
                "kind": "contexts",
                "item_id": f"T{i:02d}:biased",
                "hash": content_hash(text),
                "category": ("Age", "Gender", "Ethnicity")[i % 3],
                "source": "llm",
                "lang": "fa",
                "machine_output": text,
            }
        )
    return pd.DataFrame(rows)


def _decision(reviewer: str, item: str, verdict: str, fix: str = "", reason: str = "", **answers: str) -> dict:
    return {
        "round_id": "round-x",
        "reviewer": reviewer,
        "kind": "contexts",
        "item_id": item,
        "hash": content_hash(item),
        "verdict": verdict,
        "fix_text": fix,
        "reason": reason,
        "answers": json.dumps(answers),
    }


def test_alpha_and_kappa_equal_the_hand_computed_values() -> None:
    """Two reviewers, four items: A says yes yes no no, B yes no no no. Coincidences (ordered pairs within an item):
    o(yes,yes) = 2, o(yes,no) = o(no,yes) = 1, o(no,no) = 4; n = 8, n(yes) = 3, n(no) = 5. D_o = 2/8, D_e =
    2·3·5 / (8·7) = 30/56, alpha = 1 − (2/8)/(30/56) = 8/15. Cohen: p_o = 3/4, p_e = .5·.25 + .5·.75 = .5,
    kappa = (.75 − .5)/.5 = .5; Fleiss over the same two columns: p_e = (3/8)² + (5/8)² = 34/64, kappa =
    (3/4 − 34/64)/(1 − 34/64) = 14/30."""
    answers = {"A": ("yes", "yes", "no", "no"), "B": ("yes", "no", "no", "no")}
    rows = [_decision(r, f"I{i}", "accept", disambiguates=a) for r, said in answers.items() for i, a in enumerate(said)]
    table = agreement(pd.DataFrame(rows)).set_index("question")
    row = table.loc["disambiguates"]
    assert row["alpha"] == pytest.approx(8 / 15)
    assert row["cohen_kappa"] == pytest.approx(0.5)
    assert row["fleiss_kappa"] == pytest.approx(14 / 30)
    assert (row["n_items"], row["n_reviewers"], row["n_ratings"]) == (4, 2, 8)
    assert pd.isna(table.loc["verdict", "alpha"]) and "undefined" in table.loc["verdict", "note"]
    assert list(below(table.reset_index(), 0.667)["question"]) == ["disambiguates"]
    assert krippendorff_alpha(np.array([[0.0, 1.0, np.nan], [0.0, 1.0, 1.0]]), 2) == pytest.approx(1.0)


def test_sample_is_seeded_and_stratified_and_assignment_spreads_the_load() -> None:
    items = _items(12)
    one, again, other = (stratified_sample(items, 6, seed) for seed in (3, 3, 4))
    assert one.equals(again) and not one.equals(other)
    assert one["category"].value_counts().to_dict() == {"Age": 2, "Gender": 2, "Ethnicity": 2}
    assert len(stratified_sample(items, None, 0)) == 12
    few = _items(2).assign(kind="names", item_id=lambda f: "N" + f["item_id"])  # 2 names beside 12 contexts
    mixed = stratified_sample(pd.concat([items, few], ignore_index=True), 6, 3)
    assert mixed["kind"].value_counts().to_dict() == {"contexts": 6, "names": 2}  # each kind sampled, the few whole
    assert mixed[mixed["kind"] == "contexts"].reset_index(drop=True).equals(one)
    assignment = assign(one, ["ana", "bob", "cyrus"], 2, seed=3)
    assert (assignment.groupby("item_id")["reviewer"].nunique() == 2).all()
    assert sorted(assignment["reviewer"].value_counts()) == [4, 4, 4]
    with pytest.raises(ValueError, match="at least 2 reviewers"):
        assign(one, ["ana", "bob"], 1, seed=0)
    with pytest.raises(ValueError, match="name at least 3"):
        assign(one, ["ana", "bob"], 3, seed=0)


def _round(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    items = _items(4)
    assignment = assign(items, ["ana", "bob"], 2, seed=0)
    meta = {"round_id": assignment["round_id"][0], "items": ["contexts"]}
    write_round(tmp_path, items, assignment, meta, ["contexts"])
    return tmp_path, assignment


def test_the_sheets_round_trip_safely_with_right_to_left_text(tmp_path: Path) -> None:
    folder, assignment = _round(tmp_path)
    sheet_path = folder / "sheets" / "ana.csv"
    sheet = pd.read_csv(sheet_path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    fix = '=HYPERLINK("http://x") {stereo} پول را واریز کرد، اما {nonstereo} گزارش داد.'
    sheet.loc[0, ["disambiguates", "natural", "verdict", "fix_text"]] = ["no", "yes", "fix", fix]
    sheet.loc[1, ["verdict", "reason"]] = ["reject", "-not a continuation"]
    sheet.loc[2, "verdict"] = "accept"
    sheet.to_csv(sheet_path, index=False, encoding="utf-8-sig")
    assert "'=HYPERLINK" not in sheet_path.read_text(encoding="utf-8-sig")  # the reviewer's file, as typed
    decisions = sheet_decisions(sheet_path, assignment)
    assert list(decisions["verdict"]) == ["fix", "reject", "accept"]
    assert decisions.loc[0, "fix_text"] == fix and decisions.loc[1, "reason"] == "-not a continuation"
    assert json.loads(decisions.loc[0, "answers"]) == {"disambiguates": "no", "natural": "yes"}
    from pbbq.tasks.review.decisions import load_decisions
    from pbbq.tasks.review.sheets import write_decisions

    write_decisions(folder / "decisions.csv", decisions)
    on_disk = (folder / "decisions.csv").read_text(encoding="utf-8-sig")
    assert "'=HYPERLINK" in on_disk and "'-not a continuation" in on_disk
    assert load_decisions(folder / "decisions.csv").values.tolist() == decisions.values.tolist()
    _, items, again = read_round(folder)
    assert again.values.tolist() == assignment.values.tolist() and items["machine_output"][0].startswith("{stereo} متن")
    assert "verdict" in (folder / "HOW_TO_REVIEW.md").read_text(encoding="utf-8")


def test_a_sheet_cannot_judge_what_it_was_not_shown(tmp_path: Path) -> None:
    folder, assignment = _round(tmp_path)
    path = folder / "sheets" / "bob.csv"
    sheet = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    sheet.loc[0, ["verdict", "hash"]] = ["accept", "0" * 64]
    sheet.to_csv(path, index=False, encoding="utf-8-sig")
    with pytest.raises(InputError, match=r"bob.csv.*row 2.*hash was changed"):
        sheet_decisions(path, assignment)
    sheet.loc[0, ["verdict", "hash"]] = ["fix", assignment.loc[assignment["reviewer"] == "bob", "hash"].iloc[0]]
    sheet.to_csv(path, index=False, encoding="utf-8-sig")
    with pytest.raises(InputError, match="without the corrected text"):
        sheet_decisions(path, assignment)


def test_adjudication_majority_else_the_stricter_decision() -> None:
    rows = [
        _decision("a", "I1", "accept"),
        _decision("b", "I1", "reject", reason="wrong entity"),
        _decision("a", "I2", "accept"),
        _decision("b", "I2", "fix", fix="x"),
        _decision("c", "I2", "accept"),
        _decision("a", "I3", "fix", fix="x"),
        _decision("b", "I3", "fix", fix="y"),
        _decision("a", "I4", "fix", fix="x"),
        _decision("b", "I4", "fix", fix="x"),
    ]
    decided = adjudicate(pd.DataFrame(rows)).set_index("item_id")
    assert decided.loc["I1", ["verdict", "how", "reason"]].tolist() == ["reject", "stricter", "wrong entity"]
    assert decided.loc["I2", ["verdict", "how"]].tolist() == ["accept", "majority"]
    assert decided.loc["I3", "verdict"] == "unresolved"
    assert decided.loc["I4", ["verdict", "fix_text", "how"]].tolist() == ["fix", "x", "unanimous"]


def test_a_decision_applies_only_to_the_text_it_judged() -> None:
    rows = [_decision(r, "I1", "fix", fix="new") for r in "ab"] + [
        _decision(r, "I2", "reject", reason="r") for r in "ab"
    ]
    decisions = pd.DataFrame(rows)
    applied = resolve(decisions, "contexts", {"I1": content_hash("I1"), "I2": content_hash("I2 changed")})
    assert dict(applied.fixes) == {"I1": "new"} and not applied.rejects
    assert applied.stale() == ["I2"]
    assert applied.report()["by_status"] == {"applied": 1, "stale": 1}


def test_a_bad_decision_row_is_one_line_naming_file_and_row(tmp_path: Path) -> None:
    row = _decision("a", "I1", "maybe")
    with pytest.raises(InputError, match=r"d.csv, row 2: verdict 'maybe'"):
        check_decisions(pd.DataFrame([row], columns=DECISION_COLUMNS), tmp_path / "d.csv")


def test_a_pool_a_review_emptied_is_drawn_around_not_crashed_on() -> None:
    """A round took an era's names of a group out of the draw (tasks/review/names.py): the draw lands elsewhere."""
    from pbbq.tasks.names.draw import PairRequest, draw_pair

    pools = {
        ("en", "Afghan", "male", "post1995"): (),
        ("en", "Afghan", "male", "1970-1995"): ("Zalmai", "Mirwais"),
        ("en", "Punjabi", "male", "post1995"): ("Bilal",),
        ("en", "Punjabi", "male", "1970-1995"): ("Imran", "Asif"),
    }
    request = PairRequest("en", ("Afghan", "Punjabi"), ("male", "male"), ("post1995", "1970-1995"))
    draws = [draw_pair(pools, request, np.random.default_rng(seed)) for seed in range(20)]
    assert {d.era for d in draws} == {"1970-1995"}


def test_a_reviewer_gets_only_their_sheet_the_key_stays_with_the_lead(tmp_path: Path) -> None:
    """items.csv (a name's intended group) and assignment.csv (who else reviews) are the lead's key, not beside the
    sheets a reviewer is sent (a fresh reviewer found items.csv there)."""
    items = _items(4)
    items.loc[0, ["kind", "source", "machine_output"]] = ["names", "افغانستانی|female", "حمیرا"]
    assignment = assign(items, ["ana", "bob"], 2, seed=0)
    write_round(tmp_path, items, assignment, {"round_id": assignment["round_id"][0]}, ["contexts", "names"])
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".csv") == []
    assert sorted(p.name for p in (tmp_path / "key").iterdir()) == ["assignment.csv", "items.csv"]
    for sheet in (tmp_path / "sheets").glob("*.csv"):
        text = sheet.read_text(encoding="utf-8-sig")
        assert "افغانستانی" not in text and "source" not in text.splitlines()[0].split(",")
        other = {"ana": "bob", "bob": "ana"}[sheet.stem]
        assert other not in text
    _, again, read = read_round(tmp_path)
    assert read.values.tolist() == assignment.values.tolist() and len(again) == 4


def _translation_run() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    context = "یک پیرمرد هفتادساله و یک مرد جوان در صف بانک بودند."
    examples = pd.DataFrame(
        [
            {"category": "Age", "stereotype_id": "AGE-01", "context": context, "question": "کدام‌یک نتوانست؟",
             "stereo_entity": "پیرمرد هفتادساله", "nonstereo_entity": "مرد جوان", "lexical_variant": "بانک",
             "additional_metadata": {"stereotyped_groups": ["سالمندان"]},
             "context_condition": "disambig", "assignment": "counter_biased"},
        ]
    )  # fmt: skip
    segments = pd.DataFrame(
        [
            {"segment_id": f"{kind}-1", "kind": kind, "text_fa": fa, "text_en": en, "glossary": [], "failures": "",
             "back_fa": fa, "chrf": 100.0}
            for kind, fa, en in (
                ("context", context, "A 70-year-old man and a young man were in the bank queue."),
                ("question", "کدام‌یک نتوانست؟", "Who could not?"),
                ("entity", "پیرمرد هفتادساله", "70-year-old man"),
                ("lex", "بانک", "bank"),
            )
        ]
    )  # fmt: skip
    stereotypes = pd.DataFrame([{"stereotype_id": "AGE-01", "statement_fa": "سالمندان با فناوری مشکل دارند."}])
    return segments, examples, stereotypes


def test_a_translation_item_carries_its_stereotype_and_a_piece_its_sentence() -> None:
    """The stereotype field was empty for translations, and an entity or a lexical variant came without the sentence
    it occurs in (a fresh reviewer found both)."""
    from pbbq.tasks.review.items import translation_items

    segments, examples, stereotypes = _translation_run()
    items = translation_items(segments, "en", "fa", examples, stereotypes).set_index("item_id")
    assert (items["stereotype"] == "سالمندان با فناوری مشکل دارند.").all()
    assert (items["category"] == "Age").all() and (items["source_lang"] == "fa").all()
    context = examples["context"][0]
    for piece in ("entity-1", "lex-1"):
        assert f"in the sentence: {context}" in items.loc[piece, "details"]
    assert f"asked of: {context}" in items.loc["question-1", "details"]
    assert "in the sentence" not in items.loc["context-1", "details"]
    assert "the context is disambiguated against the stereotype" in items.loc["context-1", "details"]
    without = translation_items(segments, "en", "fa", examples).set_index("item_id")  # an adaptation run's: no survey
    assert (without["stereotype"] == "about: سالمندان").all()


def test_a_right_to_left_cell_carries_a_direction_mark_taken_off_on_reading(tmp_path: Path) -> None:
    """A Persian cell starting with {stereo} laid out left to right in a spreadsheet: a sheet's Persian cells start
    with a RIGHT-TO-LEFT MARK (Persian's script, as tasks/text/languages declares it), an English one does not, and
    a fix copied from a marked cell comes back without the mark, its item's hash matching."""
    from pbbq.tasks.review.items import translation_items

    segments, examples, stereotypes = _translation_run()
    translations = translation_items(segments, "en", "fa", examples, stereotypes)
    items = pd.concat([_items(2).assign(source_lang="fa"), translations])
    assignment = assign(items, ["ana", "bob"], 2, seed=0)
    write_round(tmp_path, items, assignment, {"round_id": assignment["round_id"][0]}, ["contexts", "translations:en"])
    path = tmp_path / "sheets" / "ana.csv"
    sheet = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    contexts, translations = sheet[sheet["kind"] == "contexts"], sheet[sheet["kind"] == "translations:en"]
    assert contexts["machine_output"].str.startswith("\u200f{stereo}").all()
    assert translations["source_text"].str.startswith("\u200f").all()
    assert not translations["machine_output"].str.startswith("\u200f").any()
    assert not sheet["hash"].str.contains("\u200f").any()
    row = contexts.index[0]
    sheet.loc[row, ["verdict", "fix_text"]] = ["fix", sheet.loc[row, "machine_output"] + "\u200f"]
    sheet.to_csv(path, index=False, encoding="utf-8-sig")
    decided = sheet_decisions(path, assignment)
    original = items.set_index("item_id").loc[decided.loc[0, "item_id"]]
    assert decided.loc[0, "fix_text"] == original["machine_output"] and decided.loc[0, "hash"] == original["hash"]


def test_label_studio_shows_no_other_reviewer_and_a_name_is_accepted_or_rejected() -> None:
    """The task's note named the item's reviewers to anyone, a name's task data held the group it is meant to signal,
    the details box ran left to right for Persian, and a name could be 'fixed' (a fresh reviewer found them)."""
    from pbbq.tasks.review.label_studio import labeling_config, tasks_of

    items = _items(2).assign(source_lang="fa")
    items.loc[1, ["kind", "item_id", "source", "machine_output", "details"]] = [
        "names", "name-1", "افغانستانی|female", "حمیرا", "choices: افغانستانی; ایرانی; none"
    ]  # fmt: skip
    assignment = assign(items, ["ana", "bob"], 2, seed=0)
    tasks = tasks_of(items, assignment, "round-x")
    for task in tasks:
        assert "ana" not in task["data"]["note"] and "bob" not in task["data"]["note"]
    assert "source" not in tasks[1]["data"] and "افغانستانی|female" not in json.dumps(tasks[1], ensure_ascii=False)
    assert tasks[1]["data"]["choices"] == [{"value": "افغانستانی"}, {"value": "ایرانی"}, {"value": "none"}]
    context = labeling_config("contexts", "fa", "fa")
    details = next(line for line in context.splitlines() if 'name="details"' in line)
    assert 'dir="rtl"' in details
    name = labeling_config("names", "fa", "fa")
    assert '<Choice value="fix"/>' not in name and 'name="fix_text"' not in name and 'name="details"' not in name
    assert '<Choice value="fix"/>' in context
    row = _decision("a", "name-1", "fix", fix="Homeyra") | {"kind": "names"}
    with pytest.raises(InputError, match="a name is accepted or rejected"):
        check_decisions(pd.DataFrame([row], columns=DECISION_COLUMNS), Path("d.csv"))
