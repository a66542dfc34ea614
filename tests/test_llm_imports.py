"""The live transport loads its own provider's SDK only, and under the import lock (tasks/llm/live.py): importing
both cost 1.2-1.3 s of CPU at the first miss, the lost fifth of ``benchmarks/llm_stage.py`` (issue 38)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pbbq.tasks.core.artifacts import REPO_ROOT
from tests.fakes.llm_servers import FakeLLMServer

SDKS = ("anthropic", "openai")

CALL_WHILE_AN_IMPORT_HOLDS_THE_LOCK = f"""
import sys, threading, time
from pathlib import Path
from pbbq.tasks import imports
from pbbq.tasks.llm import LLMClient, LLMConfig, LLMRequest
provider, base_url, store = sys.argv[1:]
config = LLMConfig(
    provider=provider, model="fake-model", base_url=base_url, api_key_env="PBBQ_TEST_KEY", mode="live",
    store_path=Path(store), max_retries=0, timeout=30.0,
)
client = LLMClient(config)
request = LLMRequest(messages=(("user", "hello"),), prompt_hash="0" * 64, stage="test", context="#1")
answers = []
loaded = lambda: sorted(sdk for sdk in {SDKS!r} if sdk in sys.modules)
with imports.one_import_at_a_time():
    worker = threading.Thread(target=lambda: answers.extend(client.complete_many([request])))
    worker.start()
    time.sleep(0.5)
    print("while held:", len(answers), loaded())
worker.join()
print("after:", len(answers), loaded())
"""


def _run(provider: str, server: FakeLLMServer, tmp_path: Path) -> list[str]:
    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    result = subprocess.run(
        [sys.executable, "-c", CALL_WHILE_AN_IMPORT_HOLDS_THE_LOCK, provider, base_url, str(tmp_path / "store.sqlite")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PBBQ_TEST_KEY": "fake-key"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_first_miss_loads_only_its_provider_s_sdk_once_the_import_lock_is_free(
    provider: str, server: FakeLLMServer, tmp_path: Path
) -> None:
    """While another thread imports, the first miss waits before loading its SDK (two threads importing one package
    at once can meet a half-initialised module, tasks/imports.py); then it loads its provider's SDK and no other."""
    assert _run(provider, server, tmp_path) == ["while held: 0 []", f"after: 1 ['{provider}']"]
    assert server.requests_total == 1
