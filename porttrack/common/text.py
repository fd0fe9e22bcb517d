"""Untrusted text (PR titles, bodies, author names, branch names, SHAs, dates, GitHub's error
messages, file names) made safe for where it goes.

`for_terminal` is the one terminal cleaner: it removes what a terminal would interpret or what
would make the text read other than it is — escape sequences (CSI, OSC such as OSC 8 links and
window titles), C0 and C1 control characters, bidirectional embeddings, overrides, isolates and
marks (Trojan Source), zero-width and other invisible format characters, the BOM — and shows a
lone surrogate as U+FFFD. Markdown neutralisation for the weekly issue lives in
`porttrack.common.markdown`.
"""

from __future__ import annotations

import re
import unicodedata

# C0/C1 controls except tab/newline, DEL: removed. Everything of Unicode category Cf (format:
# bidi controls U+202A-202E and U+2066-2069, marks U+200E/200F/061C, zero-width U+200B-200D,
# word joiner U+2060, BOM U+FEFF, U+180E, ...) is removed by `_invisible`; this pattern is the
# fast path for the common ones.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]|\x9d[^\x07\x1b\x9c]*(?:\x07|\x9c)?")
# How much of a huge text is looked at: the cleaner's work stays bounded whatever comes in.
_SCAN_FACTOR = 8


def for_terminal(text: str | None, limit: int = 200) -> str:
    """One line, no escape sequences, controls, direction overrides or invisible characters, at
    most `limit` characters."""
    if not text:
        return ""
    text = str(text)[: max(limit, 1) * _SCAN_FACTOR + 64]
    # a non-UTF-8 file name holds surrogate escapes: shown as U+FFFD, never a UnicodeEncodeError
    text = _displayable(text)
    text = _ANSI.sub("", text)
    text = _invisible(_CONTROL.sub("", text.replace("\t", " ")))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def for_terminal_lines(text: str | None, limit: int = 20000) -> str:
    """What `for_terminal` removes, removed from a message of several lines whose layout (line
    breaks, indentation, spacing) is kept: porttrack's own talk quoting untrusted text."""
    if not text:
        return ""
    text = _displayable(str(text)[: limit * 2])
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    lines = [_invisible(_CONTROL.sub("", line.replace("\t", "    "))) for line in text.split("\n")]
    out = "\n".join(lines)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _invisible(text: str) -> str:
    """Removes every format character (category Cf) the fast pattern did not list, and turns line
    and paragraph separators into spaces."""
    if text.isascii():
        return text
    return "".join(" " if unicodedata.category(c) in ("Zl", "Zp") else c
                   for c in text if unicodedata.category(c) not in ("Cf", "Cc", "Cs", "Co"))


def _displayable(text: str) -> str:
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte (from JSON, say)
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def short_sha(sha: str | None, n: int = 12) -> str:
    """A SHA's first `n` characters, cleaned: the SHA comes from GitHub and is text like any."""
    return (for_terminal(sha, 200)[:n] or "?") if sha else "?"
