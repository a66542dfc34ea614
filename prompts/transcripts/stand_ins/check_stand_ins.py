"""Check the stand-in answers against the program's own rules; exits non-zero (AssertionError) when a file is wrong.

Run from anywhere: ``python prompts/transcripts/stand_ins/check_stand_ins.py``. It validates every row of
``disambiguations.csv`` with :func:`pbbq.tasks.disambiguate.continuation_failures` and asserts that each designed
rule-breaker breaks exactly its one rule, the review case breaks a different rule on each of its three
attempts, every other answer passes, and that ``translations.csv`` and ``phrases.csv`` cover the templates.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from pbbq.tasks.core.inputs import PLACEHOLDER, load_overrides, load_questionnaire, load_templates  # noqa: E402
from pbbq.tasks.disambiguate import ASSIGNMENTS, COLUMNS, DisambiguateParams, continuation_failures  # noqa: E402
from pbbq.tasks.text.languages.fa import normalize_fa  # noqa: E402


def _contains(context: str, option: str) -> bool:
    """The translate stage's test that an option's English occurs in the English context (case-insensitive,
    leading article stripped)."""
    core = re.sub(r"^(the|a|an)\s+", "", option.strip(), flags=re.IGNORECASE).lower()
    return bool(core) and core in context.lower()


HERE = Path(__file__).resolve().parent
HUMAN = {"AGE-01-T1", "PRO-02-T1", "SES-01-T1", "ETH-03-T1", "GEN-01-T1", "REL-02-T1", "SEX-01-T1", "APP-01-T1"}
"""Templates that keep their human-written continuations in annotations/templates.csv."""
WRITTEN_NEW = {
    "AGE-02-T2",
    "PRO-01-T2",
    "EDU-02-T2",
    "DIS-02-T2",
    "DSE-01-T2",
    "DOM-02-T2",
    "FAM-01-T2",
    "NAT-02-T1",
    "APP-02-T2",
    "POL-02-T2",
}
"""Templates whose continuations were blank from the start: their stand-in answers are new text."""
GATE_DROPS = {
    "PRO-03-T1",
    "EDU-03-T1",
    "DSE-03-T1",
    "NAT-03-T1",
    "FAM-03-T1",
    "POL-03-T1",
    "GEN-03-T1",
    "AGE-01-T2",
    "SES-02-T2",
    "ETH-01-T2",
    "REL-01-T2",
    "DIS-01-T2",
    "PRP-02-T2",
    "NAT-01-T2",
}
"""Dropped by the survey filter or the annotation gate (annotations/README.md); GEN-01-T2 depends on how the
builder treats kappa 0/0, so it is avoided too for the designed cases."""
UNSURE = {"GEN-01-T2"}
BREAKERS = {
    ("AGE-03-T1", "biased"): "missing_nonstereo",
    ("EDU-01-T1", "counter_biased"): "extra_placeholder",
    ("SES-03-T1", "biased"): "not_persian",
    ("DOM-01-T2", "counter_biased"): "repeats_initial_text",
    ("PRP-01-T1", "biased"): "too_many_sentences",
    ("GEN-02-T1", "counter_biased"): "empty",
}
"""Pairs whose attempt 1 breaks exactly this rule and whose attempt 2 is valid."""
REVIEW = ("DOM-02-T1", "counter_biased")
REVIEW_FAILURES = ["too_many_sentences", "missing_stereo", "repeats_initial_text"]
OVERRIDE = ("ETH-02-T2", "biased")


def fill(text: str, stereo: str, nonstereo: str, lex: str) -> str:
    return text.replace("{stereo}", stereo).replace("{nonstereo}", nonstereo).replace("{lex}", lex)


def swap(text: str) -> str:
    return re.sub(r"\{(stereo|nonstereo)\}", lambda m: "{nonstereo}" if m.group(1) == "stereo" else "{stereo}", text)


def read(path: Path, columns: list[str]) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    assert list(frame.columns) == columns, (path.name, list(frame.columns))
    return frame


def main() -> None:
    stereotypes = load_questionnaire(ROOT / "survey" / "questionnaire.csv")
    templates = load_templates(ROOT / "annotations" / "templates.csv", stereotypes["stereotype_id"])
    by_id = templates.set_index("template_id", drop=False)
    assert len(templates) == 72
    params = DisambiguateParams()

    # templates.csv: exactly the 8 keep their human continuation, the other 64 are blank; none declares a mirror
    # exception, so no template brings a counter-biased text of its own (the mirror swaps the roles).
    filled = {t for t in templates["template_id"] if by_id.at[t, COLUMNS["biased"]]}
    assert filled == HUMAN, sorted(filled ^ HUMAN)
    assert not templates[COLUMNS["counter_biased"]].any() and not templates["mirror_exception"].any()
    blank = set(templates["template_id"]) - HUMAN
    assert len(blank) == 64 and WRITTEN_NEW.issubset(blank)

    # overrides: one pair, on a gated blank template, valid by the same rules.
    overrides = load_overrides(ROOT / "annotations" / "disambiguation_overrides.csv", templates)
    assert [(r.template_id, r.assignment) for r in overrides.itertuples()] == [OVERRIDE]
    assert OVERRIDE[0] in blank - GATE_DROPS - UNSURE
    override_text = overrides.iloc[0]["text"]
    assert continuation_failures(override_text, by_id.loc[OVERRIDE[0]], OVERRIDE[1], params) == []

    # disambiguations.csv
    answers = read(HERE / "disambiguations.csv", ["template_id", "assignment", "attempt", "answer"])
    answers["attempt"] = answers["attempt"].astype(int)
    assert not answers.duplicated(["template_id", "assignment", "attempt"]).any()
    expected_pairs = {(t, a) for t in blank for a in ASSIGNMENTS} - {OVERRIDE}
    pairs = set(zip(answers["template_id"], answers["assignment"], strict=True))
    assert pairs == expected_pairs, sorted(pairs ^ expected_pairs)
    final: dict[tuple[str, str], str] = {}
    counts = {"valid first answers": 0, "rule-breakers": 0, "review": 0}
    for (t, a), group in answers.groupby(["template_id", "assignment"], sort=True):
        group = group.sort_values("attempt")
        assert list(group["attempt"]) == list(range(1, len(group) + 1)), (t, a)
        failures = [continuation_failures(normalize_fa(x), by_id.loc[t], a, params) for x in group["answer"]]
        if (t, a) == REVIEW:
            assert failures == [[code] for code in REVIEW_FAILURES], (t, a, failures)
            counts["review"] += 1
            continue
        if (t, a) in BREAKERS:
            assert failures == [[BREAKERS[(t, a)]], []], (t, a, failures)
            counts["rule-breakers"] += 1
        else:
            assert failures == [[]], (t, a, failures)
            counts["valid first answers"] += 1
        text = group["answer"].iloc[-1]
        assert text == normalize_fa(text) and not re.search(r"[,;يك]", text), (t, a, "not clean Persian")
        assert set(PLACEHOLDER.findall(text)) == {"stereo", "nonstereo"}, (t, a)
        final[(t, a)] = text
    assert len({t for t, _ in BREAKERS}) == 6 and len(set(BREAKERS.values())) == 6
    designed = {t for t, _ in BREAKERS} | {REVIEW[0], OVERRIDE[0]}
    assert not designed & (GATE_DROPS | UNSURE | HUMAN), designed & (GATE_DROPS | UNSURE | HUMAN)
    assert REVIEW[0] not in {t for t, _ in BREAKERS}
    # the human text moved out of templates.csv is mirrored; the new ones hold both roles.
    for t in blank - WRITTEN_NEW:
        if (t, "biased") in final and (t, "counter_biased") in final:
            assert final[(t, "counter_biased")] == swap(final[(t, "biased")]), t

    # the Persian continuation each template ends up with (None: review, the template is dropped).
    used: dict[tuple[str, str], str | None] = {}
    for t in templates["template_id"]:
        for a, column in COLUMNS.items():
            if t in HUMAN:
                used[(t, a)] = by_id.at[t, column]
            elif (t, a) == OVERRIDE:
                used[(t, a)] = override_text
            else:
                used[(t, a)] = final.get((t, a))

    # phrases.csv: every entity and lexical variant once, keyed by the normalised Persian.
    phrases = read(HERE / "phrases.csv", ["kind", "fa", "en"])
    assert set(phrases["kind"]) == {"entity", "lex", "group"}
    assert not phrases.duplicated(["kind", "fa"]).any()
    assert (phrases["en"].str.strip() == phrases["en"]).all() and (phrases["en"] != "").all()
    english = {k: dict(zip(g["fa"], g["en"], strict=True)) for k, g in phrases.groupby("kind")}
    entities = {e for row in templates.itertuples() for e in (*row.stereo_entities, *row.nonstereo_entities)}
    variants = {v for row in templates.itertuples() for v in row.lexical_variants}
    assert set(english["entity"]) == entities, sorted(set(english["entity"]) ^ entities)
    assert set(english["lex"]) == variants, sorted(set(english["lex"]) ^ variants)
    for en in english["entity"].values():
        assert not re.match(r"(?i)(a|an|the)\s", en), en

    # translations.csv: all 72, placeholders in the same roles as the Persian.
    columns = [
        "template_id",
        "ambiguous_en",
        "disambiguated_biased_en",
        "disambiguated_counter_biased_en",
        "question_negative_en",
        "question_nonnegative_en",
    ]
    translations = read(HERE / "translations.csv", columns).set_index("template_id")
    assert sorted(translations.index) == sorted(templates["template_id"])
    # English of every Persian segment (entity, question, context) the examples can hold; the stand-in model
    # back-translates by looking the English up, so distinct Persian must get distinct English.
    segments: dict[str, str] = {}

    def segment(persian: str, english_text: str) -> None:
        assert segments.setdefault(persian, english_text) == english_text, (persian, english_text)

    for row in templates.itertuples():
        en = translations.loc[row.template_id]
        assert not re.search(r"[\u0600-\u06ff]", " ".join(en)), row.template_id
        lex = {"lex"} if row.lexical_variants else set()
        assert set(PLACEHOLDER.findall(en.ambiguous_en)) == {"stereo", "nonstereo"} | lex, row.template_id
        for a in ASSIGNMENTS:
            text = en[f"disambiguated_{a}_en"]
            assert set(PLACEHOLDER.findall(text)) == {"stereo", "nonstereo"}, (row.template_id, a)
        for q in ("negative", "nonnegative"):
            assert not PLACEHOLDER.findall(en[f"question_{q}_en"]), (row.template_id, q)
            assert en[f"question_{q}_en"].endswith("?"), (row.template_id, q)
            segment(getattr(row, f"question_{q}_fa"), en[f"question_{q}_en"])
        fa_b, fa_c = used[(row.template_id, "biased")], used[(row.template_id, "counter_biased")]
        if fa_b and fa_c and fa_c == swap(fa_b):
            assert en.disambiguated_counter_biased_en == swap(en.disambiguated_biased_en), row.template_id
        tails = [("", "")] + [
            (used[(row.template_id, a)], en[f"disambiguated_{a}_en"]) for a in ASSIGNMENTS if used[(row.template_id, a)]
        ]
        for stereo in row.stereo_entities:
            for nonstereo in row.nonstereo_entities:
                s, n = english["entity"][stereo], english["entity"][nonstereo]
                segment(stereo, s)
                segment(nonstereo, n)
                for lex_fa in row.lexical_variants or [""]:
                    lex_en = english["lex"].get(lex_fa, "")
                    for order in (False, True):
                        ambiguous_fa = swap(row.ambiguous_fa) if order else row.ambiguous_fa
                        ambiguous_en = swap(en.ambiguous_en) if order else en.ambiguous_en
                        for tail_fa, tail_en in tails:
                            context_fa = f"{ambiguous_fa} {tail_fa}".strip()
                            context_en = f"{ambiguous_en} {tail_en}".strip()
                            context_fa = fill(context_fa, stereo, nonstereo, lex_fa)
                            context_en = fill(context_en, s, n, lex_en)
                            assert _contains(context_en, s) and _contains(context_en, n), (row.template_id, context_en)
                            # the recorder writes 'an' for 'a' before any vowel letter: none may sound like a consonant
                            assert not re.search(r"\b[Aa] (?:[Uu]|[Ee]u|[Oo]ne\b)", context_en), context_en
                            segment(context_fa, context_en)
    distinct = len(set(segments.values()))
    assert distinct == len(segments), f"{len(segments) - distinct} English segment(s) shared by different Persian"
    contexts = len(segments)

    print(f"templates: {len(templates)} ({len(HUMAN)} keep their human continuations, {len(blank)} blank)")
    print(f"stand-in rows: {len(answers)} for {len(pairs)} (template, assignment) pairs; override: {OVERRIDE}")
    print(
        f"pairs valid at attempt 1: {counts['valid first answers']}; rule-breakers fixed at attempt 2: "
        f"{counts['rule-breakers']}; to review after 3 attempts: {counts['review']} {REVIEW}"
    )
    for (t, a), code in sorted(BREAKERS.items(), key=lambda kv: kv[1]):
        print(f"  attempt 1 of {t} {a}: {code}")
    print(f"  review {REVIEW[0]} {REVIEW[1]}: {', '.join(REVIEW_FAILURES)}")
    print(f"phrases: {len(english['entity'])} entities, {len(english['lex'])} lexical variants")
    print(f"translations: {len(translations)} templates; {contexts} Persian segments, each with its own English")
    print("OK")


if __name__ == "__main__":
    main()
