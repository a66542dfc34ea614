"""Helpers shared by test modules."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from pbbq.flows.pipeline import PIPELINE
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import InputError
from pbbq.tasks.text.languages.fa import normalize_fa

if TYPE_CHECKING:
    from pbbq.tasks.core.stage import Stage
    from pbbq.tasks.llm import LLMConfig
    from tests.fakes.llm_servers import FakeLLMServer

CRAWL_SAMPLE = REPO_ROOT / "crawl" / "sample"
"""The crawl's bundled sample: recorded pages and exports with planted personal data."""
NAMES_FA = REPO_ROOT / "annotations" / "names" / "names_fa.csv"
NAMES_EN = REPO_ROOT / "annotations" / "names" / "names_en_bbq.csv"
FAKE_API_KEY = "sk-test-SECRET-123456"
"""The API key the ``llm_api_keys`` fixture (tests/conftest.py) gives both providers: fake, and looked for in
whatever a test may leak it to."""

_LOAD = (
    "import json, sys\n"
    "import datasets\n"
    "folder, cache, *names = sys.argv[1:]\n"
    "out = {}\n"
    "for name in names:\n"
    "    ds = datasets.load_dataset(folder, name, split='test', cache_dir=cache)\n"
    "    out[name] = {'rows': ds.num_rows, 'features': ds.features.to_dict(),\n"
    "                 'first': ds[0]['answer_info'], 'ids': list(ds['example_id'])}\n"
    "print(json.dumps(out))\n"
)


def load_release_offline(folder: Path, configs: Iterable[str], scratch: Path) -> dict[str, Any]:
    """``datasets.load_dataset(folder, config)`` for each config in a fresh process with the Hub switched off
    (the offline switches must be set before ``datasets`` is imported): rows, features, first answer_info and
    the example ids of each."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(scratch / "hf-home")}
    result = subprocess.run(
        [sys.executable, "-c", _LOAD, str(folder), str(scratch / "cache"), *configs],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def refusal(load: Callable[[Path], object], path: Path, text: str) -> str:
    """What ``load`` says of a file at ``path`` holding ``text``: an :class:`InputError` of one line."""
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        load(path)
    assert "\n" not in str(error.value)
    return str(error.value)


# --- nothing personal under an outputs folder --------------------------------------------------------------------


def planted_personal_data() -> list[str]:
    """Every planted item of the crawl sample, as written and as the normaliser writes it."""
    items: list[str] = []
    data = json.loads((CRAWL_SAMPLE / "posts.json").read_text(encoding="utf-8"))
    for channel in data["channels"]:
        for post in channel["posts"]:
            items += post.get("planted_personal_data", [])
    export = json.loads((CRAWL_SAMPLE / "exports" / "sample_export_result.json").read_text(encoding="utf-8"))
    for message in export["messages"]:
        items += message.get("planted_personal_data", [])
    items += ["fake_x_user", "example.com/x"]
    return sorted({form for item in items for form in (item, normalize_fa(item))})


def texts_under(folder: Path) -> list[tuple[Path, str]]:
    """Every file's content as text: parquet tables read, Prefect's base64 results and gzip decoded."""
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".parquet":
            out.append((path, pq.read_table(path).to_pandas().to_json(force_ascii=False)))
            continue
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        text = data.decode("utf-8", errors="replace")
        with contextlib.suppress(ValueError):  # not JSON (JSONDecodeError), or a result not base64 (binascii.Error)
            payload = json.loads(text)
            if isinstance(payload, dict) and isinstance(payload.get("result"), str):
                text += base64.b64decode(payload["result"]).decode("utf-8", errors="replace")
        out.append((path, text))
    return out


def planted_leaks(outputs: Path, texts: list[tuple[Path, str]]) -> list[tuple[str, str]]:
    """(path under ``outputs``, item) for every planted item found in one of ``texts`` (:func:`texts_under`); an
    item with a digit is found also with its spaces and hyphens dropped."""
    planted = planted_personal_data()
    return [
        (path.relative_to(outputs).as_posix(), item)
        for path, text in texts
        for item in planted
        if item in text
        or (any(c.isdigit() for c in item) and item.replace(" ", "").replace("-", "") in text.replace(" ", ""))
    ]


# --- an LLM client of a fake server --------------------------------------------------------------------------------


def llm_config(server: FakeLLMServer, store_path: Path, provider: str = "openai", **settings: Any) -> LLMConfig:
    """A client configuration for ``server`` (tests/fakes/llm_servers.py): ``provider``'s base URL there, the model
    ``fake-model``, the response store at ``store_path``, then ``settings`` (any other :class:`LLMConfig` field,
    or these again)."""
    from pbbq.tasks.llm import LLMConfig  # the SDKs are slow to import: only the LLM tests pay for them

    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    values = {"provider": provider, "model": "fake-model", "base_url": base_url, "store_path": store_path}
    return LLMConfig(**values | settings)


def write_module(root: Path, name: str, source: str) -> None:
    """A module ``name`` (``pbbq.tasks.x``) written under ``root`` as the package lays it out (``tasks/x.py``)."""
    path = root.joinpath(*name.split(".")[1:]).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "__init__.py").touch()
    path.write_text(source, encoding="utf-8")


def stage_function(module: str) -> object:
    """A function that says it was defined in ``module``: what a stage's code hash starts from."""

    def fn() -> None: ...

    fn.__module__ = module
    return fn


def stage_by_folder() -> dict[str, Stage]:
    """PBBQ's stages by their folder (``06_names``)."""
    return {stage.folder: stage for stage in PIPELINE}


def without_review(config: str) -> str:
    """A configuration's text without its ``[review]`` section (the bundled samples carry their stand-in round)."""
    return re.sub(r"\n\[review\]\n.*?(?=\n\[|\Z)", "\n", config, flags=re.S)
