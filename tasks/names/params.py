"""The names stage's name and parameters (``[names]``)."""

from __future__ import annotations

from dataclasses import dataclass

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
