"""The Urdu language module (tasks/text/languages/ur.py) and the sample's Urdu stand-ins and prompts."""

import csv
import re
from pathlib import Path

import pytest

from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.text.languages import ur
from tests.fakes.stand_in_model import LEX_GENDERS, NO_LEX, URDU_SLOT, agreement, fill_urdu, swap_urdu

URDU = ur.LANGUAGE

AR_YEH, AR_KAF, AR_HEH, TEH_MARBUTA = "\u064a", "\u0643", "\u0647", "\u0629"
ZABAR, PESH, ZER, SHADDA, KHARI_ZABAR, HAMZA = "\u064e", "\u064f", "\u0650", "\u0651", "\u0670", "\u0654"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (f"{AR_KAF}ون ا{AR_YEH}پ سے وقت ن{AR_HEH}{AR_YEH}ں لے س{AR_KAF}ا؟", "کون ایپ سے وقت نہیں لے سکا؟"),
        ("وہ بہت اچھى ہے۔", "وہ بہت اچھی ہے۔"),
        (f"ب{SHADDA}چ{ZABAR}ے نے ک{ZABAR}ہا", "بچے نے کہا"),
        (f"ا{PESH}س نے وزارت{ZER} تعلیم کو خط لکھا", "اس نے وزارت تعلیم کو خط لکھا"),
        (f"صلو{KHARI_ZABAR}ۃ", "صلوہ"),
        (f"زکو{KHARI_ZABAR}{TEH_MARBUTA}", "زکوہ"),
        ("اس کے پاس ۲۵ سال کا تجربہ ہے، وہ ۱۹۴۷ء میں پیدا ہوا", "اس کے پاس 25 سال کا تجربہ ہے، وہ 1947ء میں پیدا ہوا"),
        ("عمر ٣٠ سال", "عمر 30 سال"),
        (f"اسلامی جمہوریہ{HAMZA} پاکستان", "اسلامی جمہوریۂ پاکستان"),
        ("  بوڑھا\n\tآدمی  ", "بوڑھا آدمی"),
        ("مریض\u200cکا", "مریض\u200cکا"),
    ],
)
def test_normalize_gives_urdu_letters_ascii_digits_and_no_diacritics(raw: str, normalized: str) -> None:
    assert URDU.normalize(raw) == normalized
    assert URDU.normalize(normalized) == normalized


def test_normalize_keeps_the_letters_urdu_tells_apart() -> None:
    """ھ is not ہ (بھائی, not بہائی), ں not ن, آ not ا, ے not ی: none is merged into its look-alike."""
    text = "بھائی نے ہاں کہا، آدمی آئے۔"
    assert URDU.normalize(text) == text


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("کون آیا؟ وہ، میں اور تم۔", ["کون", "آیا", "؟", "وہ", "،", "میں", "اور", "تم", "۔"]),
        ('اس نے کہا: "ٹھیک ہے"۔', ["اس", "نے", "کہا", ":", '"', "ٹھیک", "ہے", '"', "۔"]),
        ("اس کی عمر 30۔ قیمت 3.5 روپے؛", ["اس", "کی", "عمر", "30", "۔", "قیمت", "3.5", "روپے", "؛"]),
        ("مریض\u200cکا کمرہ (نمبر 12)!", ["مریض\u200cکا", "کمرہ", "(", "نمبر", "12", ")", "!"]),
    ],
)
def test_tokenize_splits_off_urdu_and_ascii_punctuation(text: str, tokens: list[str]) -> None:
    assert URDU.tokenize(text) == tokens
    assert URDU.words(tokens) == [token for token in tokens if token not in '۔،؟؛:"()!']


def test_stop_words_are_urduhacks_list_normalised() -> None:
    stop = URDU.stop_words
    assert len(stop) == 458
    assert {"کا", "کی", "کے", "ہے", "اور", "میں", "نہیں", "وہ"} <= stop
    assert all(URDU.normalize(word) == word and not word.startswith("#") for word in stop)
    assert "آدمی" not in stop


def test_unknown_phrases_give_urdu_for_every_persian_phrasing() -> None:
    rows = _rows(REPO_ROOT / "annotations" / "unknown_phrases.csv")
    phrases = {row["phrase_fa"]: row["phrase_ur"] for row in rows}
    assert all(phrases.values()) and len(phrases) == len(rows)
    assert len(set(phrases.values())) == len(rows)
    assert all(URDU.normalize(phrase) == phrase and "?" not in phrase for phrase in phrases.values())


@pytest.mark.parametrize(
    ("phrase", "gender"),
    [
        ("ستر سالہ آدمی", "male"),
        ("نوجوان لڑکی جو اپنے والد کے ساتھ رہتی ہے", "female"),
        ("دولہا کی ماں", "female"),
        ("لڑکی کا باپ", "male"),
        ("بوڑھی ٹیکسی ڈرائیور", "female"),
        ("بوڑھا ٹیکسی ڈرائیور", "male"),
        ("گاؤں کی ڈاکٹر", "female"),
        ("ٹیکسی چلانے والا", "male"),
        ("ٹیکسی ڈرائیور", "none"),
        ("بزرگ ریٹائرڈ شخص", "none"),
        ("نوجوان", "none"),
        ("والدین", "none"),
    ],
)
def test_entity_gender_reads_nouns_and_agreement(phrase: str, gender: str) -> None:
    assert URDU.entity_gender(phrase) == gender


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("ستر سالہ آدمی", 70),
        ("70 سالہ آدمی", 70),
        ("۷۰ سالہ آدمی", 70),
        ("پچیس سال کی لڑکی", 25),
        ("دس برس کا بچہ", 10),
        ("اکیس سالہ طالب علم", 21),
        ("ننانوے سالہ خاتون", 99),
        ("دو سال پہلے", None),
        ("بوڑھا آدمی", None),
    ],
)
def test_explicit_age_reads_numbers_and_years(text: str, age: int | None) -> None:
    assert URDU.explicit_age(text) == age


ENTITIES = ["بوڑھا آدمی", "نوجوان لڑکی", "ٹیکسی ڈرائیور"]


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("بوڑھا آدمی کلرک سے مدد مانگتی رہی اور ایپ انسٹال نہیں کر سکا۔", ["مانگتی", "رہی"]),
        ("نوجوان لڑکی لڑ چکی ہے اور اسے تنبیہ مل چکی ہے۔", []),
        ("بوڑھے آدمی نے بہت کوشش کی لیکن وہ ایپ انسٹال نہیں کر سکی۔", ["سکی"]),
        ("نوجوان لڑکی چند منٹ میں وقت لے چکا تھا۔", ["چکا", "تھا"]),
        ("نوجوان لڑکی بھی کل بینک جائے گا۔", ["گا"]),
        ("بوڑھا آدمی ایپ انسٹال نہیں کر سکا، لیکن نوجوان لڑکی نے چند منٹ میں وقت لے لیا۔", []),
        ("نوجوان لڑکی نے کھانا کھایا تھا۔", []),
        ("بوڑھے آدمی کی بیٹی بینک گئی۔", []),
        ("نوجوان لڑکی ہنستے ہوئے بینک گئی۔", []),
        ("بوڑھا آدمی اور نوجوان لڑکی قطار میں کھڑی تھی۔", []),
        ("ٹیکسی ڈرائیور بینک گئی۔", []),
        ("نوجوان لڑکی آئی تاکہ وہ جلدی جا سکے۔", []),
    ],
)
def test_gender_failures_flag_verbs_that_contradict_their_subjects_gender(text: str, flagged: list[str]) -> None:
    failures = URDU.gender_failures(text, ENTITIES, "context")
    assert [failure.message.split("'")[1] for failure in failures] == flagged
    assert {failure.code for failure in failures} <= {"verb_gender"}


def test_gender_failures_in_a_question_allow_only_the_masculine_for_anyone() -> None:
    assert URDU.gender_failures("کون ایپ سے وقت نہیں لے سکا؟", ENTITIES, "question") == []
    [(code, message)] = URDU.gender_failures("کون ایپ سے وقت نہیں لے سکی؟", ENTITIES, "question")
    assert code == "verb_gender" and "'سکی' is feminine" in message and "بوڑھا آدمی" in message
    assert URDU.gender_failures("کسے ساتھیوں کی مدد درکار تھی؟", ENTITIES, "question") == []
    assert URDU.gender_failures("کس کی معلومات اچھی تھیں؟", ENTITIES, "question") == []
    women = ["نوجوان لڑکی", "بوڑھی عورت"]
    assert URDU.gender_failures("کون ایپ سے وقت نہیں لے سکی؟", women, "question") == []


def test_scaffold_and_glossary_column_are_urdu() -> None:
    assert (URDU.code, URDU.name, URDU.glossary_column, URDU.unknown_column) == ("ur", "Urdu", "term_ur", "phrase_ur")
    assert URDU.scaffold["question"] == "سوال" and URDU.scaffold["answer"] == "جواب"
    assert URDU.normalize(URDU.scaffold["instruction"]) == URDU.scaffold["instruction"]
    assert URDU.script.search("وہ") and not URDU.script.search("He, 25۔")
    assert ur.mention_pattern("بوڑھا آدمی").search("بوڑھے آدمی نے کہا")


# --- the sample's Urdu stand-ins (prompts/transcripts/stand_ins/*.ur.csv) and the Urdu glossary ----------------

STAND_INS = REPO_ROOT / "prompts" / "transcripts" / "stand_ins"
FIELDS = ("ambiguous", "disambiguated", "question_negative", "question_nonnegative")


@pytest.fixture(scope="module")
def translations() -> list[dict[str, str]]:
    return _rows(STAND_INS / "translations.ur.csv")


@pytest.fixture(scope="module")
def phrases() -> dict[tuple[str, str], dict[str, str]]:
    return {(row["kind"], row["fa"]): row for row in _rows(STAND_INS / "phrases.ur.csv")}


def test_urdu_translations_hold_every_template_with_the_englishs_roles(translations: list[dict[str, str]]) -> None:
    english = _rows(STAND_INS / "translations.csv")
    assert [row["template_id"] for row in translations] == [row["template_id"] for row in english]
    for urdu, row in zip(translations, english, strict=True):
        for field in FIELDS:
            text = urdu[f"{field}_ur"]
            roles = {match.group(1) for match in URDU_SLOT.finditer(text)} - {"pair"}
            assert roles == {m.group(1) for m in URDU_SLOT.finditer(row[f"{field}_en"])}, (urdu["template_id"], field)
            assert URDU.normalize(text) == text and text[-1] == ("؟" if field.startswith("question") else "۔")
            for match in URDU_SLOT.finditer(text):
                assert match.group(2) in (None, "oblique") or match.group(2).count("|") == 1, match.group()


def test_urdu_agreement_slots_give_the_masculine_then_the_feminine(translations: list[dict[str, str]]) -> None:
    forms = [m.group(2) for row in translations for f in FIELDS for m in URDU_SLOT.finditer(row[f"{f}_ur"])]
    pairs = [agreement(form) for form in forms if form not in (None, "oblique")]
    assert len(pairs) > 100
    for masculine, feminine in pairs:
        assert {ur.VERB_GENDER.get(w) for w in masculine.split()} <= {"male", None} and masculine != feminine
        assert {ur.VERB_GENDER.get(w) for w in feminine.split()} <= {"female", None}, (masculine, feminine)


def test_urdu_contexts_agree_with_every_pair_the_sample_builds(
    translations: list[dict[str, str]], phrases: dict[tuple[str, str], dict[str, str]]
) -> None:
    """Each context and question, filled with every pair of a template's entities in both roles, holds both
    entities and passes the Urdu gender check (a slot written the wrong way round fails here)."""
    from pbbq.tasks.text.languages.fa import normalize_fa

    templates = {row["template_id"]: row for row in _rows(REPO_ROOT / "annotations" / "templates.csv")}
    checked = 0
    for row in translations:
        template = templates[row["template_id"]]
        entity = {
            role: [phrases["entity", normalize_fa(e)] for e in template[f"{role}_entities"].split(";")]
            for role in ("stereo", "nonstereo")
        }
        lexes = [phrases["lex", normalize_fa(v)] for v in template["lexical_variants"].split(";") if v] or [None]
        for stereo in entity["stereo"]:
            for nonstereo in entity["nonstereo"]:
                cast = {
                    role: (p["ur"], p["ur_oblique"], URDU.entity_gender(p["ur"]))
                    for role, p in (("stereo", stereo), ("nonstereo", nonstereo))
                }
                urdu = [direct for direct, _, _ in cast.values()]
                for lex in lexes:
                    variant = (lex["ur"], lex["ur_oblique"], LEX_GENDERS.get(lex["gender"], "")) if lex else NO_LEX
                    for text in (row["ambiguous_ur"], row["disambiguated_ur"], swap_urdu(row["disambiguated_ur"])):
                        filled = fill_urdu(text, cast, variant)
                        assert URDU.gender_failures(filled, urdu, "context") == [], filled
                        for direct, _, _ in cast.values():
                            assert ur.mention_pattern(direct).search(filled), (direct, filled)
                    for field in ("question_negative_ur", "question_nonnegative_ur"):
                        assert URDU.gender_failures(fill_urdu(row[field], cast, variant), urdu, "question") == []
                    checked += 1
    assert checked > 300


def test_urdu_phrases_give_every_persian_phrase_its_gender_age_and_glossary_terms(
    phrases: dict[tuple[str, str], dict[str, str]],
) -> None:
    """Every row of phrases.csv has its Urdu; an entity keeps the gender the Persian gives (or, where the Persian
    gives none, at most Urdu's masculine agreement, no gendered noun) and its stated age; each glossary term of the
    Persian is named by its Urdu term; the oblique form differs only in the -ا/-ہ → -ے of its words."""
    import pandas as pd

    from pbbq.tasks.text.languages import language
    from pbbq.tasks.translate.glossary import Glossary

    assert sorted(phrases) == sorted((row["kind"], row["fa"]) for row in _rows(STAND_INS / "phrases.csv"))
    glossary = Glossary(pd.read_csv(REPO_ROOT / "annotations" / "glossary.csv"), language("ur"))
    for (kind, persian), row in phrases.items():
        direct, oblique = row["ur"], row["ur_oblique"]
        assert URDU.normalize(direct) == direct and URDU.normalize(oblique) == oblique
        for word, form in zip(direct.split(), oblique.split(), strict=True):
            assert form == word or (word[-1] in "اہ" and form == word[:-1] + "ے"), (direct, oblique)
        for _, term in glossary.terms_in(persian):
            assert re.search(rf"(?<!\S){re.escape(term)}", direct), (persian, term, direct)
        if kind == "entity":
            fa, urdu = language("fa").entity_gender(persian), URDU.entity_gender(direct)
            assert fa == urdu or (fa == "none" and urdu == "male" and not ur.gendered_noun(direct)), (persian, direct)
            assert language("fa").explicit_age(persian) == URDU.explicit_age(direct), (persian, direct)


def test_urdu_glossary_names_each_group_once() -> None:
    english = {row["term_fa"]: row["term_en"] for row in _rows(REPO_ROOT / "annotations" / "glossary.csv")}
    urdu = {row["term_fa"]: row["term_ur"] for row in _rows(REPO_ROOT / "annotations" / "glossary.csv")}
    assert list(urdu) == list(english)
    assert all(URDU.normalize(term) == term and term for term in urdu.values())
    pairs = {(english[fa], urdu[fa]) for fa in urdu}
    assert len({en for en, _ in pairs}) == len({u for _, u in pairs}) == len(pairs)


@pytest.mark.parametrize(
    ("urdu", "english"),
    [
        ("translate.fa-ur.txt", "translate.fa-en.txt"),
        ("translate.input.fa-ur.txt", "translate.input.fa-en.txt"),
        ("translate.retry.fa-ur.txt", "translate.retry.fa-en.txt"),
        ("back_translate.ur-fa.txt", "back_translate.en-fa.txt"),
        ("back_translate.input.ur-fa.txt", "back_translate.input.en-fa.txt"),
    ],
)
def test_urdu_prompts_take_the_english_prompts_placeholders(urdu: str, english: str) -> None:
    from string import Template

    text = (REPO_ROOT / "prompts" / urdu).read_text(encoding="utf-8")
    assert set(Template(text).get_identifiers()) == set(
        Template((REPO_ROOT / "prompts" / english).read_text(encoding="utf-8")).get_identifiers()
    )
    if urdu.startswith("back_translate"):
        assert "<urdu_text>" in text and "english" not in text.lower()
    if not urdu.startswith(("back_translate.input", "translate.input")):
        assert "Urdu" in text


@pytest.mark.parametrize(
    ("phrase", "head"),
    [
        ("دولہا کی ماں", ["ماں", "کی"]),
        ("الگ ہو چکے ماں باپ کا بیٹا", ["بیٹا", "کا"]),
        ("دوسری منزل کا کرایہ دار", ["دار", "کرایہ"]),
        ("بہن بھائیوں کے بغیر نوجوان", ["نوجوان", "بغیر"]),
        ("نوجوان لڑکی جو اپنے والد کے ساتھ رہتی ہے", ["لڑکی", "نوجوان"]),
    ],
)
def test_head_words_cut_a_genitive_complement_but_keep_the_genitive_that_agrees(phrase: str, head: list[str]) -> None:
    assert URDU.head_words(phrase) == head


def test_the_urdu_module_passes_the_registrys_member_checks() -> None:
    """What the registry asks of every language (tests/test_languages.py on the languages branch)."""
    text = URDU.normalize('نرس نے کہا: "میری ماں ۴۵ سال کی ہے۔"')
    assert URDU.normalize(text) == text and URDU.explicit_age(text) == 45
    tokens = URDU.tokenize(text)
    assert URDU.words(tokens) == [token for token in tokens if any(c.isalnum() for c in token)]
    assert URDU.gender_failures("", [], "context") == []


@pytest.mark.parametrize("text", ["بوڑھا آدمی", "یہ بوڑھا آدمی۔", "کمرے میں بوڑھا آدمی"])
def test_a_clause_that_ends_with_its_subject_has_no_verb_to_check(text: str) -> None:
    """A subject with nothing after it (a caption, a fragment) agrees with nothing: no failure, and no error."""
    assert URDU.gender_failures(text, ["بوڑھا آدمی"], "context") == []
