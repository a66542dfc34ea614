"""A build's configuration: where its inputs are and each stage's parameters, read from a TOML file.

Paths in the file are relative to the file. Sections are named after the stages; a key left out takes the
stage's default, and an unknown key is an error (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any, get_args, get_type_hints

from pbbq.tasks.artifacts import REPO_ROOT, display_path
from pbbq.tasks.crawl import CrawlParams
from pbbq.tasks.disambiguate import DisambiguateParams
from pbbq.tasks.diversity import DiversityParams
from pbbq.tasks.inputs import load_unknown_phrases
from pbbq.tasks.instantiate import InstantiateParams
from pbbq.tasks.kappa_gate import GateParams
from pbbq.tasks.llm import LLMConfig
from pbbq.tasks.names import NamesParams
from pbbq.tasks.publish import PublishParams
from pbbq.tasks.survey_filter import SurveyParams
from pbbq.tasks.translate import TranslateParams

SAMPLE_CONFIG = REPO_ROOT / "configs" / "sample.toml"
INPUTS = ("questionnaire", "responses", "templates", "ratings", "unknown_phrases", "names", "glossary")
OPTIONAL_INPUTS = ("disambiguation_overrides",)


class ConfigError(ValueError):
    """A configuration file that cannot be used as it is."""


SECTIONS = (
    "inputs",
    "llm",
    "crawl",
    "survey_filter",
    "kappa_gate",
    "disambiguate",
    "instantiate",
    "names",
    "translate",
    "diversity",
    "publish",
)
"""The top-level sections a build configuration may have; anything else is a typo, never ignored."""

RANGES: dict[str, dict[str, tuple[float | None, float | None]]] = {
    "crawl": {"max_posts": (1, None), "timeout": (1e-9, None), "min_interval": (0, None), "max_retries": (0, 20)}
    | {"backoff": (0, None), "max_wait": (0, None), "similarity": (1e-9, 1), "ngram_min": (1, 10)}
    | {"ngram_max": (1, 10), "max_examples": (1, None)},
    "survey_filter": {"threshold": (0, 1), "confidence": (0.5, 0.999999), "population": (1, None)}
    | {"target_margin": (1e-9, 1)},
    "kappa_gate": {"min_kappa": (-1, 1), "min_relevance": (1, 3)},
    "disambiguate": {"max_attempts": (1, 20), "max_sentences": (1, None)}
    | {"min_persian_share": (0, 1), "max_repeat_share": (0, 1)},
    "instantiate": {"seed": (0, 2**32 - 1)},
    "names": {"seed": (0, 2**32 - 1), "n_seeds": (1, 100)},
    "translate": {"min_chrf": (0, 100), "max_attempts": (1, 20)},
    "diversity": {"homogenization_num_layers": (1, None), "homogenization_max_pairs": (1, None)}
    | {"homogenization_batch_size": (1, None), "seed": (0, 2**32 - 1)},
}
"""The allowed range (inclusive; None: unbounded) of every numeric stage parameter."""


def _names(keys: Iterable[str]) -> str:
    """Keys of a configuration, for a one-line message: as they are, or their ``repr`` if not printable."""
    return ", ".join(key if key.isprintable() else repr(key) for key in keys)


def _check_value(path: Path, section: str, key: str, value: Any, expected: Any) -> None:
    """A parameter's type (from its dataclass annotation) and range (:data:`RANGES`), the key named."""
    allowed = get_args(expected) or (expected,)
    kinds = tuple(k for k in (bool, int, float, str) if k in allowed)
    numeric = not isinstance(value, bool) and isinstance(value, int | float)
    fits = (
        (value is None and type(None) in allowed)
        or (isinstance(value, bool) and bool in kinds)
        or (numeric and (float in kinds or (int in kinds and isinstance(value, int))))
        or (isinstance(value, str) and str in kinds)
    )
    if kinds and not fits:
        raise ConfigError(f"{path}: [{section}] {key} = {value!r} is not {' or '.join(k.__name__ for k in kinds)}")
    if numeric and value != value:
        raise ConfigError(f"{path}: [{section}] {key} = nan is not a number")
    if isinstance(value, str) and "\0" in value:
        raise ConfigError(f"{path}: [{section}] {key} = {value!r} holds a NUL character")
    low, high = RANGES.get(section, {}).get(key, (None, None))
    if numeric and ((low is not None and value < low) or (high is not None and value > high)):
        bounds = f"{'-∞' if low is None else low} … {'∞' if high is None else high}"
        raise ConfigError(f"{path}: [{section}] {key} = {value!r} is outside {bounds}")


@dataclass(frozen=True)
class BuildConfig:
    path: Path
    inputs: dict[str, Path]
    llm: LLMConfig
    transcript: Path | None
    """Recorded LLM answers (JSONL) imported into the response store before the LLM stages."""
    survey_filter: SurveyParams
    kappa_gate: GateParams
    disambiguate: DisambiguateParams
    instantiate: InstantiateParams
    names: NamesParams
    translate: TranslateParams
    diversity: DiversityParams
    publish: PublishParams
    crawl: CrawlParams
    """Stage 01: the sources file (paths resolved against the configuration) and the crawl's parameters."""

    def parameters(self) -> dict[str, Any]:
        """Every parameter of the build, for the manifest."""
        return {
            "config": display_path(self.path),
            "crawl": self.crawl.as_report(),
            "survey_filter": self.survey_filter.__dict__,
            "kappa_gate": self.kappa_gate.__dict__,
            "disambiguate": self.disambiguate.__dict__,
            "instantiate": self.instantiate.__dict__,
            "names": self.names.__dict__,
            "translate": self.translate.__dict__,
            "diversity": self.diversity.__dict__,
            "llm": {k: v for k, v in self.llm.__dict__.items() if k not in ("prices", "store_path")}
            | {"transcript": display_path(self.transcript) if self.transcript else None, "rule": asdict(self.llm.rule)},
            "publish": self.publish.__dict__,
        }


def _table(path: Path, raw: dict[str, Any], name: str) -> dict[str, Any]:
    values = raw.get(name, {})
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: {name} must be a section [{name}], not a value")
    return values


def _file(path: Path, section: str, key: str, value: Any) -> Path:
    """A path of the configuration (a string, relative to its file), resolved."""
    if not isinstance(value, str) or "\0" in value:
        raise ConfigError(f"{path}: [{section}] {key} = {value!r} is not a path (a string)")
    return (path.parent / value).resolve()


def _llm_section(path: Path, raw: dict[str, Any]) -> tuple[dict[str, Any], Path | None]:
    """``[llm]`` checked by type before :class:`LLMConfig` checks its values, and its transcript path."""
    llm = dict(_table(path, raw, "llm"))
    hints = get_type_hints(LLMConfig)
    for key, value in llm.items():
        if key in hints and key not in ("store_path", "model_rule", "prices"):
            _check_value(path, "llm", key, value, hints[key])
    prices = llm.get("prices", {})
    if not isinstance(prices, dict) or not all(
        isinstance(pair, list)
        and len(pair) == 2
        and all(not isinstance(p, bool) and isinstance(p, int | float) and p >= 0 for p in pair)
        for pair in prices.values()
    ):
        raise ConfigError(
            f"{path}: [llm] prices = {prices!r} is not a table of [usd per 1M input tokens, usd per 1M output tokens]"
        )
    transcript = llm.pop("transcript", None)
    if "store_path" in llm:
        llm["store_path"] = _file(path, "llm", "store_path", llm["store_path"])
    return llm, None if transcript in (None, "") else _file(path, "llm", "transcript", transcript)


def _section(path: Path, raw: dict[str, Any], name: str, kind: Any) -> Any:
    values = _table(path, raw, name)
    params = kind.func if isinstance(kind, partial) else kind
    known = {f.name for f in fields(params)} - {"unknown_phrases"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{path}: [{name}] has unknown key(s) {_names(unknown)}; known: {', '.join(sorted(known))}")
    hints = get_type_hints(params)
    for key, value in values.items():
        _check_value(path, name, key, value, hints[key])
    try:
        return kind(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [{name}] {exc}") from None


def load_config(path: Path | None = None) -> BuildConfig:
    """Read a build configuration; ``None`` is the bundled sample."""
    path = (path or SAMPLE_CONFIG).resolve()
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown_sections = sorted(set(raw) - set(SECTIONS))
    if unknown_sections:
        raise ConfigError(
            f"{path}: unknown section(s) or key(s) {_names(unknown_sections)}; known: {', '.join(SECTIONS)}"
        )
    declared = _table(path, raw, "inputs")
    missing = [name for name in INPUTS if name not in declared]
    if missing:
        raise ConfigError(f"{path}: [inputs] is missing {', '.join(missing)}")
    phrases = load_unknown_phrases(_file(path, "inputs", "unknown_phrases", declared["unknown_phrases"]))
    unknown = sorted(set(declared) - set(INPUTS) - set(OPTIONAL_INPUTS))
    if unknown:
        raise ConfigError(f"{path}: [inputs] has unknown key(s) {_names(unknown)}")
    llm, transcript = _llm_section(path, raw)
    try:
        llm_config = LLMConfig.from_mapping(llm)
    except ValueError as exc:
        raise ConfigError(f"{path}: [llm] {exc}") from None
    return BuildConfig(
        path=path,
        inputs={
            name: _file(path, "inputs", name, declared[name])
            for name in (*INPUTS, *OPTIONAL_INPUTS)
            if name in declared
        },
        llm=llm_config,
        transcript=transcript,
        survey_filter=_section(path, raw, "survey_filter", SurveyParams),
        kappa_gate=_section(path, raw, "kappa_gate", GateParams),
        disambiguate=_section(path, raw, "disambiguate", DisambiguateParams),
        instantiate=_section(path, raw, "instantiate", partial(InstantiateParams, tuple(phrases["phrase_fa"]))),
        names=_section(path, raw, "names", NamesParams),
        translate=_section(path, raw, "translate", TranslateParams),
        diversity=_section(path, raw, "diversity", DiversityParams),
        publish=_section(path, raw, "publish", PublishParams),
        crawl=_section(path, raw, "crawl", CrawlParams).relative_to(path.parent),
    )
