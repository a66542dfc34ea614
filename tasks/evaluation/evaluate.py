"""Scoring models on a release with lm-evaluation-harness (PBBQ §4): the evaluate-pbbq flow's work.

- :class:`ModelSpec`: ``[NAME=]BACKEND:ARGS``, lm-eval's model name and its ``model_args``
  (``hf:pretrained=/models/x,dtype=float32``, ``local-completions:model=m,base_url=http://host/v1/completions,
  tokenizer_backend=remote``, ``openai-chat-completions:model=gpt-4o``). Chat backends, which give no prompt
  log-probabilities, run the release's generation task; every other backend the multiple-choice task. A key never
  travels in a spec: lm-eval's backends read it from the environment (:data:`KEY_VARIABLES`), and a secret
  argument written in a spec (``api_key=…``, any ``*key``, ``*token``, ``secret``, ``password``) is dropped
  before anything logs, stores or sends it (:func:`redact_spec` is how every message and record shows a spec).
- :func:`check_models`: what can be known before lm-eval starts (its extra installed, a local model's
  ``pretrained`` folder), each failure one line naming the ``--model``.
- :func:`resolve_release`: a build's run folder (its ``10_publish/hub`` release and its ``02_survey`` table), a
  release folder, or a Hub dataset repository (``namespace/name[@revision]``, downloaded once, then verified and
  its task checked like a local one).
- :func:`run_unit`: one model on one config through ``lm_eval.simple_evaluate`` with ``log_samples=True``, the
  release's own task (``lm_eval/``), and lm-eval's request cache (``use_cache``: every answer is stored as it
  arrives, so a crashed run resumes where it stopped); the samples become the per-sample table
  (:data:`pbbq.tasks.evaluation.metrics.SAMPLES`).
- :func:`check_release`: a release is scored only when every file is what its manifest lists (``--unverified``
  scores one that is not, with a warning naming what differs and the configs scored); :func:`task_folder`: its
  ``lm_eval/`` task is code, run only when it is the task this builder writes, else this builder's own is used.
- :func:`unit_key`: a unit's cache key, the sha256 of the model spec, the release (its data files' hashes, read
  from the files), the task files, the config, the examples selected (:mod:`pbbq.tasks.evaluation.sample`) and
  lm-eval's version; a unit whose key is cached is not run again.

lm-eval (the ``[eval]`` extra) is imported inside :func:`run_unit` only: nothing else here needs it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ..core.artifacts import sha256_file
from ..core.redaction import REDACTED
from ..core.schemas import OPTIONS
from ..core.verification import VerificationError, verify_release
from ..imports import one_import_at_a_time
from .lm_eval_task import config_key, task_files, task_name, write_task_folder
from .lm_eval_utils import parse_choice
from .metrics import SAMPLES

CHAT_BACKENDS = frozenset(
    {"openai-chat-completions", "local-chat-completions", "anthropic-chat", "anthropic-chat-completions"}
)
"""lm-eval backends without prompt log-probabilities: they run the generation task (``pbbq_<config>_gen``)."""
LOCAL_BACKENDS = frozenset({"hf", "hf-auto", "huggingface"})
"""lm-eval backends that load the model into this process (and need a device)."""
KEY_VARIABLES = {
    "openai-completions": "OPENAI_API_KEY",
    "openai-chat-completions": "OPENAI_API_KEY",
    "local-completions": "OPENAI_API_KEY",
    "local-chat-completions": "OPENAI_API_KEY",
    "anthropic-chat": "ANTHROPIC_API_KEY",
    "anthropic-chat-completions": "ANTHROPIC_API_KEY",
    **dict.fromkeys(LOCAL_BACKENDS, "HF_TOKEN"),
}
"""The environment variable lm-eval 0.4.13's backend reads its key from (``HF_TOKEN``: the Hub's, for a gated
model)."""
EVAL_MODULES = ("lm_eval", "datasets")
"""What every evaluation imports (the ``eval`` extra); a local backend needs :data:`LOCAL_MODULES` too."""
LOCAL_MODULES = ("torch", "transformers")
INSTALL_HINT = "install the eval extra: make evaluate (or uv pip install -e '.[eval]')"
_REPO = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+)(?:@(?P<revision>[\w./-]+))?")
_HUB_MODEL = re.compile(r"[\w][\w.-]*(?:/[\w][\w.-]*)?")
_SPEC = re.compile(r"(?:(?P<name>[\w.-]+)=)?(?P<backend>[a-z][\w-]*):(?P<args>.*)", re.DOTALL)
_SECRET_ARG = re.compile(r"(?i)(key|token|secret|password)$")
_KEY_LIKE = re.compile(r"\b(?:sk-[\w-]{8,}|hf_[A-Za-z0-9]{8,})")
"""What OpenAI, Anthropic (``sk-ant-…``) and Hub keys look like, wherever they stand in a spec."""


def _is_secret(part: str) -> bool:
    name, sep, _ = part.partition("=")
    return bool(sep) and _SECRET_ARG.search(name.strip()) is not None


def _pairs(args: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in args.split(",") if "=" in part)


def redact_spec(spec: str) -> str:
    """``spec`` as a message or a record may show it: a secret argument's value (``api_key``, ``auth_token``,
    any ``*key``/``*token``/``secret``/``password``) and anything shaped like a key replaced by ``[REDACTED]``."""
    parts = [f"{part.partition('=')[0]}={REDACTED}" if _is_secret(part) else part for part in spec.split(",")]
    return _KEY_LIKE.sub(REDACTED, ",".join(parts))


class EvaluateError(ValueError):
    """An evaluation cannot start: a bad model spec, a release that cannot be found, a config it lacks."""


@dataclass(frozen=True)
class ModelSpec:
    """One model to score: a name for the tables, lm-eval's backend and ``model_args`` (without the secret
    arguments the spec had, whose names are in ``dropped``)."""

    name: str
    backend: str
    args: str
    dropped: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        """``[NAME=]BACKEND:ARGS``; without a name, the model's ``pretrained``/``model`` argument's last part."""
        match = _SPEC.fullmatch(spec.strip())
        if not match:
            raise EvaluateError(
                f"--model {redact_spec(spec)!r}: expected [NAME=]BACKEND:ARGS, e.g. hf:pretrained=/models/x"
            )
        parts = [part for part in match["args"].split(",") if part]
        kept = ",".join(part for part in parts if not _is_secret(part))
        pairs = _pairs(kept)
        default = pairs.get("pretrained") or pairs.get("model") or match["backend"]
        name = match["name"] or Path(default.rstrip("/")).name or match["backend"]
        dropped = tuple(part.partition("=")[0].strip() for part in parts if _is_secret(part))
        return cls(name=name, backend=match["backend"], args=kept, dropped=dropped)

    @property
    def display(self) -> str:
        """The spec as the manifest, the reports and the logs show it: a dropped secret as ``[REDACTED]``."""
        secrets = [f"{name}={REDACTED}" for name in self.dropped]
        return redact_spec(f"{self.name}={self.backend}:{','.join([self.args, *secrets] if self.args else secrets)}")

    @property
    def key_variable(self) -> str:
        """Where lm-eval reads this backend's key."""
        return KEY_VARIABLES.get(self.backend, f"the variable lm-eval's {self.backend} backend reads")

    @property
    def generate(self) -> bool:
        """Whether the model runs the generation task (no log-probabilities)."""
        return self.backend in CHAT_BACKENDS

    def task(self, config: str) -> str:
        return task_name(config, generate=self.generate)

    @property
    def spec(self) -> str:
        return f"{self.backend}:{self.args}"


@dataclass(frozen=True)
class Release:
    """A release to evaluate: its folder (``data/``, maybe ``lm_eval/``), where it came from, its identity."""

    folder: Path
    source: str
    manifest_sha256: str | None
    data_sha256: str
    configs: tuple[str, ...]
    survey: Path | None

    @property
    def sha256(self) -> str:
        """What a unit's scores are keyed by: the sha256 of the data files' own hashes (read from the files, not
        taken from the manifest: a copy whose data changed is another release)."""
        return self.data_sha256

    def categories(self) -> dict[str, list[str]]:
        """Each config's categories, read from its parquet files."""
        result = {}
        for config in self.configs:
            values: set[str] = set()
            for shard in sorted((self.folder / "data" / config).glob("*.parquet")):
                values |= set(pq.read_table(shard, columns=["category"]).column("category").to_pylist())
            result[config] = sorted(values)
        return result


def _data_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted((folder / "data").rglob("*.parquet")):
        digest.update(f"{path.relative_to(folder).as_posix()} {sha256_file(path)}\n".encode())
    return digest.hexdigest()


def _release_at(folder: Path, source: str, survey: Path | None) -> Release:
    configs = tuple(sorted(path.name for path in (folder / "data").iterdir() if any(path.glob("*.parquet"))))
    if not configs:
        raise EvaluateError(f"{source}: the release folder {folder} has no data/<config>/*.parquet")
    manifest = folder / "manifest.json"
    return Release(
        folder=folder,
        source=source,
        manifest_sha256=sha256_file(manifest) if manifest.is_file() else None,
        data_sha256=_data_sha256(folder),
        configs=configs,
        survey=survey if survey is not None and survey.is_file() else None,
    )


def resolve_release(release: str, downloads: Path) -> Release:
    """A run folder (``<run>/10_publish/hub``; its survey table is ``<run>/02_survey/stereotypes.parquet``), a
    release folder (``data/<config>/``), or a Hub dataset ``namespace/name[@revision]`` (downloaded into
    ``downloads``, with ``HF_ENDPOINT`` and the Hub's own token rules)."""
    path = Path(release).expanduser()
    if path.is_dir():
        if (path / "10_publish" / "hub" / "data").is_dir():
            return _release_at(path / "10_publish" / "hub", release, path / "02_survey" / "stereotypes.parquet")
        if (path / "data").is_dir():
            return _release_at(path, release, None)
        raise EvaluateError(f"{release}: neither a build's run folder (10_publish/hub/) nor a release folder (data/)")
    match = _REPO.fullmatch(release)
    if not match:
        raise EvaluateError(f"{release}: no such folder, and not a Hub dataset id namespace/name[@revision]")
    with one_import_at_a_time():
        from huggingface_hub import snapshot_download

    target = downloads / match["repo"].replace("/", "__") / (match["revision"] or "main")
    try:
        snapshot_download(
            match["repo"], repo_type="dataset", revision=match["revision"], local_dir=target, max_workers=2
        )
    except Exception as exc:  # the Hub client's many errors become one message naming the release
        raise EvaluateError(f"{release}: could not download the release from the Hub: {exc}") from None
    return _release_at(target, release, None)


def check_release(release: Release, *, unverified: bool = False) -> list[str]:
    """Refuse a release that is not exactly what its manifest lists (:func:`~pbbq.tasks.core.verification.
    verify_release`: a missing or unreadable manifest, a data file changed, added or deleted, a config gone, a
    manifest its card does not name), naming each file, unless ``unverified``; then returns what was found as
    warnings (with the configs scored), for the run's manifest."""
    try:
        found = verify_release(release.folder)
    except VerificationError as exc:
        if not unverified:
            raise EvaluateError(f"{release.source}: {exc}; --unverified scores it all the same") from None
        return [f"release {release.source} NOT VERIFIED: {exc}; configs scored: {', '.join(release.configs)}"]
    if found.ok:
        return []
    lines = [mismatch.line() for mismatch in found.mismatches]
    shown = "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")
    if not unverified:
        raise EvaluateError(
            f"{release.source}: {len(lines)} file(s) differ from its manifest: {shown}; --unverified scores it all "
            "the same"
        )
    return [f"release {release.source} NOT VERIFIED: {shown}; configs scored: {', '.join(release.configs)}"]


def _categories(release: Release) -> dict[str, list[str]]:
    """The release's configs with examples and their categories, in a release's order (as its task lists them)."""
    categories = release.categories()
    return {config: categories[config] for config in sorted(categories, key=config_key) if categories[config]}


def task_folder(release: Release, scratch: Path) -> tuple[Path, str | None]:
    """The lm-eval task folder to run, and a warning when it is not the release's own. The release's
    ``lm_eval/`` is code lm-eval imports (``utils.py``, and any ``!function`` a YAML names), so it is run only when
    its files are those this version of the builder writes for the release (the README aside); otherwise (another
    builder version's task, an edited one, or a release with none) this version's task is written into
    ``scratch``, reading the release's data by absolute path."""
    own = release.folder / "lm_eval"
    if own.is_dir():
        present = {
            path.name: path.read_bytes() for path in own.iterdir() if path.is_file() and path.name != "README.md"
        }
        expected = {name: data for name, data in task_files(_categories(release)).items() if name != "README.md"}
        if present == expected:
            return own, None
        differing = sorted(name for name in present.keys() | expected.keys() if present.get(name) != expected.get(name))
        note = (
            f"{own}: not the task this builder writes ({', '.join(differing[:5])} differ): it is not run; the "
            "builder's own task is used"
        )
    else:
        note = None
    folder = scratch / "lm_eval"
    write_task_folder(folder, _categories(release), data_dir=str((release.folder / "data").resolve()))
    return folder, note


def tasks_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file():
            digest.update(f"{path.name} {sha256_file(path)}\n".encode())
    return digest.hexdigest()


def lm_eval_version() -> str:
    try:
        return version("lm_eval")
    except PackageNotFoundError:
        return "not installed"


def unit_key(model: ModelSpec, release: Release, tasks_hash: str, config: str, docs: list[int] | None) -> str:
    """What a unit's per-sample results depend on; the same key means the same results. ``docs``: the rows
    selected (:mod:`pbbq.tasks.evaluation.sample`), or None for all."""
    payload = {
        "model": model.spec,
        "release": release.sha256,
        "tasks": tasks_hash,
        "config": config,
        "task": model.task(config),
        "docs": None if docs is None else hashlib.sha256(json.dumps(docs).encode()).hexdigest(),
        "lm_eval": lm_eval_version(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------- a unit


def samples_table(samples: list[dict[str, Any]], model: str, config: str, task: str, *, generate: bool) -> pd.DataFrame:
    """lm-eval's logged samples as the per-sample table: the example's fields, each option's log-likelihood
    (multiple choice) or the generated text and the option parsed from it (generation)."""
    rows = []
    for sample in sorted(samples, key=lambda s: s["doc_id"]):
        doc = sample["doc"]
        if generate:
            response = str(sample["filtered_resps"][0])
            lls = [math.nan] * len(OPTIONS)
            choice = parse_choice(response, [doc[option] for option in OPTIONS])
        else:
            response = ""
            lls = [float(result[0]) for result in sample["filtered_resps"]]
            choice = int(np.argmax(lls))
        rows.append(
            {
                "model": model,
                "config": config,
                "task": task,
                "doc_id": int(sample["doc_id"]),
                **{column: doc[column] for column in SAMPLES.names if column in doc and column != "config"},
                "ll0": lls[0],
                "ll1": lls[1],
                "ll2": lls[2],
                "choice": choice,
                "response": response,
            }
        )
    return pd.DataFrame(rows, columns=SAMPLES.names)


@dataclass(frozen=True)
class UnitResult:
    """One model on one config: its per-sample table and lm-eval's own aggregates of the task."""

    samples: pd.DataFrame
    aggregates: dict[str, float]
    requests: int


def run_unit(
    model: ModelSpec,
    config: str,
    tasks: Path,
    *,
    docs: list[int] | None,
    request_cache: Path,
    batch_size: int | str = 8,
    seed: int = 0,
    device: str | None = None,
) -> UnitResult:
    """Run one model on one config with lm-eval and return its per-sample results: on the rows ``docs`` (their
    positions in the config, ascending; None: every row). ``device`` defaults, for a local transformers model, to
    ``cuda`` when torch sees a GPU and ``cpu`` otherwise (lm-eval assumes cuda)."""
    with one_import_at_a_time():
        import lm_eval
        from lm_eval.tasks import TaskManager

    if device is None and model.backend in LOCAL_BACKENDS:
        with one_import_at_a_time():
            import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"

    task = model.task(config)
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    request_cache.parent.mkdir(parents=True, exist_ok=True)
    results = lm_eval.simple_evaluate(
        model=model.backend,
        model_args=model.args,
        tasks=[task],
        task_manager=manager,
        log_samples=True,
        samples=None if docs is None else {task: sorted(docs)},
        batch_size=batch_size,
        device=device,
        bootstrap_iters=0,
        use_cache=str(request_cache),
        apply_chat_template=model.generate,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    if results is None:  # lm-eval returns None on a non-zero rank only
        raise EvaluateError(f"lm-eval returned no results for {model.name} on {task}")
    samples = results["samples"][task]
    aggregates = {
        key.split(",")[0]: float(value)
        for key, value in results["results"][task].items()
        if "," in key and "stderr" not in key and isinstance(value, int | float)
    }
    requests = sum(len(sample["arguments"]) for sample in samples)
    return UnitResult(samples_table(samples, model.name, config, task, generate=model.generate), aggregates, requests)


def _check_pretrained(model: ModelSpec) -> None:
    """A local backend's ``pretrained``: an existing folder, or a Hub model id (``name`` or ``namespace/name``)."""
    value = _pairs(model.args).get("pretrained", "").strip()
    if not value:
        raise EvaluateError(
            f"--model {model.display}: the {model.backend} backend needs pretrained=FOLDER (or a Hub model id)"
        )
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise EvaluateError(f"--model {model.display}: pretrained={value} is a file; give the model's folder")
    if not path.exists() and (value.startswith((".", "/", "~")) or not _HUB_MODEL.fullmatch(value)):
        raise EvaluateError(f"--model {model.display}: pretrained={value}: no such folder (nor a Hub model id)")


def check_arguments(models: list[ModelSpec], limit: int | None) -> None:
    """What can be known before lm-eval starts, each failure one line naming the argument: at least one model,
    distinct names, a positive ``limit``, the ``eval`` extra's modules, a local model's folder."""
    if not models:
        raise EvaluateError("no model to evaluate: give at least one --model")
    names = [model.name for model in models]
    if len(set(names)) != len(names):
        raise EvaluateError(f"--model: two models share a name in {names}: name them, NAME=BACKEND:ARGS")
    if limit is not None and limit < 1:
        raise EvaluateError(f"--limit must be at least 1, not {limit}")
    for model in models:
        wanted = EVAL_MODULES + (LOCAL_MODULES if model.backend in LOCAL_BACKENDS else ())
        missing = [module for module in wanted if find_spec(module) is None]
        if missing:
            raise EvaluateError(
                f"--model {model.display}: pbbq evaluate needs {', '.join(missing)}, not installed: {INSTALL_HINT}"
            )
        if model.backend in LOCAL_BACKENDS:
            _check_pretrained(model)


def check_configs(release: Release, configs: list[str] | None) -> list[str]:
    """The configs to evaluate (default: every config of the release); one it lacks is an error."""
    wanted = list(configs) if configs else list(release.configs)
    missing = [config for config in wanted if config not in release.configs]
    if missing:
        raise EvaluateError(f"{release.source}: no config {missing}; it has {list(release.configs)}")
    return wanted
