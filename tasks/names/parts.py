"""The names stage's work, split by template (docs/architecture.md §9): the groups each template names, what every
template reads of them, each template's part and the stage's output from every part; :func:`names` on whole tables."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from ..core.artifacts import StageOutput
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED
from ..core.stage import ordered
from ..llm import LLMClient
from ..review.names import with_human_verdict
from .draw import Drawn, name_pools, sub_seeds
from .gender import agree_pair_genders, label_undecided
from .params import STAGE_NAME, NamesGiven, NamesParams
from .patterns import UNDECIDED
from .prepare import ENTITY_COLUMNS, DrawOrder, Failure, Prepared, Unmapped, prepared_examples
from .report import names_report
from .strength import MEASURE, PROXY_STRENGTH, proxy_strength
from .variants import draw_all, read_with_slots, rows_at, variant_fields

MEASURED = ["template_id", "lang", "category", "group"]
"""The columns of :func:`named_groups`' table and of :func:`template_groups`'."""
DRAWN = ["_names", "_era", "_name_genders", "_redraws", "_reference_genders", "_patterns", "_reading"]
"""What a template's part (:func:`template_names`) adds to each variant for the report and the checks across
templates: the names drawn, their era, their genders, the redraws, the references' genders, the patterns used and
how the example reads with slots for the names (on its first sub-seed's variant; '' on the others)."""
UNMAPPED = EXAMPLE_DROPPED.append(pa.field("entities", pa.list_(pa.string()))).append(pa.field("detail", pa.string()))
"""The ``unmapped`` table: an example no name table covers, with its reason, the entities (mentions) no name could
stand for and what its reason found there (the words around an unhandled reference; the pairs left for a draw):
a researcher auditing one reads why next to its text, a row per example, and the report keeps only the counts."""
NOT_COVERED = ["_phase", "_draw", "entities", "detail", "_reading"]
"""What a template's part adds to each example it could not map: when it failed (0: its text; 1: gender; 2: the
draw) and where its draw came (:data:`DrawOrder`), the entities and detail of :data:`UNMAPPED`, how it reads."""


def template_groups(examples: pd.DataFrame, given: NamesGiven) -> dict[str, pd.DataFrame]:
    """The groups each template's mappable examples name, a row per template, language, category and group: what
    :func:`named_groups` reads of a template, made from its own rows (an example is rewritten from its row alone,
    :func:`prepare`); none when weak proxies are kept (nothing is measured)."""
    prepared = prepared_examples(examples, given.lexicon)[0] if given.params.drop_weak_proxies else []
    return {"named": _named(prepared)}


def _named(prepared: Sequence[Prepared]) -> pd.DataFrame:
    """:func:`template_groups`' table, from the examples rewritten."""
    rows = {(p.row["template_id"], p.row["lang"], p.row["category"], group) for p in prepared for group in p.groups}
    return pd.DataFrame(sorted(rows), columns=MEASURED)


def named_groups(examples: pd.DataFrame, named: pd.DataFrame, given: NamesGiven) -> dict[str, pd.DataFrame]:
    """What each template's names read of every template's examples: the groups the mappable examples of its
    language and category name (``named``: each template's, :func:`template_groups`; those whose names the proxy
    strength tells apart), a row per template and group; none when weak proxies are kept (nothing is measured)."""
    return {"measured": _measured(examples, named, given.params)}


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


def template_names(examples: pd.DataFrame, measured: pd.DataFrame, given: NamesGiven) -> dict[str, pd.DataFrame]:
    """The work of the stage per template (``measured``: the templates' rows of :func:`named_groups`): the variants
    of its mappable examples, its examples without a name proxy and its weak proxies, each with what the report
    and the checks across templates read of it (:data:`DRAWN`, :data:`NOT_COVERED`), and the proxy strength of
    its category's groups, a row per template."""
    return _named_parts(examples, prepared_examples(examples, given.lexicon), measured, given)


def _named_parts(
    examples: pd.DataFrame,
    rewritten: tuple[list[Prepared], list[Failure]],
    measured: pd.DataFrame,
    given: NamesGiven,
) -> dict[str, pd.DataFrame]:
    """:func:`template_names` of the examples ``rewritten`` (:func:`prepared_examples`)."""
    name_table, params, client, prompt = given.name_table, given.params, given.client, given.prompt
    if params.gender_llm and (client is None or not prompt):
        raise ValueError("names: gender_llm is on; give the LLM client and load_gender_prompt()")
    given.lexicon.forget()  # every example is prepared: the texts it rewrote are not held while the rows are made
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
    failures += [((item.position, item.example_id, why), 2, order, read_with_slots(item)) for item, why, order in short]
    mapped = [item for item in decided if item.example_id in drawn]
    gender_of = {(r.lang, r.group, r.name): r.gender for r in name_table.itertuples()}
    shared: dict[Any, Any] = {}
    positions = [item.position for item in mapped]
    # a sub-seed's variants at a time: the Python values of one sub-seed's rows are held at once, not of all
    of_seed = [
        rows_at(
            examples, positions, [*EXAMPLE.names, *DRAWN], _variant_values(mapped, drawn, k, seed, gender_of, shared)
        )
        for k, seed in enumerate(seeds if mapped else seeds[:1])
    ]
    variants = pd.concat(of_seed, ignore_index=True) if len(of_seed) > 1 else of_seed[0]
    del of_seed
    not_covered = [(phase, order, list(why.entities), why.detail, text) for (_, _, why), phase, order, text in failures]
    unmapped = rows_at(
        examples,
        [position for (position, _, _), *_ in failures],
        [*EXAMPLE_DROPPED.names, *NOT_COVERED],
        {"reason": [why.reason for (_, _, why), *_ in failures]}
        | {column: [row[i] for row in not_covered] for i, column in enumerate(NOT_COVERED)},
    )
    weak_rows = rows_at(
        examples, [p.position for p in weak], EXAMPLE_DROPPED.names, {"reason": ["weak_proxy"] * len(weak)}
    )
    templates: dict[tuple[str, str], list[str]] = {}
    for template, lang, category in examples[["template_id", "lang", "category"]].drop_duplicates().itertuples(False):
        templates.setdefault((lang, category), []).append(template)
    of = [templates[key] for key in zip(strength["lang"], strength["category"], strict=True)]
    per_template = strength.take([i for i, these in enumerate(of) for _ in these]).reset_index(drop=True)
    per_template.insert(0, "template_id", [template for these in of for template in these])
    return {"examples": variants, "unmapped": unmapped, "weak_proxy": weak_rows, "proxy_strength": per_template}


def _variant_values(
    mapped: Sequence[Prepared],
    drawn: Mapping[str, Sequence[tuple[Drawn, int]]],
    k: int,
    sub_seed: int,
    gender_of: Mapping[tuple[str, str, str], str],
    shared: dict[Any, Any],
) -> dict[str, list[Any]]:
    """What the variants of the ``mapped`` examples of the ``k``-th sub-seed change in their rows and add to them
    (:data:`DRAWN`), by column, a row per example: no dict per row, and one object per value of the sub-seed or of
    an example for all of its rows, or per value ``shared`` holds for the stage (:func:`variant_fields`; issue 35).
    How an example reads with slots is on its first sub-seed's row only ('' on the others): it is read once per
    template and reading (:func:`named_output`)."""
    variant = f"names-{sub_seed}"
    values: dict[str, list[Any]] = {}
    for item in mapped:
        result, attempts = drawn[item.example_id][k]
        genders = "/".join(gender_of[(item.row["lang"], g, n)] for g, n in zip(item.groups, result.names, strict=True))
        drew = (
            result.names,
            result.era,
            shared.setdefault(genders, genders),
            attempts - 1,
            item.genders,
            item.patterns,
            read_with_slots(item) if k == 0 else "",
        )
        for column, value in variant_fields(item, result.names, variant, shared).items():
            values.setdefault(column, []).append(value)
        for column, value in zip(DRAWN, drew, strict=True):
            values.setdefault(column, []).append(value)
    return values


def named_output(parts: Mapping[str, pd.DataFrame], examples: pd.DataFrame, given: NamesGiven) -> StageOutput:
    """The stage's output from every template's part (:func:`template_names`): each table in the order the stage
    gives on whole tables (variants by sub-seed and example, examples not covered by when they failed, the proxy
    strength by language, category and group), and the report. Examples of two templates that read the same once
    named draw their names against each other (:func:`draw_all`): then the stage runs on whole tables."""
    readings = pd.concat([parts[name][["template_id", "_reading"]] for name in ("examples", "unmapped")])
    if (readings[readings["_reading"] != ""].drop_duplicates().groupby("_reading").size() > 1).any():
        whole = names(examples, given.name_table, given.params, given.client, given.prompt)
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
    return _assembled(parts, examples, given.params, given.client)


def _assembled(
    parts: Mapping[str, pd.DataFrame], examples: pd.DataFrame, params: NamesParams, client: LLMClient | None
) -> StageOutput:
    """The stage's output from the parts of every template (:func:`named_output`), their draws made together."""
    seeds = sub_seeds(params.seed, params.n_seeds)
    variants, unmapped = parts["examples"], parts["unmapped"]
    at = {example_id: i for i, example_id in enumerate(examples["example_id"].tolist())}
    unmapped = ordered(
        unmapped,
        list(zip(unmapped["_phase"], unmapped["_draw"], unmapped["example_id"].map(at), strict=True)),
    )
    weak = parts["weak_proxy"]
    weak = ordered(weak, [(position,) for position in weak["example_id"].map(at)])
    strength = parts["proxy_strength"].drop(columns="template_id").drop_duplicates(["lang", "category", "group"])
    strength = ordered(strength, list(zip(strength["lang"], strength["category"], strength["group"], strict=True)))
    per_seed = []
    variant = variants["variant"].to_numpy()
    for sub_seed in seeds:
        of_seed = variant == f"names-{sub_seed}"
        per_seed.append(
            {
                "sub_seed": sub_seed,
                "variant": f"names-{sub_seed}",
                "in": int(of_seed.sum()),
                "out": int(of_seed.sum()),
                "distinct_names": len({name for names in variants["_names"][of_seed] for name in names}),
                "redraws": int(variants["_redraws"][of_seed].sum()),
                "eras": dict(sorted(Counter(variants["_era"][of_seed]).items())),
                "pair_genders": dict(sorted(Counter(variants["_name_genders"][of_seed]).items())),
            }
        )
    first_seed = variants[["category", "_reference_genders", "_patterns"]][variant == f"names-{seeds[0]}"]
    report = names_report(examples, first_seed, unmapped, per_seed, params)
    seed_of = {f"names-{sub_seed}": k for k, sub_seed in enumerate(seeds)}
    # the output's columns taken once, in the order of the stage on whole tables: nothing else of the parts is held
    variants = ordered(
        variants,
        list(zip(variants["variant"].map(seed_of), variants["source_example_id"].map(at), strict=True)),
        EXAMPLE.names,
    )
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
            "examples": variants,
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
    given = NamesGiven(name_table, params, client, prompt)
    rewritten = prepared_examples(examples, given.lexicon)
    measured = _measured(examples, _named(rewritten[0]), params)
    parts = _named_parts(examples, rewritten, measured, given)
    return _assembled(parts, examples, params, client)
