"""Untrusted text (PR titles, bodies, author names, file names) made safe for where it goes.

`for_terminal` removes what a terminal would interpret (escape sequences, control characters,
bidirectional overrides). Markdown neutralisation for the weekly issue lives with the report.
"""

from __future__ import annotations

import re

# C0/C1 controls except tab/newline, DEL, and Unicode bidi/isolate overrides (Trojan Source).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def for_terminal(text: str | None, limit: int = 200) -> str:
    """One line, no escape sequences or direction overrides, at most `limit` characters."""
    if not text:
        return ""
    # a non-UTF-8 file name holds surrogate escapes: shown as U+FFFD, never a UnicodeEncodeError
    text = _displayable(text)
    text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text.replace("\t", " "))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _displayable(text: str) -> str:
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte (from JSON, say)
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def short_sha(sha: str | None, n: int = 12) -> str:
    return sha[:n] if sha else "?"
