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

from pathlib import Path

import pandas as pd

from ..core.inputs import TEMPLATES
from ..core.schemas import EXAMPLE, EXAMPLE_DROPPED
from ..core.stage import SEED, Client, Input, Resource, Separable, Stage, Table, listed
from ..review.names import reviewed_name_table
from .gender import load_gender_prompt
from .params import NamesGiven, NamesParams
from .parts import UNMAPPED, named_groups, named_output, names, template_groups, template_names
from .strength import PROXY_STRENGTH
from .tables import LANGUAGES, load_name_table

__all__ = [
    "LANGUAGES",
    "NamesParams",
    "load_gender_prompt",
    "load_name_table",
    "names",
]


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
        per=Separable(
            "template_id",
            ("examples",),
            template_names,
            named_output,
            named_groups,
            template_groups,
            given=NamesGiven,
        ),
    )


STAGE = names_stage()
"""PBBQ's names stage: the Persian examples' name proxies (``fa-names``)."""
