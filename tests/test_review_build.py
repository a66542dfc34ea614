"""A review round through the build (issue 37): export a round from the sample, answer it as two reviewers by CSV,
import it, rebuild: every fix is in the release, every reject in its dropped table with reason review_rejected,
and [review] require = true releases only reviewed items; a decision on an LLM answer that changed is stale."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.cli import main
from pbbq.tasks.disambiguate import DisambiguateParams, Prompts, disambiguate
from pbbq.tasks.llm import LLMClient, LLMConfig, ResponseStore
from pbbq.tasks.review.items import content_hash
from tests.fakes.llm_servers import FakeLLMServer
from tests.helpers import FAKE_API_KEY, llm_config, without_review
from tests.test_llm_stages import GOOD, NO_OVERRIDES, STEREOTYPES, _template

pytestmark = pytest.mark.xdist_group("review_build")


def _answer(sheet: Path, choose) -> None:
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    for index, row in frame.iterrows():
        for column, value in choose(row).items():
            frame.loc[index, column] = value
    frame.to_csv(sheet, index=False, encoding="utf-8-sig")


def _release(run: Path, config: str) -> pd.DataFrame:
    return pd.read_parquet(next((run / "10_publish" / "hub" / "data" / config).glob("*.parquet")))


def _build(config: Path, outputs: Path, run_id: str) -> Path:
    from pbbq.flows.build_pbbq import build_pbbq

    return Path(build_pbbq(config=str(config), run_id=run_id, outputs=str(outputs)))


def test_a_round_answered_by_csv_changes_the_next_build(
    prefect_server: None, sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = tmp_path / "outputs"
    config = sample_copy / "configs" / "sample.toml"
    config.write_text(without_review(config.read_text(encoding="utf-8")), encoding="utf-8")  # its own round instead
    first = _build(config, outputs, "first")
    folder = tmp_path / "round"
    items_flags = ["--items", "contexts,translations:en", "--items", "names"]  # a repeated --items adds
    assert main(["review", "export", str(first), *items_flags, "--reviewers", "ana,bob", "--out", str(folder)]) == 0
    items = pd.read_csv(folder / "key" / "items.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    contexts = items[items["kind"] == "contexts"]["item_id"].tolist()
    questions = items[(items["kind"] == "translations:en") & (items["source"] == "question")]["item_id"].tolist()
    context_segments = items[(items["kind"] == "translations:en") & (items["source"] == "context")]["item_id"].tolist()
    rejected_context, disputed_context = contexts[0], contexts[1]
    unanswered = set(
        items.loc[items["category"] == items["category"][items["item_id"] == contexts[-1]].iloc[0], "item_id"]
    )
    unanswered = {c for c in unanswered if c in contexts[2:]}
    fixed_segment, rejected_segment = questions[0], context_segments[0]
    fix = "=Which one of them, by the reviewers' fix, is it?"
    strength = pd.read_parquet(first / "06_names" / "proxy_strength.parquet").drop_duplicates(["lang", "group"])
    weak = strength.loc[~strength["strong"], "group"].iloc[0]  # the classifier's verdict, which readers overrule
    names = items[items["kind"] == "names"].assign(group=lambda f: f["source"].str.split("|").str[0])
    signalled = set(names.loc[names["group"] == weak, "item_id"])
    unsignalling = names[names["group"] != weak].iloc[0]  # a name the readers give to no group

    def reviewer(name: str):
        def choose(row: pd.Series) -> dict[str, str]:
            if row["item_id"] in unanswered:
                return {}
            if row["item_id"] == rejected_context:
                return {"verdict": "reject", "reason": "gives the trait to the wrong person", "disambiguates": "no"}
            if row["item_id"] == disputed_context:
                return {"verdict": "reject" if name == "bob" else "accept", "reason": "unnatural" * (name == "bob")}
            if row["item_id"] == fixed_segment:
                return {"verdict": "fix", "fix_text": fix, "faithful": "no"}
            if row["item_id"] == rejected_segment:
                return {"verdict": "reject", "reason": "the calque a native reader would not write", "natural": "no"}
            if row["kind"] == "names":
                intended = names.set_index("item_id").loc[row["item_id"], "source"].split("|")
                group = "none" if row["item_id"] == unsignalling["item_id"] else intended[0]
                return {"verdict": "accept", "group": group, "gender": intended[1]}
            if row["kind"] == "contexts":
                return {"verdict": "accept", "disambiguates": "yes", "natural": "yes"}
            return {"verdict": "accept", "faithful": "yes", "natural": "yes", "same_entities": "yes"}

        return choose

    for name in ("ana", "bob"):
        _answer(folder / "sheets" / f"{name}.csv", reviewer(name))
    assert main(["review", "import", str(folder)]) == 0
    assert "alpha" in capsys.readouterr().out
    decisions = folder / "decisions.csv"
    assert "'=Which one" in decisions.read_text(encoding="utf-8-sig")  # spreadsheet-safe on disk

    with config.open("a", encoding="utf-8") as handle:
        handle.write(f'\n[review]\ndecisions = "{decisions}"\n')
    second = _build(config, outputs, "second")
    fa, en = _release(second, "fa"), _release(second, "en")
    for template in (rejected_context, disputed_context):  # the stricter decision holds for the disputed one
        template_id = template.split(":")[0]
        assert template_id not in set(fa["template_id"]) and template_id not in set(en["template_id"])
        dropped = pd.read_parquet(second / "05_instantiate" / "dropped_templates.parquet")
        assert dropped.set_index("template_id").loc[template_id, "reason"] == "review_rejected"
    segments = pd.read_parquet(second / "07_translate" / "segments.parquet").set_index("segment_id")
    fixed_fa = segments.loc[fixed_segment, "text_fa"]
    originals = pd.read_parquet(second / "05_instantiate" / "examples.parquet")
    asked = set(originals.loc[originals["question"] == fixed_fa, "example_id"])
    kept = en[en["source_example_id"].isin(asked)]
    assert len(kept) and (kept["question"] == fix).all()
    en_dropped = pd.read_parquet(second / "07_translate" / "dropped.parquet")
    rejected_en = segments.loc[rejected_segment, "text_en"]
    rows = en_dropped[en_dropped["context"] == rejected_en]
    assert len(rows) and (rows["reason"] == "review_rejected").all()
    assert rejected_en not in set(en["context"])
    statuses = pd.read_parquet(second / "08_review" / "decisions.parquet")
    status = statuses.set_index("item_id")["status"]
    assert (status[[rejected_context, disputed_context, fixed_segment, rejected_segment]] == "applied").all()
    assert set(status) == {"applied", "absent"}  # absent: the segments of the rejected templates' examples
    report = json.loads((second / "08_review" / "report.json").read_text(encoding="utf-8"))
    assert report["counts"]["reviewers"] == 2 and report["disagreements"] >= 1
    assert signalled  # readers named the group its classifier found weak: people decide, it is strong now
    now = pd.read_parquet(second / "06_names" / "proxy_strength.parquet")
    assert now.loc[now["group"] == weak, "strong"].all()
    fa_names = _release(second, "fa-names")
    assert not fa_names["context"].str.contains(unsignalling["machine_output"], regex=False).any()
    card = (second / "10_publish" / "hub" / "README.md").read_text(encoding="utf-8")
    assert "## Review by people" in card and "| contexts |" in card and "Krippendorff" in card
    assert main(["audit", str(second)]) == 0
    assert "disagreements:" in capsys.readouterr().out
    assert "Review by people" in (second / "audit.html").read_text(encoding="utf-8")
    assert main(["diff", str(first), str(second)]) == 0
    assert f"contexts {rejected_context}: decided reject" in capsys.readouterr().out
    accepted = next(c for c in contexts[2:] if c not in unanswered)
    example = fa[fa["template_id"] == accepted.split(":")[0]]["example_id"].iloc[0]
    assert main(["trace", example, "--run", str(second)]) == 0
    assert f"contexts {accepted}: accept by 2" in capsys.readouterr().out

    with config.open("a", encoding="utf-8") as handle:
        handle.write("require = true\n")
    third = _build(config, outputs, "third")
    reviewed = {c.split(":")[0] for c in contexts} - {c.split(":")[0] for c in (rejected_context, disputed_context)}
    reviewed -= {c.split(":")[0] for c in unanswered}
    templates = pd.read_parquet(third / "04_disambiguate" / "templates.parquet").set_index("template_id")
    human = set(templates.index[templates["disambiguated_source"].isin(["human", "override"])])
    assert set(_release(third, "fa")["template_id"]) <= reviewed | human
    dropped = pd.read_parquet(third / "05_instantiate" / "dropped_templates.parquet")
    assert set(dropped.loc[dropped["reason"] == "review_required", "template_id"]) == {
        c.split(":")[0] for c in unanswered
    }


OTHER = "{stereo} هیچ نوبتی نگرفت و {nonstereo} زودتر از همه نوبت گرفت."


@pytest.fixture
def fake_llm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeLLMServer, LLMConfig]]:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeLLMServer(expected_key=FAKE_API_KEY) as server:
        yield server, llm_config(server, tmp_path / "store.sqlite", max_retries=1, timeout=2.0)


def test_a_changed_llm_answer_makes_its_decision_stale_not_applied(
    fake_llm: tuple[FakeLLMServer, LLMConfig], tmp_path: Path
) -> None:
    server, config = fake_llm
    fix = "{stereo} با اپلیکیشن کنار نیامد، اما {nonstereo} نوبتش را گرفت."
    decisions = pd.DataFrame(
        [
            {"round_id": "r", "reviewer": name, "kind": "contexts", "item_id": "AGE-01-T1:biased",
             "hash": content_hash(GOOD), "verdict": "fix", "fix_text": fix, "reason": "", "answers": "{}"}
            for name in ("ana", "bob")
        ]
    )  # fmt: skip
    templates = pd.DataFrame([_template()])

    def run(answer: str, store: str) -> pd.Series:
        server.answer = lambda body: answer
        client = LLMClient(config, ResponseStore(tmp_path / store))
        out = disambiguate(
            templates, STEREOTYPES, NO_OVERRIDES, Prompts.load(), client, DisambiguateParams(), decisions=decisions
        )
        return out["templates"].iloc[0], out.report["review"]

    row, report = run(GOOD, "one.sqlite")
    assert (row["disambiguated_fa"], row["disambiguated_source"]) == (fix, "review_fix")
    assert report["by_status"] == {"applied": 1}
    row, report = run(OTHER, "two.sqlite")  # the model answers otherwise now: the decision judged another text
    assert (row["disambiguated_fa"], row["disambiguated_source"]) == (OTHER, "llm")
    assert report["stale"] == ["AGE-01-T1:biased"]
