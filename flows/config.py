"""A build's configuration: where its inputs are and each stage's parameters, read from a TOML file.

Paths in the file are relative to the file. Sections are named after the stages; a key left out takes the
stage's default, and an unknown key is an error (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tasks.artifacts import REPO_ROOT
from tasks.instantiate import InstantiateParams
from tasks.kappa_gate import GateParams
from tasks.survey_filter import SurveyParams

SAMPLE_CONFIG = REPO_ROOT / "configs" / "sample.toml"
INPUTS = ("questionnaire", "responses", "templates", "ratings")


class ConfigError(ValueError):
    """A configuration file that cannot be used as it is."""


@dataclass(frozen=True)
class BuildConfig:
    path: Path
    inputs: dict[str, Path]
    survey_filter: SurveyParams
    kappa_gate: GateParams
    instantiate: InstantiateParams

    def parameters(self) -> dict[str, Any]:
        """Every parameter of the build, for the manifest."""
        return {
            "config": str(self.path),
            "survey_filter": self.survey_filter.__dict__,
            "kappa_gate": self.kappa_gate.__dict__,
            "instantiate": self.instantiate.__dict__,
        }


def _section(path: Path, raw: dict[str, Any], name: str, kind: type) -> Any:
    values = raw.get(name, {})
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"{path}: [{name}] has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    if "unknown_phrases" in values:
        values = {**values, "unknown_phrases": tuple(values["unknown_phrases"])}
    return kind(**values)


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
    return BuildConfig(
        path=path,
        inputs={name: (path.parent / declared[name]).resolve() for name in INPUTS},
        survey_filter=_section(path, raw, "survey_filter", SurveyParams),
        kappa_gate=_section(path, raw, "kappa_gate", GateParams),
        instantiate=_section(path, raw, "instantiate", InstantiateParams),
    )
