"""Untrusted text made safe for a GitHub-flavoured-markdown issue body.

Everything a stranger can write (PR titles, author names, file names, reasons copied from a PR,
error messages that quote them) passes through `text` before it reaches the weekly issue. What it
guarantees, and why each one matters for an issue a whole team receives:

- no @mention or team mention that notifies anyone: `@` is followed by a zero-width space
  (`&#8203;`, the spelling Dependabot uses), which GitHub's mention filter does not match;
- no `#123` / `GH-123` / `owner/repo#123` reference: in the fork's issue those would link (and
  leave a back-reference) to the *fork's* issue 123, never the upstream PR the text meant;
- no raw HTML: `<`, `>` and `&` become entities, so the source holds no tag at all;
- no link, image, autolink or e-mail link: brackets are escaped and `://`, `www.` and `@` are
  broken by the zero-width space, so nothing in the text can become clickable;
- no broken table or layout: one line, `|` escaped, emphasis/code/math markers escaped, and a
  leading character that would start a list, heading or quote is escaped;
- no bidirectional overrides or invisible characters (Trojan Source), no control characters;
- a length cap, so one hostile title cannot crowd out the report.

Links in the report are made only here, by `link` and `pr_link`, and only to GitHub. Links to
another repository's PRs go through `redirect.github.com`, which GitHub documents as the way to
link without leaving a back-reference: a weekly issue must not add an entry to every upstream PR's
timeline each week.
"""

from __future__ import annotations

import re

ZWSP = "&#8203;"  # decoded by the renderer into U+200B; visible and greppable in the source

# C0/C1 controls (tab and newlines are handled as whitespace first), DEL, bidi embeddings,
# overrides and isolates, directional marks, zero-width and invisible formatting characters.
_INVISIBLE = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)
_WHITESPACE = re.compile(r"[\s\u2028\u2029\u00a0]+")
# Markdown's inline syntax (and GitHub's `$` math, `~` strikethrough, `|` table cells).
_PUNCTUATION = re.compile(r"([\\`*_\[\]|~$#!])")
# What would start a block when the text opens a line or a list item: "- x", "+ x", "1. x", "= x".
_LEADING = re.compile(r"^(\d{1,9})([.)])|^([-+=])")
_REFERENCE = re.compile(r"(?i)(?<=#)(?=\d)|(?<=\bgh)(?=-\d)")
_URLISH = re.compile(r"(?i)(?=://)|(?<=\bwww)(?=\.)")

GITHUB_URL = re.compile(r"^https://(?:redirect\.)?github\.com/[A-Za-z0-9._~/%=&?#:+-]*$")


class Md(str):
    """A string that is already safe markdown (made by this module or by the template's own text).

    Anything else that reaches the template is neutralised by `text` on the way out, so a plain
    `str` is always escaped: concatenating an `Md` with a `str` yields a `str`, escaped again —
    ugly, never unsafe.
    """


def clean(value: object, limit: int | None = None) -> str:
    """One line of plain text: invisible characters and direction overrides removed, whitespace
    collapsed, at most `limit` characters (an ellipsis marks a cut). Not yet markdown-safe."""
    if value is None:
        return ""
    raw = _INVISIBLE.sub("", without_surrogates(str(value)))
    raw = _WHITESPACE.sub(" ", raw).strip()
    if limit is not None and len(raw) > limit:
        raw = raw[: max(1, limit - 1)].rstrip() + "…"
    return raw


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def without_surrogates(value: str) -> str:
    """`value` with every lone surrogate as U+FFFD. They come from JSON ("\\ud800" in a title)
    and from non-UTF-8 file names (Python's surrogate escapes), and no UTF-8 or UTF-16 encoder
    takes them: one would make the report unwritable."""
    return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value


def text(value: object, limit: int = 200) -> Md:
    """Untrusted text as inline markdown that renders as exactly that text and nothing more."""
    raw = clean(value, limit)
    if not raw:
        return Md("")
    out = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _PUNCTUATION.sub(r"\\\1", out)
    out = _LEADING.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", out)
    # The input holds no U+200B (clean removed it), so it can mark where the breaks go; it is
    # spelled as an entity only at the end, so no rule here ever matches inside an entity.
    out = out.replace("@", "@\u200b")
    out = _REFERENCE.sub("\u200b", out)
    out = _URLISH.sub("\u200b", out)
    return Md(out.replace("\u200b", ZWSP))


_CODE_SAFE = re.compile(r"^[^`<>&|\\]*$")


def code(value: object, limit: int = 120) -> Md:
    """An identifier (path, SHA, command, hunk id) as a code span; plain escaped text when it holds
    characters a code span inside a table cell cannot carry safely."""
    raw = clean(value, limit)
    if not raw:
        return Md("")
    if not _CODE_SAFE.match(raw):
        return text(raw, limit)
    return Md(f"`{raw}`")


def block(value: object, language: str = "") -> Md:
    """Lines to copy (a tracks.yaml change) as a fenced code block: shown exactly, nothing in them
    renders. The fence is longer than any run of backticks inside, so none can close it early."""
    lines = [_INVISIBLE.sub("", without_surrogates(line)).rstrip() for line in str(value or "").splitlines()]
    body = "\n".join(lines)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", body)), default=0))
    return Md(f"{fence}{re.sub(r'[^A-Za-z0-9_+-]', '', language)}\n{body}\n{fence}")


def link(url: object, label: Md | str) -> Md:
    """`[label](url)` when the URL is GitHub's own; otherwise the label alone (never a foreign link)."""
    safe_label = label if isinstance(label, Md) else text(label)
    target = clean(url)
    if not target or not GITHUB_URL.match(target) or not safe_label:
        return safe_label
    return Md(f"[{safe_label}]({target})")


_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


def pr_url(repo: str, number: int, *, same_repo: bool = False) -> str:
    """The PR's URL; another repository's PR is linked through redirect.github.com (no back-reference)."""
    if not _REPO.match(repo or ""):
        return ""
    host = "github.com" if same_repo else "redirect.github.com"
    return f"https://{host}/{repo}/pull/{int(number)}"


def pr_link(repo: str, number: int, *, same_repo: bool = False) -> Md:
    """`#N` linking to the PR, without a back-reference when it lives in another repository."""
    return link(pr_url(repo, number, same_repo=same_repo), Md(f"#{int(number)}"))


def issue_url(repo: str, number: int) -> str:
    if not _REPO.match(repo or ""):
        return ""
    return f"https://github.com/{repo}/issues/{int(number)}"


def ours(value: object, repo: str | None = None, limit: int = 400) -> Md:
    """porttrack's own sentence (a next action, an event, a gate's reason) made safe like any
    text, then two readable touches: `quoted` commands become code spans, and `#N` references to
    upstream PRs become links to `repo` (or stay inert without one). Values quoted inside such a
    sentence may come from elsewhere, so every piece still goes through `text` or `code`."""
    raw = clean(value, limit).replace("->", "→")
    pieces = raw.split("`")
    if len(pieces) % 2 == 0:  # an unpaired backtick: no code spans at all
        pieces = [raw]
    out = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(str(code(piece, limit)))
            continue
        lead, trail = (" " if piece[:1] == " " else ""), (" " if piece[-1:] == " " and piece.strip() else "")
        safe = lead + str(text(piece, limit)) + trail if piece.strip() else piece
        if repo:
            # text() turned "#123" into "\#&#8203;123"; make exactly those into upstream links. A
            # reference written "owner/name#123" is linked whole when it names `repo`, and left as
            # text when it names another repository (never a link to the wrong PR).
            safe = re.sub(r"(?<![\w/.-])([A-Za-z0-9][\w.-]*/[\w.-]+)?\\#" + re.escape(ZWSP) + r"(\d{1,9})\b",
                          lambda m: _reference(m, repo), safe)
        out.append(safe)
    return Md("".join(out))


def _reference(m: re.Match, repo: str) -> str:
    named, number = m.group(1), int(m.group(2))
    if named is None:
        return pr_link(repo, number)
    if named.lower() != repo.lower():
        return m.group(0)
    return link(pr_url(repo, number), Md(f"{named}#{number}"))


def join(items, separator: str = ", ") -> Md:
    """Join markdown pieces, neutralising any that are not already `Md`."""
    return Md(separator.join(i if isinstance(i, Md) else text(i) for i in items))


MARKER_PREFIX = "porttrack:weekly:"
_WEEK = re.compile(r"^\d{4}-W\d{2}$")


def marker(week: str) -> Md:
    """The hidden marker that identifies the week's issue: the only raw HTML in the report, made
    here from a validated ISO week and never from untrusted text."""
    if not _WEEK.match(week):
        raise ValueError(f"not an ISO week: {week!r}")
    return Md(f"<!-- {MARKER_PREFIX}{week} -->")


def find_marker(body: str) -> str | None:
    """The week named by the first marker line in the body, or None. Anywhere, not only on the
    first line: a person who adds a line above it must not make porttrack open a second issue."""
    match = re.search(r"(?m)^<!-- " + re.escape(MARKER_PREFIX) + r"(\d{4}-W\d{2}) -->", body or "")
    return match.group(1) if match else None
