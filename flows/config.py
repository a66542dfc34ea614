"""A build's configuration: where its inputs are and each stage's parameters, read from a TOML file.

Paths in the file are relative to the file. Sections are named after the stages; a key left out takes the
stage's default, and an unknown key is an error (a typo must not silently fall back to a default). A file may
start from another one in its folder (``inherit = "sample.toml"``): each section of that file, with this file's
keys over its own.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any, get_args, get_type_hints

from ..tasks.core.artifacts import REPO_ROOT
from ..tasks.core.example_cap import MAX_EXAMPLES_PER_TEMPLATE, ExampleCap
from ..tasks.core.inputs import UNKNOWN_PHRASES, load_unknown_phrases
from ..tasks.core.run_folder import display_path
from ..tasks.core.stage import Input, Pipeline, Resource
from ..tasks.crawl.sources import CrawlParams
from ..tasks.disambiguate import DisambiguateParams
from ..tasks.instantiate import InstantiateParams
from ..tasks.kappa_gate import GateParams
from ..tasks.llm import STAND_IN_MODE, LLMConfig
from ..tasks.names import NamesParams
from ..tasks.publish import PublishParams
from ..tasks.survey_filter import SurveyParams
from ..tasks.text.languages import BUILTIN, Languages, UnknownLanguageError, load_languages, using
from ..tasks.translate.pair import TranslateParams
from ..tasks.translate.requests import missing_prompt_files
from .pipeline import PIPELINE, pipeline_for, source_of, translate_stages

SAMPLE_CONFIG = REPO_ROOT / "configs" / "sample.toml"


def stage_params(pipeline: Pipeline = PIPELINE) -> dict[str, type]:
    """The configuration section of every stage that has parameters (``Stage.params``), in pipeline order."""
    return {stage.name: stage.params for stage in pipeline if stage.params is not None}


def sections(pipeline: Pipeline = PIPELINE) -> tuple[str, ...]:
    """The top-level sections a build configuration may have; anything else is a typo, never ignored."""
    return ("input", "inputs", "llm", "languages", "build", *stage_params(pipeline))


def ranges(pipeline: Pipeline = PIPELINE) -> dict[str, dict[str, tuple[float | None, float | None]]]:
    """The allowed range (inclusive; None: unbounded) of every numeric stage parameter (``Stage.ranges``)."""
    return {stage.name: dict(stage.ranges) for stage in pipeline if stage.ranges}


def input_files(pipeline: Pipeline = PIPELINE) -> tuple[Input, ...]:
    """The inputs its stages declare that ``[inputs]`` names (``Input.section``), in the order they load."""
    return tuple(source for source in pipeline.inputs() if source.load is not None and source.section == "inputs")


class ConfigError(ValueError):
    """A configuration file that cannot be used as it is."""


def _names(keys: Iterable[str]) -> str:
    """Keys of a configuration, for a one-line message: as they are, or their ``repr`` if not printable."""
    return ", ".join(key if key.isprintable() else repr(key) for key in keys)


def _check_value(
    path: Path, section: str, key: str, value: Any, expected: Any, limits: Mapping[str, tuple[float | None, ...]]
) -> None:
    """A parameter's type (from its dataclass annotation) and range (``limits``: its section's :func:`ranges`),
    the key named."""
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
    low, high = limits.get(key, (None, None))
    if numeric and ((low is not None and value < low) or (high is not None and value > high)):
        bounds = f"{'-∞' if low is None else low} … {'∞' if high is None else high}"
        raise ConfigError(f"{path}: [{section}] {key} = {value!r} is outside {bounds}")


@dataclass(frozen=True)
class RunOptions:
    """``[build]``: how the build runs, not what it builds (the dataset and manifest are the same at any value, so
    the manifest does not list them)."""

    max_parallel_stages: int | None = None
    """How many stages may run at once (None: as many as the task runner has workers,
    :func:`pbbq.flows.runner.parallel_stages`); each running stage holds its input frames and results."""
    max_examples_per_template: int = MAX_EXAMPLES_PER_TEMPLATE
    """The most examples one template may build (an adaptation sheet's row, or a template of PBBQ's templates file),
    estimated before any is built (:class:`pbbq.tasks.core.example_cap.ExampleCap`): one past it is refused in one
    line."""


RUN_OPTION_RANGES: dict[str, tuple[float | None, float | None]] = {
    "max_parallel_stages": (1, None),
    "max_examples_per_template": (1, None),
}


@dataclass(frozen=True)
class BuildConfig:
    path: Path
    inputs: dict[str, Path]
    llm: LLMConfig
    transcript: Path | None
    """Recorded LLM answers (JSONL) imported into the response store before the LLM stages."""
    stages: dict[str, Any]
    """Each stage's parameters by its section name (:meth:`params`; the PBBQ stages' also as typed properties,
    ``build.names`` is ``stages["names"]``)."""
    pipeline: Pipeline = PIPELINE
    """The stages it runs (:func:`pbbq.flows.pipeline.pipeline_for`)."""
    languages: tuple[Path, ...] = ()
    """``[languages] modules``: the language files and folders it adds to the builder's own languages."""
    registry: Languages = field(default_factory=lambda: BUILTIN)
    """Its languages: the builder's and those of :attr:`languages` (:func:`pbbq.tasks.text.languages.using` makes
    them the build's)."""
    running: RunOptions = RunOptions()
    """``[build]``: how the stages run (:class:`RunOptions`)."""

    def params(self, section: str) -> Any:
        """The parameters of the stage whose configuration section is ``section``."""
        return self.stages[section]

    @property
    def crawl(self) -> CrawlParams:
        return self.stages["crawl"]

    @property
    def survey_filter(self) -> SurveyParams:
        return self.stages["survey_filter"]

    @property
    def kappa_gate(self) -> GateParams:
        return self.stages["kappa_gate"]

    @property
    def disambiguate(self) -> DisambiguateParams:
        return self.stages["disambiguate"]

    @property
    def instantiate(self) -> InstantiateParams:
        return self.stages["instantiate"]

    @property
    def names(self) -> NamesParams:
        return self.stages["names"]

    @property
    def translate(self) -> TranslateParams:
        """``[translate]``: the first target's; another target's are ``params("translate_<code>")``."""
        return self.stages["translate"]

    @property
    def publish(self) -> PublishParams:
        return self.stages["publish"]

    def input_paths(self) -> dict[str, Path]:
        """The file of every input its pipeline declares, by name: from ``[inputs]``, or from the stage section
        that names it (the crawl's ``lexicon_path``); an optional input left out is absent."""
        return {
            source.name: self.inputs[source.config_key]
            if source.section == "inputs"
            else getattr(self.params(source.section), source.config_key)
            for source in self.pipeline.inputs()
            if source.load is not None and (source.section != "inputs" or source.config_key in self.inputs)
        }

    def example_cap(self) -> ExampleCap:
        """``[build] max_examples_per_template`` with the file of the templates it caps, the adaptation sheet or
        PBBQ's templates file (the ``example_cap`` run value)."""
        paths = self.input_paths()
        name = "adapt_sheet" if "adapt_sheet" in paths else "templates"
        return ExampleCap(self.running.max_examples_per_template, paths.get(name), name)

    def with_publish(
        self, repo_id: str | None = None, dry_run: bool | None = None, force_synthetic: bool | None = None
    ) -> BuildConfig:
        """The configuration with ``[publish]``'s repo_id, dry_run and force_synthetic overridden where given."""
        given = {"repo_id": repo_id, "dry_run": dry_run, "force_synthetic": force_synthetic}
        changes = {k: v for k, v in given.items() if v is not None}
        if not changes:
            return self
        return replace(self, stages={**self.stages, "publish": replace(self.stages["publish"], **changes)})

    def with_stand_in(self) -> BuildConfig:
        """The configuration with ``[llm] mode = "stand-in"`` (``pbbq build --stand-in``)."""
        return replace(self, llm=replace(self.llm, mode=STAND_IN_MODE))

    def parameters(self) -> dict[str, Any]:
        """Every parameter of the build, for the manifest."""
        return {
            "config": display_path(self.path),
            **{name: _as_report(params) for name, params in self.stages.items()},
            "llm": {k: v for k, v in self.llm.__dict__.items() if k not in ("prices", "store_path")}
            | {"transcript": display_path(self.transcript) if self.transcript else None, "rule": asdict(self.llm.rule)},
        }


def _as_report(params: Any) -> dict[str, Any]:
    as_report = getattr(params, "as_report", None)
    return as_report() if as_report else params.__dict__


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


def check_store_path(store: Path, config: Path) -> None:
    """``[llm] store_path`` must lie outside every run folder (a folder holding a ``manifest.json``): a run's files
    are written once and each is listed in its manifest, and a store grows with every build."""
    for folder in (store, *store.parents):
        if (folder / "manifest.json").is_file():
            raise ConfigError(
                f"{config}: [llm] store_path = {store} lies inside the run folder {folder}; put the response store "
                "outside every run (by default it is <outputs>/.cache/llm/responses.sqlite)"
            )


def _llm_section(path: Path, raw: dict[str, Any]) -> tuple[dict[str, Any], Path | None]:
    """``[llm]`` checked by type before :class:`LLMConfig` checks its values, and its transcript path."""
    llm = dict(_table(path, raw, "llm"))
    hints = get_type_hints(LLMConfig)
    for key, value in llm.items():
        if key in hints and key not in ("store_path", "model_rule", "prices"):
            _check_value(path, "llm", key, value, hints[key], {})
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
        check_store_path(llm["store_path"], path)
    return llm, None if transcript in (None, "") else _file(path, "llm", "transcript", transcript)


def _llm_config(raw: dict[str, Any], llm: dict[str, Any]) -> tuple[Any, str | None]:
    """:class:`LLMConfig` of ``[llm]`` (checked by :func:`_llm_section`), or what is wrong with it in words (a
    missing section said as one)."""
    try:
        return LLMConfig.from_mapping(llm), None
    except ValueError as exc:
        if "llm" not in raw:
            return None, "the [llm] section is missing (its provider and model, at least)"
        return None, f"[llm] {exc}"


def _section(
    path: Path, raw: dict[str, Any], name: str, kind: Any, limits: Mapping[str, tuple[float | None, ...]]
) -> Any:
    values = _table(path, raw, name)
    params: Any = kind.func if isinstance(kind, partial) else kind  # the dataclass of the section
    known = {f.name for f in fields(params)} - {"unknown_phrases"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{path}: [{name}] has unknown key(s) {_names(unknown)}; known: {', '.join(sorted(known))}")
    hints = get_type_hints(params)
    for key, value in values.items():
        _check_value(path, name, key, value, hints[key], limits)
    try:
        return kind(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [{name}] {exc}") from None


def _language_modules(path: Path, raw: dict[str, Any]) -> tuple[tuple[Path, ...], Languages]:
    """``[languages] modules``: language files (a TOML declaring a language, or a Python module assigning
    ``LANGUAGE``) and folders of them, relative to the file, and the build's languages with them
    (:func:`pbbq.tasks.text.languages.load_languages`; docs/languages.md). A Python module is code the build runs."""
    section = _table(path, raw, "languages")
    unknown = sorted(set(section) - {"modules"})
    if unknown:
        raise ConfigError(f"{path}: [languages] has unknown key(s) {_names(unknown)}; known: modules")
    modules = section.get("modules", [])
    if not isinstance(modules, list):
        raise ConfigError(f"{path}: [languages] modules = {modules!r} is not a list of files or folders")
    paths = tuple(_file(path, "languages", "modules", module) for module in modules)
    try:
        return paths, load_languages(paths)
    except UnknownLanguageError as exc:
        raise ConfigError(f"{path}: [languages] modules: {exc}") from None


def _check_prompts(path: Path, pipeline: Pipeline) -> None:
    """Every translate stage's prompt files exist (its pair's, in its target's prompt folder), all missing ones
    named in one line (``targets = ["fa"]`` on the adaptation path needs ``translate.en-fa.txt``, …)."""
    for stage in pipeline:
        pair = stage.inputs.get("pair")
        if not isinstance(pair, Resource):
            continue
        missing = missing_prompt_files(pair.load())
        if missing:
            names = ", ".join(file.name for file in missing)
            raise ConfigError(
                f"{path}: [translate] {stage.name}: missing prompt file(s) {names} in {missing[0].parent} "
                "(docs/languages.md says what each holds)"
            )


def _targets(path: Path, raw: dict[str, Any], source: str, languages: Languages) -> tuple[str, ...] | None:
    """``[translate] targets``, parsed once and checked: distinct language codes other than ``source``, the input
    path's language (``()``: no translation, the source language's configs only); None: left out."""
    section = _table(path, raw, "translate")
    if "targets" not in section:
        return None
    targets = section["targets"]
    known = [code for code in languages if code != source]
    if not isinstance(targets, list) or not all(isinstance(code, str) for code in targets):
        raise ConfigError(f"{path}: [translate] targets = {targets!r} is not a list of language codes")
    wrong = [code for code in targets if code not in known]
    if wrong or len(set(targets)) != len(targets):
        problem = f"{wrong[0]!r} is not one of {', '.join(known)}" if wrong else "names a language twice"
        raise ConfigError(f"{path}: [translate] targets = {targets!r}: {problem}")
    return tuple(targets)


def _translate_sections(path: Path, raw: dict[str, Any], pipeline: Pipeline) -> dict[str, Any]:
    """The raw configuration as the stages read it: without ``[translate] targets`` (and without ``[translate]``
    when the pipeline translates into no language), and with the section of each translate stage after the first
    (``[translate_ur]``, named by the stage) filled from ``[translate]`` where it leaves a key out."""
    section = _table(path, raw, "translate")
    if "targets" not in section:
        return raw
    stages = translate_stages(pipeline)
    if not stages:  # its other keys (inherited ones too) configure no stage
        return {key: value for key, value in raw.items() if key != "translate"}
    shared = {key: value for key, value in section.items() if key != "targets"}
    further = {stage.name: shared | _table(path, raw, stage.name) for stage in stages[1:]}
    return raw | {"translate": shared} | further


def _translation_inputs(raw: dict[str, Any], source: str, pipeline: Pipeline, languages: Languages) -> set[str]:
    """The ``[inputs]`` keys only translate stages read (the glossary, the targets' 'unknown' phrasings), when
    ``pipeline`` translates into no language (``targets = []``): named, not read, so that a configuration turns
    translation off by its targets alone."""
    if translate_stages(pipeline):
        return set()
    target = next(code for code in languages if code != source)
    translating = pipeline_for(raw, (target,))
    return {source.config_key for source in input_files(translating)}


def _read(path: Path, inheriting: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The TOML of a configuration file, with the sections of the file it inherits from (``inherit``) under its own
    keys, key by key."""
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    if "inherit" not in raw:
        return raw
    name = raw.pop("inherit")
    base = path.parent / name if isinstance(name, str) and "\0" not in name else None
    if base is None or base.resolve().parent != path.parent or base.resolve() in (path, *inheriting):
        raise ConfigError(f"{path}: inherit = {name!r} is not another configuration file in its folder")
    inherited = _read(base.resolve(), (path, *inheriting))
    return inherited | {
        key: inherited[key] | value if isinstance(value, dict) and isinstance(inherited.get(key), dict) else value
        for key, value in raw.items()
    }


def load_config(path: Path | None = None, pipeline: Pipeline | None = None) -> BuildConfig:
    """Read a build configuration; ``None`` is the bundled sample. ``pipeline``: the stages it configures (default:
    the one the configuration chooses, :func:`pipeline_for`)."""
    path = (path or SAMPLE_CONFIG).resolve()
    raw = _read(path)
    modules, languages = _language_modules(path, raw)
    with using(languages):
        return _load(path, raw, pipeline, modules, languages)


def _load(
    path: Path, raw: dict[str, Any], pipeline: Pipeline | None, modules: tuple[Path, ...], languages: Languages
) -> BuildConfig:
    """:func:`load_config` with the build's languages in use."""
    try:
        source = source_of(raw)  # checks [input] path, which pipeline_for reads too
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    targets = _targets(path, raw, source, languages)
    pipeline = pipeline or pipeline_for(raw, targets)
    _check_prompts(path, pipeline)
    unknown_input = sorted(set(_table(path, raw, "input")) - {"path"})
    if unknown_input:
        raise ConfigError(f"{path}: [input] has unknown key(s) {_names(unknown_input)}; known: path")
    raw = _translate_sections(path, raw, pipeline)
    known_sections = sections(pipeline)
    unknown_sections = sorted(set(raw) - set(known_sections))
    if unknown_sections:
        raise ConfigError(
            f"{path}: unknown section(s) or key(s) {_names(unknown_sections)}; known: {', '.join(known_sections)}"
        )
    declared = _table(path, raw, "inputs")
    kinds: dict[str, Any] = stage_params(pipeline)
    phrases = [UNKNOWN_PHRASES.config_key] * ("instantiate" in kinds)  # PBBQ's instantiate reads them (below)
    files = list(dict.fromkeys([*(source.config_key for source in input_files(pipeline)), *phrases]))
    required = [*(source.config_key for source in input_files(pipeline) if not source.optional), *phrases]
    required = list(dict.fromkeys(required))
    missing = [key for key in required if key not in declared]
    llm, transcript = _llm_section(path, raw)
    llm_config, llm_problem = _llm_config(raw, llm)
    problems = ([f"[inputs] is missing {', '.join(missing)}"] if missing else []) + (
        [llm_problem] if llm_problem else []
    )
    if problems:  # what the configuration lacks, all at once
        raise ConfigError(f"{path}: {'; '.join(problems)}")
    if "instantiate" in kinds:  # PBBQ's instantiate takes its 'unknown' options from an input file
        phrases = load_unknown_phrases(_file(path, "inputs", "unknown_phrases", declared["unknown_phrases"]))
        kinds["instantiate"] = partial(kinds["instantiate"], tuple(phrases["phrase_fa"]))
    unknown = sorted(set(declared) - set(files) - _translation_inputs(raw, source, pipeline, languages))
    if unknown:
        raise ConfigError(f"{path}: [inputs] has unknown key(s) {_names(unknown)}")
    limits = ranges(pipeline)
    stages = {name: _section(path, raw, name, kind, limits.get(name, {})) for name, kind in kinds.items()}
    running = _section(path, raw, "build", RunOptions, RUN_OPTION_RANGES)
    return BuildConfig(
        path=path,
        inputs={key: _file(path, "inputs", key, declared[key]) for key in files if key in declared},
        llm=llm_config,
        transcript=transcript,
        stages={
            name: params.relative_to(path.parent) if hasattr(params, "relative_to") else params
            for name, params in stages.items()
        },
        pipeline=pipeline,
        languages=modules,
        registry=languages,
        running=running,
    )
