"""The target languages of a synthetic build: English and synthetic languages ``xa``, ``xb``, … (English under
other codes), whose language modules and prompts the build folder carries (``[languages] modules``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..text.languages import language
from ..translate.requests import PROMPTS, prompt_files
from .scale import SynthError

MAX_TARGETS = 27
"""English and the 26 synthetic languages ``xa`` … ``xz``."""


def target_codes(count: int) -> tuple[str, ...]:
    """The ``count`` target languages of a synthetic build: English, then synthetic languages ``xa``, ``xb``, …
    (:func:`_language_module`: English under another code, answered from the English phrase book). Not Urdu:
    its checks (script, gendered verbs) need real Urdu, and the phrase book has none."""
    if not 1 <= count <= MAX_TARGETS:
        raise SynthError(f"--targets {count} must be between 1 and {MAX_TARGETS}")
    return ("en", *(f"x{chr(ord('a') + n)}" for n in range(count - 1)))


LANGUAGE_MODULES = "languages"
"""The folder of a synthetic build's own language modules (``[languages] modules``), with their prompts."""


def _language_module(code: str) -> str:
    """A synthetic language's module: English's rules and checks under the code ``code``, its own glossary and
    'unknown' columns (``term_xa``, ``phrase_xa``) and its prompts beside it."""
    return f'''"""SYNTHETIC language {code!r}, written by `pbbq synth`: English under another code, so that a
synthetic build translates into several target languages. It is no language: its examples are the English phrase
book's placeholders, labelled synthetic like everything of the build."""

from dataclasses import replace
from pathlib import Path

from pbbq.tasks.text.languages import en

LANGUAGE = replace(
    en.LANGUAGE,
    code="{code}",
    name="Synthetic-{code.upper()}",
    glossary_column="term_{code}",
    unknown_column="phrase_{code}",
    option_article="",
    prompts=Path(__file__).parent / "prompts",
)
'''


def language_files(codes: Sequence[str]) -> dict[str, bytes]:
    """The modules of the synthetic languages among ``codes`` and their prompts: the builder's Persian → English
    prompts, each under the language's pair name and marked synthetic in its first line."""
    files: dict[str, bytes] = {}
    english = prompt_files(language("fa"), language("en"))
    for code in codes[1:]:
        files[f"{LANGUAGE_MODULES}/{code}.py"] = _language_module(code).encode("utf-8")
        for name in english:
            renamed = name.replace("fa-en", f"fa-{code}").replace("en-fa", f"{code}-fa")
            text = (PROMPTS / name).read_text(encoding="utf-8")
            marked = f"SYNTHETIC prompt (pbbq synth): prompts/{name} for the synthetic language {code}.\n{text}"
            files[f"{LANGUAGE_MODULES}/prompts/{renamed}"] = marked.encode("utf-8")
    return files
