"""A build's configuration: where its inputs are and each stage's parameters, read from a TOML file.

Paths in the file are relative to the file. Sections are named after the stages; a key left out takes the
stage's default, and an unknown key is an error (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from tasks.artifacts import REPO_ROOT, display_path
from tasks.disambiguate import DisambiguateParams
from tasks.diversity import DiversityParams
from tasks.inputs import load_unknown_phrases
from tasks.instantiate import InstantiateParams
from tasks.kappa_gate import GateParams
from tasks.llm import LLMConfig
from tasks.names import NamesParams
from tasks.publish import PublishParams
from tasks.survey_filter import SurveyParams
from tasks.translate import TranslateParams

SAMPLE_CONFIG = REPO_ROOT / "configs" / "sample.toml"
INPUTS = ("questionnaire", "responses", "templates", "ratings", "unknown_phrases", "names")
OPTIONAL_INPUTS = ("disambiguation_overrides",)


class ConfigError(ValueError):
    """A configuration file that cannot be used as it is."""


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

    def parameters(self) -> dict[str, Any]:
        """Every parameter of the build, for the manifest."""
        return {
            "config": display_path(self.path),
            "survey_filter": self.survey_filter.__dict__,
            "kappa_gate": self.kappa_gate.__dict__,
            "disambiguate": self.disambiguate.__dict__,
            "instantiate": self.instantiate.__dict__,
            "names": self.names.__dict__,
            "translate": self.translate.__dict__,
            "diversity": self.diversity.__dict__,
            "llm": {k: v for k, v in self.llm.__dict__.items() if k not in ("prices", "store_path")}
            | {"transcript": display_path(self.transcript) if self.transcript else None},
            "publish": self.publish.__dict__,
        }


def _section(path: Path, raw: dict[str, Any], name: str, kind: Any) -> Any:
    values = raw.get(name, {})
    known = {f.name for f in fields(kind.func if isinstance(kind, partial) else kind)} - {"unknown_phrases"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"{path}: [{name}] has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
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
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    declared = raw.get("inputs", {})
    missing = [name for name in INPUTS if name not in declared]
    if missing:
        raise ConfigError(f"{path}: [inputs] is missing {', '.join(missing)}")
    phrases = load_unknown_phrases((path.parent / declared["unknown_phrases"]).resolve())
    unknown = sorted(set(declared) - set(INPUTS) - set(OPTIONAL_INPUTS))
    if unknown:
        raise ConfigError(f"{path}: [inputs] has unknown key(s) {', '.join(unknown)}")
    llm = dict(raw.get("llm", {}))
    transcript = llm.pop("transcript", None)
    if "store_path" in llm:
        llm["store_path"] = (path.parent / llm["store_path"]).resolve()
    try:
        llm_config = LLMConfig.from_mapping(llm)
    except ValueError as exc:
        raise ConfigError(f"{path}: [llm] {exc}") from None
    return BuildConfig(
        path=path,
        inputs={
            name: (path.parent / declared[name]).resolve() for name in (*INPUTS, *OPTIONAL_INPUTS) if name in declared
        },
        llm=llm_config,
        transcript=(path.parent / transcript).resolve() if transcript else None,
        survey_filter=_section(path, raw, "survey_filter", SurveyParams),
        kappa_gate=_section(path, raw, "kappa_gate", GateParams),
        disambiguate=_section(path, raw, "disambiguate", DisambiguateParams),
        instantiate=_section(path, raw, "instantiate", partial(InstantiateParams, tuple(phrases["phrase_fa"]))),
        names=_section(path, raw, "names", NamesParams),
        translate=_section(path, raw, "translate", TranslateParams),
        diversity=_section(path, raw, "diversity", DiversityParams),
        publish=_section(path, raw, "publish", PublishParams),
    )
