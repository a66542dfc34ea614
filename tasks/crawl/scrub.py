"""Personal data out of crawled text before anything is written (docs/architecture.md, crawl; PBBQ §3.2 and
its ethics statement: no personally identifiable information is kept).

A post arrives as segments: plain text, or a span the source itself tagged as a handle, a phone number, an
e-mail address, a link or a person it mentions by name (a Telegram text mention, a signature, a forward from a
user). Tagged spans become typed placeholders whole; the plain text is normalised with the project's one
normaliser (so Persian and Arabic-Indic digits are ASCII and no zero-width or bidi character splits a number)
and then searched for e-mail addresses, links (``t.me`` ones included), handles, card and account numbers and
phone numbers (Iranian ``09xx``, ``+98``, ``0098`` and landline forms, and international ones). What is
replaced is counted by kind; the text around it is kept, line breaks included.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..text.languages.fa import normalize_fa

KINDS = ("handle", "phone", "email", "url", "name", "account")
"""Kinds of personal data replaced, each by the placeholder ``[KIND]``."""
PLACEHOLDERS = {kind: f"[{kind.upper()}]" for kind in KINDS}

Segment = tuple[str, str | None]
"""A piece of a post: its text and the kind of personal data the source tagged it as (``None``: plain)."""

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_TLDS = "com|ir|org|net|me|io|info|co|app|xyz|ru|de|uk|tv|us|biz|link|site|online|dev"
_URL = re.compile(
    r"(?:(?:https?|tg|ftp)://|www\.)\S+"
    r"|(?<![\w.@])(?:t\.me|telegram\.me|telegram\.dog)/\S+"
    rf"|(?<![\w.@/])[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:{_TLDS})\b(?:/\S*)?",
    re.IGNORECASE,
)
# Punctuation a link does not end with: it belongs to the sentence around it.
_URL_TAIL = ".,;:!?؟،؛)]}»\"'"
_HANDLE = re.compile(r"(?<![\w@.])@[A-Za-z0-9_]{2,32}")
# Card numbers (16 digits, in fours) and IBANs (IR + 24 digits).
_ACCOUNT = re.compile(r"(?<![\w])IR\s?\d{2}(?:[ -]?\d){22}(?!\d)|(?<!\d)\d{4}(?:[ -]?\d{4}){3}(?!\d)", re.IGNORECASE)
# A run of 8 to 16 digits with single separators, optionally after + or 00: checked by _is_phone.
_PHONE_RUN = re.compile(r"(?<![\d+])(?:\+|00)?\(?\d(?:[ \-.()]{0,2}\d){7,15}(?!\d)")


def _is_phone(match: str) -> bool:
    """Whether a digit run is a phone number: an international form (``+`` or ``00`` and 10 to 15 digits), an
    Iranian number with its leading 0 (``09xx`` mobile, ``0xx`` landline: 11 digits) or a mobile without it
    (``9xx``: 10 digits). Years, prices and counts stay."""
    digits = re.sub(r"\D", "", match)
    if match.startswith("+") or match.startswith("00"):
        return 10 <= len(digits.removeprefix("00")) <= 15
    if digits.startswith("0"):
        return len(digits) == 11
    return digits.startswith("9") and len(digits) == 10


def _replace(
    kind: str, counts: Counter[str], keep: Callable[[str], bool] | None = None
) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` callback that puts the placeholder of ``kind`` in place of a match and counts it."""

    def callback(match: re.Match[str]) -> str:
        text = match.group(0)
        if keep is not None and not keep(text):
            return text
        tail = ""
        if kind == "url":
            stripped = text.rstrip(_URL_TAIL)
            text, tail = stripped, text[len(stripped) :]
        counts[kind] += 1
        return PLACEHOLDERS[kind] + tail

    return callback


def scrub_text(text: str, counts: Counter[str] | None = None) -> str:
    """``text`` (one normalised line) with every e-mail address, link, handle, account and phone number
    replaced by its placeholder; ``counts`` is increased per kind replaced."""
    counts = Counter() if counts is None else counts
    text = _EMAIL.sub(_replace("email", counts), text)
    text = _URL.sub(_replace("url", counts), text)
    text = _HANDLE.sub(_replace("handle", counts), text)
    text = _ACCOUNT.sub(_replace("account", counts), text)
    return _PHONE_RUN.sub(_replace("phone", counts, keep=_is_phone), text)


@dataclass(frozen=True)
class Scrubbed:
    text: str
    """Normalised, scrubbed text; lines joined with ``\\n``, empty lines dropped."""
    counts: Counter[str]
    """Personal data replaced, by kind."""


def scrub_segments(segments: Iterable[Segment]) -> Scrubbed:
    """Join a post's segments with tagged spans replaced by their placeholders, normalise each line with
    :func:`pbbq.tasks.text.languages.fa.normalize_fa`, and scrub what the patterns find in the plain text."""
    counts: Counter[str] = Counter()
    parts = []
    for text, kind in segments:
        if kind is None:
            parts.append(text)
        elif kind not in PLACEHOLDERS:
            raise ValueError(f"unknown kind of personal data {kind!r}; known: {', '.join(KINDS)}")
        else:
            counts[kind] += 1
            parts.append(f" {PLACEHOLDERS[kind]} ")
    lines = (normalize_fa(line) for line in "".join(parts).splitlines())
    text = "\n".join(scrub_text(line, counts) for line in lines if line)
    return Scrubbed(text, counts)


def scrub_field(value: str | None, kind: str | None, counts: Counter[str]) -> str:
    """One short field (a forward's origin): empty, its placeholder when tagged, else scrubbed text."""
    if not value:
        return ""
    if kind is not None:
        counts[kind] += 1
        return PLACEHOLDERS[kind]
    return scrub_text(normalize_fa(value), counts)
