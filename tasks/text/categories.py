"""The bias categories of the benchmark, each declared once (docs/architecture.md, "Adding a category").

A category's declaration holds every fact the code keeps about it: its name (as the paper, the questionnaire, the
templates and the release write it), the stereotype id prefix of its questionnaire rows (survey/README.md) and the
entity attribute it is about, which the confound gate lets two entities differ in (:mod:`pbbq.tasks.text.cues`).
Every consumer (input checks, the survey form, the confound gate, Table 1, the charts, the evaluation's order,
synth) reads :data:`BIAS_CATEGORIES` or what follows from it here; adding a category is one line below.
"""

from __future__ import annotations

from dataclasses import dataclass

GENDER, AGE, ROLE = "gender", "age", "role"
"""The entity attributes a category may be about (:attr:`Category.attribute`)."""


@dataclass(frozen=True)
class Category:
    """A bias category, declared."""

    name: str
    """Its name in the paper's words (PBBQ §3.1): ``Socio-economic Status``."""
    survey_code: str
    """The stereotype id prefix of its questionnaire rows: ``SES-012``."""
    attribute: str | None = None
    """The entity attribute the category is about (:data:`GENDER`, :data:`AGE` or :data:`ROLE`: an occupation, owning
    or renting, a place in the family), which two entities of its pairs may differ in; None: only the attribute the
    stereotype names."""


BIAS_CATEGORIES: tuple[Category, ...] = (
    Category("Age", "AGE", AGE),
    Category("Profession", "PRO", ROLE),
    Category("Socio-economic Status", "SES", ROLE),
    Category("Educational Background", "EDU"),
    Category("Disability", "DIS"),
    Category("Disease", "DSE"),
    Category("Domestic Area", "DOM"),
    Category("Ethnicity", "ETH"),
    Category("Family Structure", "FAM", ROLE),
    Category("Gender", "GEN", GENDER),
    Category("Property Ownership", "PRP", ROLE),
    Category("Nationality", "NAT"),
    Category("Physical Appearance", "APP"),
    Category("Political Orientation", "POL"),
    Category("Religion", "REL"),
    Category("Sexual Orientation", "SEX"),
)
"""The 16 bias topics of the PBBQ paper, §3.1, in the paper's order."""

CATEGORIES: tuple[str, ...] = tuple(category.name for category in BIAS_CATEGORIES)
"""The categories' names, in the paper's order."""
SURVEY_CODES: dict[str, str] = {category.name: category.survey_code for category in BIAS_CATEGORIES}
"""The stereotype id prefix of each category (survey/README.md)."""


def about(attribute: str) -> frozenset[str]:
    """The categories about an entity attribute (:attr:`Category.attribute`)."""
    return frozenset(category.name for category in BIAS_CATEGORIES if category.attribute == attribute)


def not_one_of(category: object) -> str:
    """The message for a category that is not declared: it and the declared ones, named."""
    return f"category {category!r} is not one of the {len(CATEGORIES)}: {', '.join(CATEGORIES)}"
