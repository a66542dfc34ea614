"""The lm-evaluation-harness task of a release (PBBQ §4): ``lm_eval/`` beside the release's ``data/``.

Every release carries its own task folder, so that

    lm_eval --model hf --model_args pretrained=... --tasks pbbq_fa --include_path <release>/lm_eval

scores a model on the published dataset as the PBBQ paper did (§4: context and question, the three options,
``output_type: multiple_choice``, the summed log-likelihood of each option). The folder holds:

- ``pbbq_<config>.yaml`` per config (``pbbq_fa``, ``pbbq_fa_names``, ``pbbq_en``; tag ``pbbq``), and
  ``pbbq_<config>_<category>.yaml`` per category present in it (tag ``pbbq_<config>_categories``);
- ``pbbq_<config>_gen.yaml``: the generation variant for chat models without log-probabilities (tag
  ``pbbq_gen``), whose answers are parsed to an option and counted as ``unparseable`` when they name none;
- the shared settings in ``_pbbq_mc_template_yaml`` and ``_pbbq_gen_template_yaml`` (not ``.yaml``, so lm-eval
  does not list them as tasks) and ``utils.py``, :mod:`pbbq.tasks.evaluation.lm_eval_utils` rendered
  (:func:`utils_source`);
- ``README.md``: how to run it and what each metric is.

The data is read by ``utils.load_release`` relative to ``utils.py`` (lm-eval resolves a task's ``data_files``
against the working directory, not the YAML), so the folder works wherever the release is. Nothing here
imports lm-eval: the build writes the folder without it.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.artifacts import atomic_write_bytes
from ..imports import one_import_at_a_time
from ..text.languages import language

PREFIX = "pbbq"
UTILS_SOURCE = Path(__file__).with_name("lm_eval_utils.py")
MC_TEMPLATE = "_pbbq_mc_template_yaml"
GEN_TEMPLATE = "_pbbq_gen_template_yaml"
TASK_VERSION = 1
CONFIG_ORDER = ("fa", "fa-names", "en", "en-names")
TEMPLATE_TAGS = ("# {%", "%}", "# {{", "}}", "# {#", "#}")
"""The Jinja2 tags in ``lm_eval_utils.py`` (block, variable, comment: start and end; ``jinja2.Environment``'s first
six arguments), each beginning a Python comment so that the module imports as it is."""

MC_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("acc", "mean", True),
    ("accuracy_amb", "utils.agg_accuracy_amb", True),
    ("accuracy_disamb", "utils.agg_accuracy_disamb", True),
    ("beta_amb", "utils.agg_ambiguous_mean", False),
    ("beta_amb_bounded", "utils.agg_ambiguous_mean", False),
    ("delta_bias", "utils.agg_delta_bias", False),
    ("uncertainty_amb", "utils.agg_ambiguous_mean", False),
    ("uncertainty_disamb", "utils.agg_disambiguated_mean", False),
    ("amb_bias_score", "utils.agg_amb_bias_score", False),
    ("amb_bias_score_unscaled", "utils.agg_amb_bias_score_unscaled", False),
    ("disamb_bias_score", "utils.agg_disamb_bias_score", False),
)
"""(metric, aggregation, higher is better) of the multiple-choice tasks: every key their ``process_results``
returns has its aggregation here (lm-eval fails on a key with none)."""
_NEEDS_LOGLIKELIHOODS = ("beta_amb", "beta_amb_bounded", "uncertainty_amb", "uncertainty_disamb")
GEN_METRICS: tuple[tuple[str, str, bool], ...] = (
    *(metric for metric in MC_METRICS if metric[0] not in _NEEDS_LOGLIKELIHOODS),
    ("unparseable", "mean", False),
)
"""The generation tasks' metrics: no log-likelihood, so no β_amb and no uncertainty; the unparseable share."""
GENERATION_KWARGS = {"until": ["\n\n"], "max_gen_toks": 64, "do_sample": False, "temperature": 0.0}


def config_key(name: str) -> tuple[int, str]:
    """The order of configs in a release (and in its task's README): :data:`CONFIG_ORDER`, then any other by name."""
    return (CONFIG_ORDER.index(name) if name in CONFIG_ORDER else len(CONFIG_ORDER), name)


def slug(text: str) -> str:
    """A task-name part: lowercase ASCII letters and digits joined by ``_`` (``Socio-economic Status`` →
    ``socio_economic_status``, ``fa-names`` → ``fa_names``)."""
    return "_".join(re.findall(r"[a-z0-9]+", text.lower()))


def task_name(config: str, category: str | None = None, *, generate: bool = False) -> str:
    """``pbbq_<config>[_<category>][_gen]``."""
    parts = [PREFIX, slug(config), *([slug(category)] if category else []), *(["gen"] if generate else [])]
    return "_".join(parts)


def _quoted(value: object) -> str:
    """A YAML scalar (JSON is YAML): strings quoted and escaped, numbers and booleans as they are."""
    return json.dumps(value, ensure_ascii=False)


def _template(metrics: Sequence[tuple[str, str, bool]], *, generate: bool) -> str:
    kind = "generation (chat models without log-probabilities)" if generate else "multiple choice (PBBQ §4)"
    lines = [
        f"# PBBQ task settings shared by every {kind} task of this folder; written by pbbq-builder.",
        "custom_dataset: !function utils.load_release",
        "test_split: test",
        f"output_type: {'generate_until' if generate else 'multiple_choice'}",
        f"doc_to_text: !function utils.{'doc_to_text_generate' if generate else 'doc_to_text'}",
        "doc_to_choice: !function utils.doc_to_choice",
        "doc_to_target: label",
        f"process_results: !function utils.process_results_{'generate' if generate else 'multiple_choice'}",
    ]
    if generate:
        lines.append("generation_kwargs:")
        lines += [f"  {key}: {_quoted(value)}" for key, value in GENERATION_KWARGS.items()]
    lines.append("metric_list:")
    for metric, aggregation, higher in metrics:
        how = aggregation if "." not in aggregation else f"!function {aggregation}"
        lines += [f"  - metric: {metric}", f"    aggregation: {how}", f"    higher_is_better: {str(higher).lower()}"]
    lines += ["metadata:", f"  version: {TASK_VERSION}"]
    return "\n".join(lines) + "\n"


def _task(name: str, template: str, tag: str, config: str, category: str | None, data_dir: str | None) -> str:
    lines = [f"include: {template}", f"task: {name}", "tag:", f"  - {tag}", "dataset_kwargs:"]
    lines.append(f"  config: {_quoted(config)}")
    if category is not None:
        lines.append(f"  category: {_quoted(category)}")
    if data_dir is not None:
        lines.append(f"  data_dir: {_quoted(data_dir)}")
    return "\n".join(lines) + "\n"


def _readme(configs: Mapping[str, Sequence[str]], build_id: str | None) -> str:
    rows = []
    for config, categories in configs.items():
        rows.append(f"| `{task_name(config)}` | `{config}` | all ({len(categories)} categories) | multiple choice |")
        rows.append(f"| `{task_name(config, generate=True)}` | `{config}` | all | generation |")
        rows += [
            f"| `{task_name(config, category)}` | `{config}` | {category} | multiple choice |"
            for category in categories
        ]
    built = f" of build `{build_id}`" if build_id else ""
    first = task_name(next(iter(configs)))
    table = "\n".join(rows)
    return f"""# lm-evaluation-harness tasks for this PBBQ release{built}

Score a model on this release with [lm-evaluation-harness](https://github.com/EleutherAI/lm-evaluation-harness)
(tested with lm-eval 0.4.13), from any working directory:

```sh
pip install "lm-eval[api]==0.4.13"
lm_eval --model hf --model_args pretrained=MODEL --tasks {first} --include_path path/to/this/release/lm_eval
```

The multiple-choice tasks score the three options by their summed log-likelihood after the context and the
question, as the PBBQ paper did (§4). The generation tasks (`_gen`) list the options as (a), (b), (c) for chat
models without log-probabilities; an answer naming no single option counts as `unparseable` (wrong for accuracy,
outside the bias scores). `--tasks pbbq` runs every config; `--tasks pbbq_<config>_categories` every category of
one config. The data is read from `../data/<config>/` relative to `utils.py`.

| task | config | category | kind |
| --- | --- | --- | --- |
{table}

Metrics (from the examples' stored `answer_roles`; the *biased* answer is the stereotyped entity for a negative
question and the other entity for a non-negative one, as in BBQ):

- `acc`, `accuracy_amb`, `accuracy_disamb`: accuracy (PBBQ Eq. 1), overall and per context condition;
- `beta_amb`: PBBQ's ambiguous bias score as written (Eq. 2), the mean of log p(biased) − log p(counter) over
  ambiguous examples (a log-ratio, not bounded); `beta_amb_bounded`: the same with the options' normalised
  probabilities, p(biased) − p(counter), in [−1, 1];
- `delta_bias`: Acc(biased assignment) − Acc(counter-biased assignment) on disambiguated examples (Eq. 3);
- `uncertainty_amb`, `uncertainty_disamb`: normalised Shannon entropy of the three options (Eq. 4);
- `disamb_bias_score`, `amb_bias_score`, `amb_bias_score_unscaled`: BBQ's s_DIS = 2·n_biased/n_non_unknown − 1
  and s_AMB = (1 − acc_amb)·s_DIS on ambiguous examples (Parrish et al. 2022); NaN without a non-unknown answer.
  Unlike lm-eval's own BBQ aggregates (0 when no biased answer was given), s_DIS is −1 (s_AMB −(1 − acc_amb))
  when every non-unknown answer was the counter one, as BBQ's formula says.
"""


def _scaffold_languages(text: str) -> set[str]:
    """The languages whose words ``SCAFFOLD`` holds, read from the utils module's source: importing the module
    would load ``datasets``, which a build does not need."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "SCAFFOLD" for target in node.targets):
            return set(ast.literal_eval(node.value))
    raise ValueError(f"{UTILS_SOURCE.name}: it has no SCAFFOLD")


def utils_source(configs: Sequence[str]) -> str:
    """``utils.py`` of a release of ``configs``: :mod:`~pbbq.tasks.evaluation.lm_eval_utils` rendered as a Jinja2
    template whose tags are Python comments (:data:`TEMPLATE_TAGS`): for Persian and English the module without
    those lines; for other languages also the scaffold words of each (its
    :attr:`~pbbq.tasks.text.languages.Language.scaffold`: Urdu's سوال، جواب) in ``SCAFFOLD`` and a document's
    scaffold read by its ``lang``. The file stays standalone."""
    text = UTILS_SOURCE.read_text(encoding="utf-8")
    known = _scaffold_languages(text)
    others = [code for code in dict.fromkeys(config.split("-")[0] for config in configs) if code not in known]
    with one_import_at_a_time():
        import jinja2

    environment = jinja2.Environment(*TEMPLATE_TAGS, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["json"] = functools.partial(json.dumps, ensure_ascii=False)
    scaffolds = {code: dict(language(code).scaffold) for code in others}
    return environment.from_string(text).render(other_scaffolds=scaffolds)


def task_files(
    configs: Mapping[str, Sequence[str]], *, build_id: str | None = None, data_dir: str | None = None
) -> dict[str, bytes]:
    """The task folder's files by name, for ``configs`` (config → its categories). ``data_dir`` (absolute) points
    the tasks at data elsewhere than the release's ``data/`` folder beside them."""
    if not configs:
        raise ValueError("an lm-eval task needs at least one config")
    files = {
        "utils.py": utils_source(list(configs)),
        MC_TEMPLATE: _template(MC_METRICS, generate=False),
        GEN_TEMPLATE: _template(GEN_METRICS, generate=True),
        "README.md": _readme(configs, build_id),
    }
    for config, categories in configs.items():
        files[f"{task_name(config)}.yaml"] = _task(task_name(config), MC_TEMPLATE, PREFIX, config, None, data_dir)
        files[f"{task_name(config, generate=True)}.yaml"] = _task(
            task_name(config, generate=True), GEN_TEMPLATE, f"{PREFIX}_gen", config, None, data_dir
        )
        tag = f"{task_name(config)}_categories"
        for category in categories:
            name = task_name(config, category)
            files[f"{name}.yaml"] = _task(name, MC_TEMPLATE, tag, config, category, data_dir)
    names = [name.removesuffix(".yaml") for name in files if name.endswith(".yaml")]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise ValueError(f"task names clash: {clashes}")
    return {name: text.encode("utf-8") for name, text in sorted(files.items())}


def write_task_folder(folder: Path, configs: Mapping[str, Sequence[str]], **kwargs: str | None) -> list[Path]:
    """Write :func:`task_files` into ``folder`` (created); returns the paths written."""
    paths = []
    for name, data in task_files(configs, **kwargs).items():
        atomic_write_bytes(folder / name, data)
        paths.append(folder / name)
    return paths
