"""Check the stand-in answers against the program's own rules; exits non-zero (AssertionError) when a file is wrong.

Run from anywhere: ``python prompts/transcripts/stand_ins/check_stand_ins.py``. The disambiguation stage asks
for one continuation per template, the biased one; the counter-biased one is its mirror (``{stereo}`` and
``{nonstereo}`` exchanged, docs/architecture.md §3/§4). So it validates every row of ``disambiguations.csv`` (one
biased answer per template and attempt) with :func:`pbbq.tasks.disambiguate.continuation_failures` and asserts
that each designed rule-breaker breaks exactly its one rule, the review case breaks a different rule on each of
its three attempts, every other answer passes; that ``translations.csv`` and ``phrases.csv`` cover the templates
and give distinct Persian distinct English in every context the mirror makes; and that ``translations.ur.csv``
and ``phrases.ur.csv`` cover the same rows in normalised Urdu.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from pbbq.tasks.core.inputs import (  # noqa: E402
    PLACEHOLDER,
    load_overrides,
    load_questionnaire,
    load_templates,
    swap_roles,
)
from pbbq.tasks.disambiguate import DisambiguateParams, continuation_failures  # noqa: E402
from pbbq.tasks.text.languages import language  # noqa: E402
from pbbq.tasks.text.languages.fa import normalize_fa  # noqa: E402
from tests.fakes.stand_in_model import fill_english, swap_slots  # noqa: E402


def _contains(context: str, option: str) -> bool:
    """The translate stage's test that an option's English occurs in the English context (case-insensitive,
    leading article stripped)."""
    core = re.sub(r"^(the|a|an)\s+", "", option.strip(), flags=re.IGNORECASE).lower()
    return bool(core) and core in context.lower()


HERE = Path(__file__).resolve().parent
HUMAN = {"AGE-01-T1", "PRO-02-T1", "SES-01-T1", "ETH-03-T1", "GEN-01-T1", "REL-02-T1", "SEX-01-T1", "APP-01-T1"}
"""Templates that keep their human-written (biased) continuation in annotations/templates.csv."""
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
"""Templates whose continuation was blank from the start: its stand-in answer is new text."""
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
    "AGE-03-T1": "missing_nonstereo",
    "EDU-01-T1": "extra_placeholder",
    "SES-03-T1": "not_persian",
    "DOM-01-T2": "repeats_initial_text",
    "PRP-01-T1": "too_many_sentences",
    "GEN-02-T1": "empty",
}
"""Templates whose attempt 1 breaks exactly this rule and whose attempt 2 is valid."""
REVIEW = "DOM-02-T1"
REVIEW_FAILURES = ["too_many_sentences", "missing_nonstereo", "repeats_initial_text"]
OVERRIDE = ("ETH-02-T2", "biased")
MIRROR = {"biased": lambda text: text, "counter_biased": swap_slots}
"""Each assignment's English continuation from the template's one (biased) English: the counter-biased one is
its mirror, pronoun slots included, as the Persian's is (no template declares a mirror_exception)."""


def fill(text: str, stereo: str, nonstereo: str, lex: str) -> str:
    return text.replace("{stereo}", stereo).replace("{nonstereo}", nonstereo).replace("{lex}", lex)


def read(path: Path, columns: list[str]) -> pd.DataFrame:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    assert list(frame.columns) == columns, (path.name, list(frame.columns))
    return frame


def roles(text: str) -> set[str]:
    """The roles a text's placeholders and slots name (``{stereo:their}`` names ``stereo``)."""
    return {name.split(":")[0] for name in PLACEHOLDER.findall(text)}


def main() -> None:
    stereotypes = load_questionnaire(ROOT / "survey" / "questionnaire.csv")
    templates = load_templates(ROOT / "annotations" / "templates.csv", stereotypes["stereotype_id"])
    by_id = templates.set_index("template_id", drop=False)
    assert len(templates) == 72
    params = DisambiguateParams()

    # templates.csv: exactly the 8 keep their human continuation, the other 64 are blank; none declares a mirror
    # exception, so no template brings a counter-biased text of its own (the mirror swaps the roles).
    filled = {t for t in templates["template_id"] if by_id.at[t, "disambiguated_fa"]}
    assert filled == HUMAN, sorted(filled ^ HUMAN)
    assert not templates["disambiguated_counter_biased_fa"].any() and not templates["mirror_exception"].any()
    blank = set(templates["template_id"]) - HUMAN
    assert len(blank) == 64 and WRITTEN_NEW.issubset(blank)

    # overrides: one biased continuation, on a gated blank template, valid by the same rules.
    overrides = load_overrides(ROOT / "annotations" / "disambiguation_overrides.csv", templates)
    assert [(r.template_id, r.assignment) for r in overrides.itertuples()] == [OVERRIDE]
    assert OVERRIDE[0] in blank - GATE_DROPS - UNSURE
    override_text = overrides.iloc[0]["text"]
    assert continuation_failures(override_text, by_id.loc[OVERRIDE[0]], params) == []

    # disambiguations.csv: the biased answers of every blank template but the overridden one.
    answers = read(HERE / "disambiguations.csv", ["template_id", "assignment", "attempt", "answer"])
    answers["attempt"] = answers["attempt"].astype(int)
    assert (answers["assignment"] == "biased").all(), "only the biased continuation is asked for"
    assert not answers.duplicated(["template_id", "attempt"]).any()
    expected = blank - {OVERRIDE[0]}
    asked = set(answers["template_id"])
    assert asked == expected, sorted(asked ^ expected)
    final: dict[str, str] = {}
    counts = {"valid first answers": 0, "rule-breakers": 0, "review": 0}
    for t, group in answers.groupby("template_id", sort=True):
        group = group.sort_values("attempt")
        assert list(group["attempt"]) == list(range(1, len(group) + 1)), t
        failures = [continuation_failures(normalize_fa(x), by_id.loc[t], params) for x in group["answer"]]
        if t == REVIEW:
            assert failures == [[code] for code in REVIEW_FAILURES], (t, failures)
            counts["review"] += 1
            continue
        if t in BREAKERS:
            assert failures == [[BREAKERS[t]], []], (t, failures)
            counts["rule-breakers"] += 1
        else:
            assert failures == [[]], (t, failures)
            counts["valid first answers"] += 1
        text = group["answer"].iloc[-1]
        assert text == normalize_fa(text) and not re.search(r"[,;يك]", text), (t, "not clean Persian")
        assert set(PLACEHOLDER.findall(text)) == {"stereo", "nonstereo"}, t
        final[t] = text
    assert len(set(BREAKERS.values())) == 6
    designed = {*BREAKERS, REVIEW, OVERRIDE[0]}
    assert len(designed) == 8 and not designed & (GATE_DROPS | UNSURE | HUMAN), designed & (GATE_DROPS | UNSURE | HUMAN)

    # the Persian continuations each template ends up with: the biased one (the template's own, the override, or
    # the last stand-in answer) and its mirror; none for the review case, which the build leaves out.
    used: dict[tuple[str, str], str | None] = {}
    for t in templates["template_id"]:
        biased = by_id.at[t, "disambiguated_fa"] if t in HUMAN else override_text if t == OVERRIDE[0] else final.get(t)
        used[(t, "biased")] = biased
        used[(t, "counter_biased")] = swap_roles(biased) if biased else None

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

    # translations.csv: all 72, one continuation each (the counter-biased column is for a mirror_exception
    # only), placeholders in the same roles as the Persian.
    columns = [
        "template_id",
        "ambiguous_en",
        "disambiguated_en",
        "disambiguated_counter_biased_en",
        "question_negative_en",
        "question_nonnegative_en",
    ]
    translations = read(HERE / "translations.csv", columns).set_index("template_id")
    assert sorted(translations.index) == sorted(templates["template_id"])
    assert not translations["disambiguated_counter_biased_en"].any(), "no template declares a mirror_exception"
    gender = language("en").entity_gender
    # English of every Persian segment (entity, question, context) the examples can hold; the stand-in model
    # back-translates by looking the English up, so distinct Persian must get distinct English.
    segments: dict[str, str] = {}

    def segment(persian: str, english_text: str) -> None:
        assert segments.setdefault(persian, english_text) == english_text, (persian, english_text)

    for row in templates.itertuples():
        en = translations.loc[row.template_id]
        assert not re.search(r"[\u0600-\u06ff]", " ".join(en)), row.template_id
        lex = {"lex"} if row.lexical_variants else set()
        assert roles(en.ambiguous_en) == {"stereo", "nonstereo"} | lex, row.template_id
        assert roles(en.disambiguated_en) == {"stereo", "nonstereo"}, row.template_id
        for q in ("negative", "nonnegative"):
            assert not PLACEHOLDER.findall(en[f"question_{q}_en"]), (row.template_id, q)
            assert en[f"question_{q}_en"].endswith("?"), (row.template_id, q)
            segment(getattr(row, f"question_{q}_fa"), en[f"question_{q}_en"])
        tails = [("", "")] + [
            (used[(row.template_id, a)], mirror(en.disambiguated_en))
            for a, mirror in MIRROR.items()
            if used[(row.template_id, a)]
        ]
        for stereo in row.stereo_entities:
            for nonstereo in row.nonstereo_entities:
                s, n = english["entity"][stereo], english["entity"][nonstereo]
                cast = {"stereo": s, "nonstereo": n}
                genders = {role: gender(text) for role, text in cast.items()}
                segment(stereo, s)
                segment(nonstereo, n)
                for lex_fa in row.lexical_variants or [""]:
                    lex_en = english["lex"].get(lex_fa, "")
                    for order in (False, True):
                        ambiguous_fa = swap_roles(row.ambiguous_fa) if order else row.ambiguous_fa
                        ambiguous_en = swap_slots(en.ambiguous_en) if order else en.ambiguous_en
                        for tail_fa, tail_en in tails:
                            context_fa = fill(f"{ambiguous_fa} {tail_fa}".strip(), stereo, nonstereo, lex_fa)
                            composed = f"{ambiguous_en} {tail_en}".strip()
                            # the recorder writes 'an' for 'a' before any vowel letter: none may sound like a consonant
                            unarticled = fill(composed, s, n, lex_en)
                            assert not re.search(r"\b[Aa] (?:[Uu]|[Ee]u|[Oo]ne\b)", unarticled), unarticled
                            context_en = fill_english(composed, cast, genders, lex_en)
                            assert _contains(context_en, s) and _contains(context_en, n), (row.template_id, context_en)
                            segment(context_fa, context_en)
    distinct = len(set(segments.values()))
    assert distinct == len(segments), f"{len(segments) - distinct} English segment(s) shared by different Persian"
    contexts = len(segments)

    # translations.ur.csv and phrases.ur.csv: the same rows as the English, in the letters the builder normalises
    # Urdu to (README.ur.md); tests/test_urdu.py checks their slots, agreement and genders.
    normalize_ur = language("ur").normalize
    urdu = read(HERE / "translations.ur.csv", [c.replace("_en", "_ur") for c in columns])
    assert list(urdu["template_id"]) == list(translations.index)
    assert not urdu["disambiguated_counter_biased_ur"].any(), "no template declares a mirror_exception"
    for row in urdu.itertuples():
        for field in ("ambiguous_ur", "disambiguated_ur", "question_negative_ur", "question_nonnegative_ur"):
            text = getattr(row, field)
            assert text and normalize_ur(text) == text, (row.template_id, field, "not clean Urdu")
    urdu_phrases = read(HERE / "phrases.ur.csv", ["kind", "fa", "ur", "ur_oblique", "gender"])
    keys = list(zip(urdu_phrases["kind"], urdu_phrases["fa"], strict=True))
    assert keys == list(zip(phrases["kind"], phrases["fa"], strict=True)), "phrases.ur.csv rows differ"
    for row in urdu_phrases.itertuples():
        for form in (row.ur, row.ur_oblique):
            assert form and normalize_ur(form) == form, (row.kind, row.fa, "not clean Urdu")
        assert row.gender in ("", "m", "f"), (row.kind, row.fa, row.gender)

    print(f"templates: {len(templates)} ({len(HUMAN)} keep their human continuation, {len(blank)} blank)")
    print(f"stand-in rows: {len(answers)} for {len(asked)} templates (biased; the mirror is counter-biased)")
    print(f"override: {OVERRIDE}")
    print(
        f"valid at attempt 1: {counts['valid first answers']}; rule-breakers fixed at attempt 2: "
        f"{counts['rule-breakers']}; to review after 3 attempts: {counts['review']} ({REVIEW})"
    )
    for t, code in sorted(BREAKERS.items(), key=lambda kv: kv[1]):
        print(f"  attempt 1 of {t}: {code}")
    print(f"  review {REVIEW}: {', '.join(REVIEW_FAILURES)}")
    print(f"phrases: {len(english['entity'])} entities, {len(english['lex'])} lexical variants")
    print(f"translations: {len(translations)} templates; {contexts} Persian segments, each with its own English")
    print(f"urdu: {len(urdu)} templates, {len(urdu_phrases)} phrases")
    print("OK")


if __name__ == "__main__":
    main()
