"""English: sacrebleu's tokens, NLTK's stop words, its person cues (compounds read by their morphology) and the
pronoun checks a translation into English must pass (PakBBQ §3.3); the word lists are in ``en.toml``."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from functools import cache, partial

from ...imports import one_import_at_a_time
from . import NONE, GenderFailure, Language, gender_table, load_data, unchanged


@cache
def _tokenizer_13a() -> Callable[[str], str]:
    """sacrebleu's default BLEU tokenizer (mteval-v13a), built once, without the caches of its two steps: each keeps
    its last 65,536 lines for the whole process (an lru_cache of the class), a quarter of a gigabyte of a config's
    long contexts, which diversity tokenises once each."""
    with one_import_at_a_time():
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
        from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

    tokenizer = Tokenizer13a()
    tokenizer._post_tokenizer = partial(TokenizerRegexp.__call__.__wrapped__, tokenizer._post_tokenizer)
    return partial(Tokenizer13a.__call__.__wrapped__, tokenizer)


def tokenize_en(text: str) -> list[str]:
    """Tokens of an English text exactly as sacrebleu's BLEU sees them: the 13a tokenizer, then whitespace."""
    return _tokenizer_13a()(text.rstrip()).split()


_DATA = load_data(__file__)
_PERSON_GENDER = gender_table(_DATA["person_gender"])
_KIN_GENDER: dict[str, str | None] = {
    word: None if gender == "either" else gender for word, gender in gender_table(_DATA["kin_gender"]).items()
}
_GENDERED_SUFFIXES: tuple[tuple[str, str], ...] = tuple((end, gender) for end, gender in _DATA["gendered_suffixes"])
_NOT_GENDERED = frozenset(_DATA["not_gendered"])
_NUMBERS: dict[str, int] = _DATA["numbers"]
_NUMBER = "|".join(sorted(_NUMBERS, key=len, reverse=True))
_AGE = re.compile(rf"\b((?:(?:{_NUMBER})-?)+|\d+)[- ]years?[- ]old\b", re.IGNORECASE)
_CLAUSE = re.compile(r"\s(?:who|whose|that|with|of|from)\s", re.IGNORECASE)


@cache
def english_word_gender(word: str) -> str | None:
    """The gender an English noun gives (``female``, ``male``) or None: a person or kin noun, or a compound on a
    gendered ending ('businessman', 'sportswoman', 'schoolgirl') unless it is one of the words listed as not
    gendered ('German', 'human'). A hyphenated word is read by its last part ('mother-in-law' as a whole,
    'middle-aged' not at all)."""
    word = word.lower()
    listed = _PERSON_GENDER.get(word) or _KIN_GENDER.get(word)
    if listed or word in _KIN_GENDER or word in _NOT_GENDERED:
        return listed
    last = word.rsplit("-", 1)[-1]
    if last != word:
        return english_word_gender(last)
    return next((gender for suffix, gender in _GENDERED_SUFFIXES if word.endswith(suffix)), None)


def explicit_age(text: str) -> int | None:
    """The age an English entity states ('seventy-year-old', 'a 70-year-old'), if any."""
    match = _AGE.search(text)
    if match is None:
        return None
    number = match.group(1)
    return int(number) if number.isdigit() else sum(_NUMBERS[w] for w in re.findall(_NUMBER, number.lower()))


def head_words(text: str) -> list[str]:
    """The words of an English entity's head phrase, head first: its head comes last ('the groom's mother'), so the
    words are returned last first; a relative clause or complement ('the mother of the groom') is cut off."""
    head = _CLAUSE.split(f" {text} ", maxsplit=1)[0]
    return re.findall(r"[a-z]+(?:-[a-z]+)*", head.lower())[::-1]


# --- pronoun checks of a translation into English ----------------------------------------------------------------

PRONOUNS = {"male": "he/him/his", "female": "she/her/hers", NONE: "they/them/their"}
THEY = frozenset({"they", "them", "their", "theirs", "themselves", "themself"})
"""English pronouns without a gender: for a person they are singular 'they' (Persian او)."""
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")


def _mentions(text: str, entities: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, entity) of every mention of an entity in ``text``; a longer entity wins over one inside it
    ('woman with HIV' over 'man with HIV')."""
    spans: list[tuple[int, int, str]] = []
    for entity in sorted(set(entities), key=len, reverse=True):
        for match in LANGUAGE.mention(entity).finditer(text):
            if not any(start < match.end() and match.start() < end for start, end, _ in spans):
                spans.append((match.start(), match.end(), entity))
    return sorted(spans)


def _sentence_of(text: str) -> Callable[[int], int]:
    ends = [match.end() for match in _SENTENCE_END.finditer(text)]
    return lambda position: bisect_right(ends, position)


def _antecedents(position: int, mentions: list[tuple[int, int, str]], sentence: Callable[[int], int]) -> list[str]:
    """The entities a pronoun at ``position`` may refer to: those mentioned before it in its sentence, else
    those of the last earlier sentence that mentions any."""
    here = sentence(position)
    before = [entity for start, _, entity in mentions if start < position and sentence(start) == here]
    if before:
        return list(dict.fromkeys(before))
    earlier = [(sentence(start), entity) for start, _, entity in mentions if sentence(start) < here]
    if not earlier:
        return []
    last = max(index for index, _ in earlier)
    return list(dict.fromkeys(entity for index, entity in earlier if index == last))


def _pronouns(english: str, mentions: list[tuple[int, int, str]]) -> list[tuple[re.Match[str], str | None]]:
    """Each pronoun of the text outside the mentions (a person's pronoun, gendered or 'they'), with its gender (None
    for 'they'). The mentions do not overlap, so the one a word may fall in is the last starting at or before it."""
    starts = [start for start, _, _ in mentions]
    found = []
    for match in _WORD.finditer(english):
        word = match.group().lower()
        gender = LANGUAGE.pronoun_gender.get(word)
        if gender is None and word not in THEY:
            continue
        inside = bisect_right(starts, match.start()) - 1
        if inside < 0 or match.start() >= mentions[inside][1]:
            found.append((match, gender))
    return found


def pronoun_failures(english: str, entities_en: Sequence[str], kind: str) -> list[GenderFailure]:
    """Pronouns that do not agree with the gender (:meth:`Language.entity_gender`) of the person they refer to.

    In a context a pronoun refers to an entity mentioned before it in its sentence, else in the last sentence
    before that mentions one (a heuristic that may ask again where a reader would not). A gendered pronoun
    fails when every such entity has a known gender and none is the pronoun's; 'they' fails when it can refer
    to one entity only and that entity's gender is known (singular 'they' for a man). A question names no one:
    a gendered pronoun in it fails when any entity it is asked about has another known gender."""
    if _PERSON_PRONOUNS.isdisjoint(map(str.lower, _WORD.findall(english))):
        return []  # no pronoun: nothing to check, no mention to look up
    entities = list(dict.fromkeys(entities_en))
    mentions = _mentions(english, entities) if kind == "context" else []
    pronouns = _pronouns(english, mentions)
    if not pronouns:
        return []
    genders = {entity: LANGUAGE.entity_gender(entity) for entity in entities}
    sentence = _sentence_of(english)
    failures: list[GenderFailure] = []
    for match, gender in pronouns:
        if kind == "question":
            other = [e for e in entities if genders[e] not in (gender, NONE)] if gender else []
            if other:
                detail = (
                    f"'{match.group()}' gives a gender to the person the question asks about, who may be the "
                    f"{other[0]} ({genders[other[0]]}): use {PRONOUNS[NONE]}."
                )
                failures.append(GenderFailure("pronoun_gender", detail))
            continue
        candidates = _antecedents(match.start(), mentions, sentence)
        known = [genders[e] for e in candidates if genders[e] != NONE]
        if gender and candidates and len(known) == len(candidates) and gender not in known:
            described = " and ".join(f"the {e} is {genders[e]}" for e in candidates)
            detail = f"'{match.group()}' is {gender} but can only refer to someone who is not: {described}."
            failures.append(GenderFailure("pronoun_gender", detail))
        elif gender is None and len(candidates) == 1 and known:
            entity = candidates[0]
            detail = (
                f"'{match.group()}' refers to the {entity}, who is {genders[entity]}: use {PRONOUNS[genders[entity]]}."
            )
            failures.append(GenderFailure("singular_they", detail))
    return list(dict.fromkeys(failures))


LANGUAGE = Language(
    code="en",
    name="English",
    script=re.compile(r"[A-Za-z]"),
    script_name="Latin",
    identify_as="en",
    normalize=unchanged,
    tokenize=tokenize_en,
    head_words=head_words,
    explicit_age=explicit_age,
    scaffold={"question": "Q", "answer": "A", "instruction": "Answer with the letter of one option only."},
    glossary_column="term_en",
    unknown_column="phrase_en",
    load_stop_words=_DATA["stop_words"].split,
    cased=True,
    person_gender=_PERSON_GENDER,
    kin_gender=_KIN_GENDER,
    pronoun_gender=gender_table(_DATA["pronoun_gender"]),
    age_words=gender_table(_DATA["age_words"]),
    maturity=gender_table(_DATA["maturity"]),
    spouses=frozenset(_DATA["spouses"]),
    word_gender=english_word_gender,
    gender_failures=pronoun_failures,
    article=re.compile(r"^(the|a|an)\s+", re.IGNORECASE),
    option_article="The ",
)
_PERSON_PRONOUNS = THEY | frozenset(LANGUAGE.pronoun_gender)
"""Every word :func:`pronoun_failures` checks."""
