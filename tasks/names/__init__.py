"""Name proxies (stage 06): explicit group mentions replaced by culturally indicative first names (Obscured but
Not Erased §4.1, §4.1.1, Appendix C; docs/architecture.md, the names stage). PBBQ names its Persian examples
(``fa`` → ``fa-names``), the adaptation path its English ones (``en`` → ``en-names``, :func:`names_stage`); "fa" below
stands for the source config.

An example is mapped when both of its entities name a group of the name table (:mod:`pbbq.tasks.names.tables`:
per language and group 5 female and 5 male first names, each with the birth years it is common for). Each of
its variants, one per sub-seed, gives each entity one name and replaces every mention of the entity with it, in
the context, the question and the entity's option (:mod:`pbbq.tasks.names.patterns`); ``answer_info`` takes the new
option texts and keeps its group tags; the 'unknown' option, ``answer_roles``, ``additional_metadata``, the label,
``target_loc`` and the entity columns carry over unchanged, and ``source_example_id`` links the variant to the
original. The names are drawn as :mod:`pbbq.tasks.names.draw` says: seeded per sub-seed and example, both names of a
pair from one era and, where the entities share a gender or have none, of one gender.

**Distinct rows.** The three variants of an example differ: a draw that repeats an earlier variant's names is
drawn again from its own stream. Two examples can also read the same once named (their entities differ only in
words the names replace: 'کارگر افغانستانی' and 'جوان افغانستانی' both become a name); such examples form one
class, drawn in the order of their ids, and a draw that repeats a pair any member of the class already has is
drawn again too. An example whose class leaves it fewer free name pairs than variants is unmapped
(``too_few_distinct_names``). So no two rows of the output are the same text.

**Strong proxies only.** A group's names are measured for how well they tell it from the other groups of its
category (:mod:`pbbq.tasks.names.strength`); an example naming a group under the threshold is left out of the
variants with the reason ``weak_proxy`` (the ``weak_proxy`` table: it stays in ``fa``, and the funnel counts it).

Examples that cannot be mapped (an entity that no name can stand for, such as an age group or a profession; a
mention no pattern covers; two entities of one group; age bands that share no era; contradicting gender cues)
are never passed through: they go to the ``unmapped`` table with their reason. They are not drops: no name table
covers them, and they stay in ``fa``; the report counts them as ``not_covered``. The stage's only drops are the
weak proxies.

**Split by template** (docs/architecture.md §9). A template's examples are named from its own rows
(:func:`template_names`) and the groups every template of its language and category names (:func:`named_groups`:
the proxy strength is measured on all of them; each template's own, :func:`template_groups`, made again only when
it changed), so a rebuild in which one template changed names that template again, and every template of its
category when the category's groups changed; :func:`named_output` orders the parts' rows as the stage on whole
tables does, and runs it on whole tables when two templates' examples read the same once named (their names are
drawn against each other).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd
import pyarrow as pa

from ..core.artifacts import REPO_ROOT, StageOutput, count_reasons, sha256_bytes
from ..core.inputs import TEMPLATES
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED, OPTIONS
from ..core.stage import SEED, Client, Input, Resource, Separable, Stage, Table, listed, ordered
from ..llm import LLMClient, LLMRequest
from ..review.names import reviewed_name_table, with_human_verdict
from ..text.cues import NONE, entity_age_band
from .draw import Drawn, PairRequest, Pools, TooFewPairs, draw_variants, name_pools, pair_eras, sub_seeds
from .patterns import NEUTRAL, UNDECIDED, fill, persian_entity, reference_gender, rewrite
from .strength import MEASURE, PROXY_STRENGTH, proxy_strength
from .tables import GENDERS, LANGUAGES, entity_mentions, group_words, load_name_table

__all__ = [
    "LANGUAGES",
    "NamesParams",
    "load_gender_prompt",
    "load_name_table",
    "names",
]

STAGE_NAME = "names"
GENDER_PROMPT_FILE = REPO_ROOT / "prompts" / "names_gender.txt"
TEXT_FIELDS = ("context", "question", "ans0", "ans1", "ans2")
ENTITY_COLUMNS = ("stereo_entity", "nonstereo_entity")


@dataclass(frozen=True)
class NamesParams:
    seed: int = 42
    """The global seed of Appendix C (``np.random.seed(42)``)."""
    n_seeds: int = 3
    """How many sub-seeds, hence variants per example."""
    gender_llm: bool = False
    """Ask an LLM for the gender of references whose cues contradict each other (off: they stay unmapped)."""
    drop_weak_proxies: bool = True
    """Measure every group's names and leave out the examples naming a weak one (off: every group is kept and
    nothing is measured)."""
    min_proxy_margin: float = 0.10
    """A group's names stand for it when their strength reaches chance plus this margin
    (:mod:`pbbq.tasks.names.strength`); examples naming a weaker group are left out (``weak_proxy``)."""


class Unmapped(Exception):
    """An example the proxy cannot map: the reason, the entities it concerns and a detail."""

    def __init__(self, reason: str, entities: Sequence[str] = ("",), detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.entities, self.detail = reason, tuple(entities), detail


Failure = tuple[int, str, Unmapped]
"""An example the stage cannot map: its row number in the input, its ``example_id`` and why."""

DrawKey = tuple[str, tuple[str, ...]]
"""An entity pair (:meth:`Prepared.pair_key`) and the genders of its two entities' names."""
DrawOrder = tuple[DrawKey, DrawKey] | tuple[()]
"""Where an example's draw came (its group of pairs reading alike, by its first key, and its own key); ``()`` for
an example never drawn."""


@dataclass
class Prepared:
    """One mappable example: its texts with slots, its entities' groups, name genders and age bands, the patterns
    used and the LLM requests that decided a gender."""

    row: dict[str, Any]
    position: int
    """The example's row number in the stage's input (its variants and drops are taken from there)."""
    texts: dict[str, str]
    groups: tuple[str, str]
    genders: list[str]
    age_bands: tuple[str, str]
    patterns: list[str]
    request_ids: list[str]

    @property
    def example_id(self) -> str:
        return str(self.row["example_id"])

    def request(self) -> PairRequest:
        """What the example asks of its names (:mod:`pbbq.tasks.names.draw`)."""
        genders = (self.genders[0], self.genders[1])
        return PairRequest(self.row["lang"], self.groups, genders, pair_eras(self.age_bands))

    def pair_key(self) -> str:
        """The entity pair the example instantiates: its template, two entities and lexical variant. The twelve
        examples of a pair (conditions, polarities, assignments, orders) take the same names, so that a mirrored
        pair of examples still differs only in who did what (BBQ's control)."""
        fields = ("lang", "template_id", *ENTITY_COLUMNS, "lexical_variant")
        return "|".join(str(self.row.get(field) or "") for field in fields)

    def draw_key(self) -> DrawKey:
        """The examples that take one draw of names: those of one entity pair whose entities have one gender."""
        return self.pair_key(), tuple(self.genders)

    def reading(self) -> tuple[str, ...]:
        """The example's context and question with slots for the names: two examples that read the same would
        differ only in their names (and in the order and wording of their options)."""
        return (self.row["lang"], *(self.texts.get(field, self.row[field]) for field in ("context", "question")))


def _texts(row: Mapping[str, Any]) -> dict[str, str]:
    """The texts a name may go into: context, question and the two entity options (never 'unknown')."""
    roles = row["answer_roles"]
    return {f: row[f] for f in TEXT_FIELDS if roles.get(f) != "unknown"}


@lru_cache(maxsize=1 << 16)
def _residue(text: str, surface: str) -> str:
    """The words around a mention left in ``text`` (''), for the report of an unhandled reference (memoised,
    as :func:`pbbq.tasks.names.patterns.rewrite`: a rewritten text recurs across an entity pair's examples)."""
    match = re.search(rf"(?<![\w\u200c-]){re.escape(surface)}", text)
    return "" if match is None else text[max(0, match.start() - 30) : match.end() + 30]


def _age_band(entity: str, surface: str, lang: str) -> str:
    """The age band of the person a name stands for: the entity's (:func:`pbbq.tasks.text.cues.entity_age_band`) when
    the name is the person mentioned; none when it is a possessor ('پدربزرگ آیدین': Aydin's grandfather)."""
    if lang == "fa":
        form = persian_entity(entity, surface)
        if form is None or not form[2]:
            return NONE
    return entity_age_band(entity, lang)


class Lexicon:
    """Per language, the words that name a group (:func:`pbbq.tasks.names.tables.group_words`), and the groups
    each entity names, looked up once per entity: an entity pair recurs in every example of its template."""

    def __init__(self, name_table: pd.DataFrame) -> None:
        self.words = group_words(name_table)
        self.labels = {lang: tuple(sorted(words)) for lang, words in self.words.items()}
        self._mentions: dict[tuple[str, str], dict[str, str]] = {}

    def mentions(self, entity: str, lang: str) -> dict[str, str]:
        """:func:`pbbq.tasks.names.tables.entity_mentions` of ``entity`` in ``lang`` (which has a name table)."""
        key = (entity, lang)
        if key not in self._mentions:
            self._mentions[key] = entity_mentions(entity, self.words[lang])
        return self._mentions[key]


def prepare(row: Mapping[str, Any], position: int, lexicon: Lexicon) -> Prepared:
    """Rewrite one example (row ``position`` of the input), or raise :class:`Unmapped` with the reason."""
    lang = row["lang"]
    if not lexicon.words.get(lang):
        raise Unmapped("no_names_for_language", detail=lang)
    entities = (row["stereo_entity"], row["nonstereo_entity"])
    found = [lexicon.mentions(entity, lang) for entity in entities]
    nameless = [entity for entity, groups in zip(entities, found, strict=True) if not groups]
    if nameless:
        raise Unmapped("entity_not_in_name_table", nameless)
    several = [(entity, groups) for entity, groups in zip(entities, found, strict=True) if len(groups) > 1]
    if several:
        raise Unmapped("entity_names_several_groups", [several[0][0]], ", ".join(several[0][1]))
    (first, first_word), (second, second_word) = (next(iter(groups.items())) for groups in found)
    if first == second:
        raise Unmapped("entities_share_group", entities, first)
    surfaces = (first_word, second_word)
    labels = lexicon.labels[lang]
    rewrites = {field: rewrite(text, lang, entities, surfaces, labels) for field, text in _texts(row).items()}
    for field, result in rewrites.items():
        for entity, surface in zip(entities, entities if lang != "en" else surfaces, strict=True):
            left = _residue(result.text, surface)
            if left:
                raise Unmapped("unhandled_reference", [entity], f"{field}: …{left}…")
    for index, entity in enumerate(entities):
        if f"\ue000{index}" not in rewrites["context"].text:
            raise Unmapped("mention_not_found", [entity], "not in the context")
    bands = (_age_band(entities[0], surfaces[0], lang), _age_band(entities[1], surfaces[1], lang))
    if not pair_eras(bands):
        raise Unmapped("no_common_era", entities, f"age bands {bands[0]} and {bands[1]}")
    found_cues = [c for result in rewrites.values() for c in result.cues]
    genders = [reference_gender(g for e, g in found_cues if e == index) for index in range(2)]
    return Prepared(
        row=dict(row),
        position=position,
        texts={field: result.text for field, result in rewrites.items()},
        groups=(first, second),
        genders=genders,
        age_bands=bands,
        patterns=[p for result in rewrites.values() for p in result.patterns],
        request_ids=[],
    )


def load_gender_prompt(path: Path = GENDER_PROMPT_FILE) -> str:
    """The LLM labeller's prompt (``prompts/names_gender.txt``); the flow passes its text so its hash is an input."""
    return path.read_text(encoding="utf-8")


def gender_request(row: Mapping[str, Any], entity: str, prompt: str) -> LLMRequest:
    """The question to the LLM labeller for one entity of one example (§4.1.1: GPT-4o labelled the genders)."""
    options = "\n".join(f"- {row[f]}" for f in OPTIONS)
    text = Template(prompt).substitute(
        context=row["context"], question=row["question"], options=options, mention=entity
    )
    return LLMRequest(
        messages=(("user", text),),
        prompt_hash=sha256_bytes(prompt.encode("utf-8")),
        stage=STAGE_NAME,
        context=f"example {row['example_id']}, entity {entity}",
    )


def label_undecided(prepared: Sequence[Prepared], client: LLMClient, prompt: str) -> None:
    """Ask the LLM for every undecided gender; an answer other than female, male or neutral leaves it undecided."""
    pending = [(item, index) for item in prepared for index, g in enumerate(item.genders) if g == UNDECIDED]
    requests = [gender_request(item.row, item.row[ENTITY_COLUMNS[index]], prompt) for item, index in pending]
    if not requests:
        return
    for (item, index), answer in zip(pending, client.complete_many(requests), strict=True):
        label = answer.text.strip().strip(".").lower()
        if label in (*GENDERS, NEUTRAL):
            item.genders[index] = label
        item.request_ids.append(answer.request_id)


def agree_pair_genders(prepared: Sequence[Prepared]) -> None:
    """Give an entity the gender its pair's examples (:meth:`Prepared.pair_key`) agree on where its own example has
    no cue: the pair takes one pair of names, so the disambiguated context's 'he' names the ambiguous context's
    person too. Examples whose cues differ across the pair keep their own (BBQ's Nationality-20 writes 'an
    American woman and a Vietnamese man' in one order and the genders exchanged in the other) and are drawn apart
    (:meth:`Prepared.draw_key`)."""
    pairs: dict[str, list[Prepared]] = {}
    for item in prepared:
        pairs.setdefault(item.pair_key(), []).append(item)
    for members in pairs.values():
        for index in range(len(ENTITY_COLUMNS)):
            decided = {item.genders[index] for item in members} - {NEUTRAL}
            if len(decided) == 1 and UNDECIDED not in decided:
                for item in members:
                    item.genders[index] = next(iter(decided))


def _records(frame: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The rows of ``frame`` as dicts of Python values, what ``to_dict("records")`` gives, a column at a time
    (``to_dict`` boxes each Arrow-backed string of every row on its own), one row at a time: a row the stage
    does not keep is freed at once."""
    columns = list(frame.columns)
    for values in zip(*(frame[c].tolist() for c in columns), strict=True):
        yield dict(zip(columns, values, strict=True))


def _listed(value: Iterable[str] | None) -> list[str]:
    """A list column's value as a list (parquet gives arrays, hand-made rows lists or None)."""
    return [] if value is None else list(value)


def _pairs_reading_alike(pairs: Mapping[DrawKey, Sequence[Prepared]]) -> list[list[DrawKey]]:
    """The pair keys grouped so that two pairs with an example that reads the same once named (e.g. 'کارگر ترک'
    and 'جوان ترک', both a name) are in one group; groups and their keys sorted."""
    parent = {key: key for key in pairs}

    def root(key: DrawKey) -> DrawKey:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    first_of_reading: dict[tuple[str, ...], DrawKey] = {}
    for key in sorted(pairs):
        for item in pairs[key]:
            other = first_of_reading.setdefault(item.reading(), key)
            parent[root(key)] = root(other)
    groups: dict[DrawKey, list[DrawKey]] = {}
    for key in sorted(pairs):
        groups.setdefault(root(key), []).append(key)
    return sorted(groups.values())


def _variant_fields(item: Prepared, names: Sequence[str], sub_seed: int) -> dict[str, Any]:
    """What the variant of ``item`` with ``names`` changes in its row: new texts, ``answer_info`` texts rewritten
    with the options, tags kept (the BBQ record format lm-evaluation-harness reads)."""
    texts = {field: fill(item.texts[field], names) if field in item.texts else item.row[field] for field in TEXT_FIELDS}
    info = {option: _listed(item.row["answer_info"][option]) for option in OPTIONS}
    for option in OPTIONS:
        if option in item.texts:
            info[option] = [texts[option], info[option][1]]
    return {
        **texts,
        "answer_info": info,
        "example_id": f"{item.example_id}-names-{sub_seed}",
        "variant": f"names-{sub_seed}",
        "source_example_id": item.row["example_id"],
        "llm_request_ids": [*_listed(item.row["llm_request_ids"]), *item.request_ids],
    }


def _rows_at(
    examples: pd.DataFrame, positions: Sequence[int], columns: Sequence[str], values: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """The input's rows at ``positions`` (repeats allowed), in that order, as ``columns`` (a column the input
    lacks is empty), each row's ``values`` (one mapping per row, the same keys) put in; no row: the empty frame
    of ``columns``."""
    if not positions:
        return pd.DataFrame(columns=list(columns))
    frame = examples.take(list(positions)).reset_index(drop=True).reindex(columns=list(columns))
    for column in values[0]:
        frame[column] = [row[column] for row in values]
    return frame


def draw_all(
    mapped: Sequence[Prepared], pools: Pools, seeds: Sequence[int]
) -> tuple[dict[str, list[tuple[Drawn, int]]], list[tuple[Prepared, Unmapped, DrawOrder]]]:
    """The draws of every example (per sub-seed: the names and how many draws it took), and the examples left
    without enough free name pairs, each with where its draw came. One draw per entity pair and genders
    (:meth:`Prepared.draw_key`), from the pair's own stream; pairs whose examples would read the same once named are
    drawn in key order against one set of taken name pairs, so that no two of them get the same names (module
    docstring of :mod:`pbbq.tasks.names.draw`)."""
    pairs: dict[DrawKey, list[Prepared]] = {}
    for item in mapped:
        pairs.setdefault(item.draw_key(), []).append(item)
    linked = _pairs_reading_alike(pairs)
    drawn: dict[str, list[tuple[Drawn, int]]] = {}
    short: list[tuple[Prepared, Unmapped, DrawOrder]] = []
    for component in linked:
        taken: set[tuple[str, str]] = set()
        for key in component:
            members = pairs[key]
            first = min(members, key=lambda p: p.example_id)
            try:
                draws = draw_variants(pools, first.request(), key[0], seeds, taken)
            except TooFewPairs as error:
                entities = [first.row[column] for column in ENTITY_COLUMNS]
                why = Unmapped("too_few_distinct_names", entities, str(error))
                short += [(item, why, (component[0], key)) for item in members]
                continue
            drawn.update((item.example_id, draws) for item in members)
    return drawn, short


MEASURED = ["template_id", "lang", "category", "group"]
"""The columns of :func:`named_groups`' table and of :func:`template_groups`'."""
DRAWN = ["_names", "_era", "_name_genders", "_redraws", "_reference_genders", "_patterns", "_reading"]
"""What a template's part (:func:`template_names`) adds to each variant for the report and the checks across
templates: the names drawn, their era, their genders, the redraws, the references' genders, the patterns used and
how the example reads with slots for the names."""
UNMAPPED = EXAMPLE_DROPPED.append(pa.field("entities", pa.list_(pa.string()))).append(pa.field("detail", pa.string()))
"""The ``unmapped`` table: an example no name table covers, with its reason, the entities (mentions) no name could
stand for and what its reason found there (the words around an unhandled reference; the pairs left for a draw):
a researcher auditing one reads why next to its text, a row per example, and the report keeps only the counts."""
NOT_COVERED = ["_phase", "_draw", "entities", "detail", "_reading"]
"""What a template's part adds to each example it could not map: when it failed (0: its text; 1: gender; 2: the
draw) and where its draw came (:data:`DrawOrder`), the entities and detail of :data:`UNMAPPED`, how it reads."""


def _prepared(examples: pd.DataFrame, lexicon: Lexicon) -> tuple[list[Prepared], list[Failure]]:
    """Every example rewritten (:func:`prepare`), and those it could not be, in the input's order."""
    prepared: list[Prepared] = []
    failures: list[Failure] = []
    for position, row in enumerate(_records(examples)):
        try:
            prepared.append(prepare(row, position, lexicon))
        except Unmapped as unmapped:
            # neither its row nor the exception's frames are kept: 30,000 of them at paper scale, each would make
            # the garbage collector's full passes over the whole process more frequent
            failures.append((position, row["example_id"], unmapped.with_traceback(None)))
    return prepared, failures


def template_groups(
    examples: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> dict[str, pd.DataFrame]:
    """The groups each template's mappable examples name, a row per template, language, category and group: what
    :func:`named_groups` reads of a template, made from its own rows (an example is rewritten from its row alone,
    :func:`prepare`); none when weak proxies are kept (nothing is measured)."""
    prepared = _prepared(examples, Lexicon(name_table))[0] if params.drop_weak_proxies else []
    return {"named": _named(prepared)}


def _named(prepared: Sequence[Prepared]) -> pd.DataFrame:
    """:func:`template_groups`' table, from the examples rewritten."""
    rows = {(p.row["template_id"], p.row["lang"], p.row["category"], group) for p in prepared for group in p.groups}
    return pd.DataFrame(sorted(rows), columns=MEASURED)


def named_groups(
    examples: pd.DataFrame,
    named: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> dict[str, pd.DataFrame]:
    """What each template's names read of every template's examples: the groups the mappable examples of its
    language and category name (``named``: each template's, :func:`template_groups`; those whose names the proxy
    strength tells apart), a row per template and group; none when weak proxies are kept (nothing is measured)."""
    return {"measured": _measured(examples, named, params)}


def _measured(examples: pd.DataFrame, named: pd.DataFrame, params: NamesParams) -> pd.DataFrame:
    """:func:`named_groups`' table, from the groups each template names."""
    measured: dict[tuple[str, str], set[str]] = {}
    if params.drop_weak_proxies:
        for lang, category, group in zip(named["lang"], named["category"], named["group"], strict=True):
            measured.setdefault((lang, category), set()).add(group)
    templates = examples[["template_id", "lang", "category"]].drop_duplicates().itertuples(index=False)
    rows = [
        (template, lang, category, group)
        for template, lang, category in templates
        for group in sorted(measured.get((lang, category), ()))
    ]
    return pd.DataFrame(rows, columns=MEASURED)


def template_names(
    examples: pd.DataFrame,
    measured: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> dict[str, pd.DataFrame]:
    """The work of the stage per template (``measured``: the templates' rows of :func:`named_groups`): the variants
    of its mappable examples, its examples without a name proxy and its weak proxies, each with what the report
    and the checks across templates read of it (:data:`DRAWN`, :data:`NOT_COVERED`), and the proxy strength of
    its category's groups, a row per template. ``client`` and ``prompt`` are needed only when ``params.gender_llm``
    is on."""
    return _named_parts(
        examples, _prepared(examples, Lexicon(name_table)), measured, name_table, params, client, prompt
    )


def _named_parts(
    examples: pd.DataFrame,
    rewritten: tuple[list[Prepared], list[Failure]],
    measured: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None,
    prompt: str,
) -> dict[str, pd.DataFrame]:
    """:func:`template_names` of the examples ``rewritten`` (:func:`_prepared`)."""
    if params.gender_llm and (client is None or not prompt):
        raise ValueError("names: gender_llm is on; give the LLM client and load_gender_prompt()")
    seeds = sub_seeds(params.seed, params.n_seeds)
    prepared, failed = rewritten
    failures: list[tuple[Failure, int, DrawOrder, str]] = [(failure, 0, (), "") for failure in failed]
    if params.gender_llm:
        if client is None:
            raise ValueError("names: gender_llm is on but no LLM client was given")
        label_undecided(prepared, client, prompt)
    agree_pair_genders(prepared)
    for item in [p for p in prepared if UNDECIDED in p.genders]:
        entity = item.row[ENTITY_COLUMNS[item.genders.index(UNDECIDED)]]
        why = Unmapped("gender_undecided", [entity], "contradicting cues")
        failures.append(((item.position, item.example_id, why), 1, (), ""))
    decided = [p for p in prepared if UNDECIDED not in p.genders]
    groups: dict[tuple[str, str], set[str]] = {}
    for lang, category, group in zip(measured["lang"], measured["category"], measured["group"], strict=True):
        groups.setdefault((lang, category), set()).add(group)
    # where a review round judged a group's names, its human proxy strength decides (tasks/review/names.py)
    strength = with_human_verdict(proxy_strength(name_table, groups, params.min_proxy_margin, params.seed), name_table)
    strong = {(r.lang, r.category, r.group) for r in strength.itertuples() if r.strong}
    is_weak = [
        params.drop_weak_proxies and not all((p.row["lang"], p.row["category"], g) in strong for g in p.groups)
        for p in decided
    ]
    weak = [p for p, w in zip(decided, is_weak, strict=True) if w]
    decided = [p for p, w in zip(decided, is_weak, strict=True) if not w]
    drawn, short = draw_all(decided, name_pools(name_table), seeds)
    failures += [((item.position, item.example_id, why), 2, order, _read(item)) for item, why, order in short]
    mapped = [item for item in decided if item.example_id in drawn]
    gender_of = {(r.lang, r.group, r.name): r.gender for r in name_table.itertuples()}
    changed = []
    for k, sub_seed in enumerate(seeds):
        for item in mapped:
            result, attempts = drawn[item.example_id][k]
            genders = [gender_of[(item.row["lang"], g, n)] for g, n in zip(item.groups, result.names, strict=True)]
            drew = (result.names, result.era, "/".join(genders), attempts - 1, item.genders, item.patterns, _read(item))
            changed.append(_variant_fields(item, result.names, sub_seed) | dict(zip(DRAWN, drew, strict=True)))
    variants = _rows_at(examples, [item.position for _ in seeds for item in mapped], [*EXAMPLE.names, *DRAWN], changed)
    unmapped = _rows_at(
        examples,
        [position for (position, _, _), *_ in failures],
        [*EXAMPLE_DROPPED.names, *NOT_COVERED],
        [
            {"reason": why.reason}
            | dict(zip(NOT_COVERED, (phase, order, list(why.entities), why.detail, reading), strict=True))
            for (_, _, why), phase, order, reading in failures
        ],
    )
    weak_rows = _rows_at(
        examples, [p.position for p in weak], EXAMPLE_DROPPED.names, [{"reason": "weak_proxy"}] * len(weak)
    )
    templates: dict[tuple[str, str], list[str]] = {}
    for template, lang, category in examples[["template_id", "lang", "category"]].drop_duplicates().itertuples(False):
        templates.setdefault((lang, category), []).append(template)
    of = [templates[key] for key in zip(strength["lang"], strength["category"], strict=True)]
    per_template = strength.take([i for i, these in enumerate(of) for _ in these]).reset_index(drop=True)
    per_template.insert(0, "template_id", [template for these in of for template in these])
    return {"examples": variants, "unmapped": unmapped, "weak_proxy": weak_rows, "proxy_strength": per_template}


def _read(item: Prepared) -> str:
    """How an example reads with slots for its names (:meth:`Prepared.reading`), as one text."""
    return "\n".join(item.reading())


def named_output(
    parts: Mapping[str, pd.DataFrame],
    examples: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> StageOutput:
    """The stage's output from every template's part (:func:`template_names`): each table in the order the stage
    gives on whole tables (variants by sub-seed and example, examples not covered by when they failed, the proxy
    strength by language, category and group), and the report. Examples of two templates that read the same once
    named draw their names against each other (:func:`draw_all`): then the stage runs on whole tables."""
    readings = pd.concat([parts[name][["template_id", "_reading"]] for name in ("examples", "unmapped")])
    if (readings[readings["_reading"] != ""].drop_duplicates().groupby("_reading").size() > 1).any():
        whole = names(examples, name_table, params, client, prompt)
        templates, rows = examples["template_id"].nunique(), len(whole.tables["examples"])
        whole.report["parts"] = {  # what the run computed: every template, not only those the runner did not keep
            "key": "template_id",
            "computed": templates,
            "of": templates,
            "table": "examples",
            "rows": [rows, rows],
            "on_whole_tables": "two templates' examples read alike once named",
        }
        return whole
    return _assembled(parts, examples, params, client)


def _assembled(
    parts: Mapping[str, pd.DataFrame], examples: pd.DataFrame, params: NamesParams, client: LLMClient | None
) -> StageOutput:
    """The stage's output from the parts of every template (:func:`named_output`), their draws made together."""
    seeds = sub_seeds(params.seed, params.n_seeds)
    variants, unmapped = parts["examples"], parts["unmapped"]
    at = {example_id: i for i, example_id in enumerate(examples["example_id"].tolist())}
    seed_of = {f"names-{sub_seed}": k for k, sub_seed in enumerate(seeds)}
    variants = ordered(
        variants, list(zip(variants["variant"].map(seed_of), variants["source_example_id"].map(at), strict=True))
    )
    unmapped = ordered(
        unmapped,
        list(zip(unmapped["_phase"], unmapped["_draw"], unmapped["example_id"].map(at), strict=True)),
    )
    weak = parts["weak_proxy"]
    weak = ordered(weak, [(position,) for position in weak["example_id"].map(at)])
    strength = parts["proxy_strength"].drop(columns="template_id").drop_duplicates(["lang", "category", "group"])
    strength = ordered(strength, list(zip(strength["lang"], strength["category"], strength["group"], strict=True)))
    per_seed = []
    for sub_seed in seeds:
        drawn = variants[variants["variant"] == f"names-{sub_seed}"]
        per_seed.append(
            {
                "sub_seed": sub_seed,
                "variant": f"names-{sub_seed}",
                "in": len(drawn),
                "out": len(drawn),
                "distinct_names": len({name for names in drawn["_names"] for name in names}),
                "redraws": int(drawn["_redraws"].sum()),
                "eras": dict(sorted(Counter(drawn["_era"]).items())),
                "pair_genders": dict(sorted(Counter(drawn["_name_genders"]).items())),
            }
        )
    report = _report(examples, variants.iloc[: len(variants) // len(seeds)], unmapped, per_seed, params)
    report["proxy_strength"] = {
        "measure": MEASURE,
        "threshold": f"chance (1 / groups of the category) + {params.min_proxy_margin:g}",
        "per_group": strength.to_dict(orient="records"),
        "weak_proxy_examples": len(weak),
    }
    if client is not None:
        report["llm"] = client.usage(STAGE_NAME).as_dict()
    return StageOutput(
        tables={
            "examples": variants.drop(columns=DRAWN),
            "unmapped": unmapped[UNMAPPED.names],
            "weak_proxy": weak,
            "proxy_strength": strength,
        },
        schemas={
            "examples": EXAMPLE,
            "unmapped": UNMAPPED,
            "weak_proxy": EXAMPLE_DROPPED,
            "proxy_strength": PROXY_STRENGTH,
        },
        report=report,
    )


def names(
    examples: pd.DataFrame,
    name_table: pd.DataFrame,
    params: NamesParams,
    client: LLMClient | None = None,
    prompt: str = "",
) -> StageOutput:
    """The name-proxy variants of every mappable example, one per sub-seed, and every unmapped example with its
    reason (§4.1.1, Appendix C): every template's part (:func:`template_names`) at once. ``client`` and ``prompt``
    are needed only when ``params.gender_llm`` is on."""
    rewritten = _prepared(examples, Lexicon(name_table))
    measured = _measured(examples, _named(rewritten[0]), params)
    parts = _named_parts(examples, rewritten, measured, name_table, params, client, prompt)
    return _assembled(parts, examples, params, client)


def _report(
    examples: pd.DataFrame,
    mapped: pd.DataFrame,
    unmapped: pd.DataFrame,
    per_seed: Sequence[dict[str, Any]],
    params: NamesParams,
) -> dict[str, Any]:
    """Counts in and out, per sub-seed (distinct names drawn, redraws, eras and gender pairs) and per category, the
    genders of the references, the patterns used and the examples no name table covers, counted by reason
    (``not_covered``: they stay in fa, and are not ``dropped``; the weak proxies are, from the ``weak_proxy``
    table; each one's entities and detail are in the ``unmapped`` table, :data:`UNMAPPED`). ``mapped``: the
    variants of one sub-seed, a row per mapped example."""
    seeds = [row["sub_seed"] for row in per_seed]
    per_category = {}
    for category in sorted(set(examples["category"])):
        n_mapped = int((mapped["category"] == category).sum())
        per_category[str(category)] = {
            "in": int((examples["category"] == category).sum()),
            "mapped": n_mapped,
            "unmapped": int((unmapped["category"] == category).sum()),
            "out": n_mapped * len(seeds),
        }
    genders = pd.Series([g for genders in mapped["_reference_genders"] for g in genders], dtype="object")
    patterns = pd.Series([pattern for used in mapped["_patterns"] for pattern in used], dtype="object")
    return {
        "stage": STAGE_NAME,
        "parameters": asdict(params),
        "sub_seeds": list(seeds),
        "counts": {"in": len(examples), "out": len(mapped) * len(seeds), "mapped": len(mapped)},
        "not_covered": {"total": len(unmapped), "by_reason": count_reasons(unmapped["reason"])},
        "per_sub_seed": list(per_seed),
        "per_category": per_category,
        "reference_genders": count_reasons(genders),
        "patterns": count_reasons(patterns),
    }


def load_reviewed_name_table(path: Path, *needs: pd.DataFrame) -> pd.DataFrame:
    """The name table (:func:`load_name_table`, checked against the other ``needs``) as a review round left it
    (the last of ``needs``: its decisions): without the names judged not to signal their group or gender, with each
    judged group's human proxy strength (:func:`pbbq.tasks.review.names.reviewed_name_table`)."""
    *checked, decisions = needs
    return reviewed_name_table(load_name_table(path, *checked), decisions)


NAME_TABLE = Input("names", load_name_table, needs=(TEMPLATES,))
"""``[inputs] names``: the name table, checked against the templates' groups."""
BBQ_NAME_TABLE = Input("names", load_name_table)
"""``[inputs] names`` of the adaptation path: the name table of the adapted groups, checked on its own (no two of
its groups of one language share a name), as BBQ's templates are not PBBQ's."""


def names_stage(lang: str = "fa") -> Stage:
    """The names stage over the examples of one language (PBBQ's Persian; the adaptation path's English): its
    variants are the ``<lang>-names`` config, which its words and funnel labels name."""
    config = f"{lang}-names"
    return Stage(
        "06_names",
        "names",
        names,
        inputs={
            "examples": Table("05_instantiate", "examples"),
            "name_table": NAME_TABLE,
            "client": Client(when=lambda p: p.gender_llm),
            "prompt": Resource(load_gender_prompt, when=lambda p: p.gender_llm),
        },
        outputs={
            "examples": EXAMPLE,
            "unmapped": UNMAPPED,
            "weak_proxy": EXAMPLE_DROPPED,
            "proxy_strength": PROXY_STRENGTH,
        },
        params=NamesParams,
        ranges={"seed": SEED, "n_seeds": (1, 100), "min_proxy_margin": (0, 1)},
        # `unmapped` holds the examples no name table covers (not covered, not drops); `weak_proxy` those whose
        # names do not tell their groups apart: both stay in the source config
        drops=("weak_proxy",),
        words=(
            f"examples ({lang})",
            f"name-proxy variants ({config})",
            f"examples without a name proxy (they stay in {lang})",
        ),
        funnel={
            f"examples_{config}": f"Name-proxy variants (`{config}`)",
            "names_weak_proxy": f"Examples left out of `{config}`: their names do not tell their groups apart",
        },
        counts=lambda out: {"names_weak_proxy": len(out["weak_proxy"])},
        request_ids=lambda out: listed(out["examples"]["llm_request_ids"]),
        per=Separable("template_id", ("examples",), template_names, named_output, named_groups, template_groups),
    )


STAGE = names_stage()
"""PBBQ's names stage: the Persian examples' name proxies (``fa-names``)."""
