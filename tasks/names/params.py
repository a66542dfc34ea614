"""The names stage's name, its parameters (``[names]``) and its parameter object (:class:`NamesGiven`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from ..llm import LLMClient
from .prepare import Lexicon

STAGE_NAME = "names"


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


@dataclass(frozen=True, eq=False)
class NamesGiven:
    """What every hook of the names stage split by template (:mod:`.parts`) takes besides its tables: the stage's
    arguments other than the examples (:attr:`pbbq.tasks.core.stage.Separable.given`). ``client`` and ``prompt`` are
    needed only when ``params.gender_llm`` is on."""

    name_table: pd.DataFrame
    params: NamesParams
    client: LLMClient | None = None
    prompt: str = ""

    @cached_property
    def lexicon(self) -> Lexicon:
        """The name table's :class:`~.prepare.Lexicon`, one for every hook of a run of the stage: the texts
        :func:`~.parts.template_groups` rewrote are :func:`~.parts.template_names`' again, and its memo goes with
        the run."""
        return Lexicon(self.name_table)
