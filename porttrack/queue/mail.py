"""The patch file: one `git format-patch` mail per queued patch.

`From <sha> Mon Sep 17 00:00:00 2001`, From / Date / Subject from the PR (the untrusted title
sanitised to one line by the caller; the author's login reduced to `[A-Za-z0-9-]`), provenance
trailers in the body (`Upstream-PR`, `Upstream-Head`, `Upstream-Through` with --through,
`Porttrack-Track`, `Porttrack-Hunks` folded over lines), a diffstat and the diff
(`--binary --full-index`). `porttrack apply` reads message and author back with `git mailinfo`,
so the trailers land in the branch history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.header import Header
from email.utils import format_datetime
from typing import Sequence

from porttrack import __version__
from porttrack.diff.hunks import FileDiff
from porttrack.git.repo import GitRepo
from porttrack.queue.manifest import Regenerated, Revision
from porttrack.workspace.state import RecordedPR


@dataclass(frozen=True)
class Provenance:
    """What the mail says about where its change came from."""

    upstream: str  # "owner/name"
    pr: int
    title: str  # sanitised: one line, no control characters
    track: str
    revision: Revision
    taken: tuple[str, ...]  # upstream's ids of the hunks taken, in file order
    total: int  # hunks in the PR's diff


def format_mail(facts: Provenance, pr: RecordedPR, repo: GitRepo, diff: bytes, regenerated: Regenerated | None = None,
                stat: str | None = None, files: Sequence[FileDiff] | None = None) -> bytes:
    """One `git format-patch` mail: headers from the PR, provenance trailers, diffstat, diff.
    `stat`: `git apply --stat` of `diff` when the caller has it already; else made from `files`
    (`diff` parsed, `apply_stat`) when given, else asked of git."""
    rev = facts.revision
    sha = rev.through or rev.head
    login = re.sub(r"[^A-Za-z0-9-]", "", pr.author or "")[:39] or "unknown"
    subject = f"upstream #{facts.pr}: {facts.title}"
    trailers = [f"Upstream-PR: {facts.upstream}#{facts.pr}", f"Upstream-Head: {rev.head}"]
    if rev.through:
        trailers.append(f"Upstream-Through: {rev.through}")
    trailers.append(f"Porttrack-Track: {facts.track}")
    trailers.append("Porttrack-Hunks: " + _fold(facts.taken))
    left_out = facts.total - len(facts.taken)
    body = [
        f"Taken by porttrack from {facts.upstream}#{facts.pr} ({pr.state}).",
        f"{len(facts.taken)} of {facts.total} hunks taken; "
        + (f"{left_out} left out, with reasons in patches/manifest.json." if left_out else "none left out."),
    ]
    if regenerated is not None:
        body.append(f"The diff is the fork's: upstream's went onto {regenerated.base[:12]} by {regenerated.how}, "
                    "so its context was regenerated; Porttrack-Hunks lists upstream's hunk ids.")
    if stat is None and files is not None:
        stat = apply_stat(files)
    if stat is None:
        stat = repo.run("apply", "--stat", "-", input=diff).stdout.decode("utf-8", "replace") if diff else ""
    head = (
        f"From {sha} Mon Sep 17 00:00:00 2001\n"
        f"From: {login} <{login}@users.noreply.github.com>\n"
        f"Date: {_mail_date(pr, repo, sha)}\n"
        f"Subject: {_header('[PATCH] ' + subject)}\n"
        "MIME-Version: 1.0\n"
        "Content-Type: text/plain; charset=UTF-8\n"
        "Content-Transfer-Encoding: 8bit\n"
        "\n" + "\n".join(body) + "\n\n" + "\n".join(trailers) + "\n---\n" + stat + "\n"
    )
    return head.encode("utf-8") + diff + f"-- \nporttrack {__version__}\n\n".encode()


_PLAIN_NAME = re.compile(r"[\x20-\x21\x23-\x5b\x5d-\x7e]*\Z")  # printable ASCII but `"` and `\`: git prints it as it is


def apply_stat(files: Sequence[FileDiff]) -> str | None:
    """What `git apply --stat` prints for the diff `files` was parsed from (apply.c's
    `stat_patch_list`: a line per file, names shortened past 50 columns, the bar scaled to 70
    columns, then diff.c's summary in the C locale); None when a name would be C-quoted (git is
    asked then)."""
    rows: list[tuple[str, list[str], bool, int, int]] = []
    for fd in files:
        names = [n for n in (fd.old_path, fd.new_path) if n is not None]
        if not all(_PLAIN_NAME.match(n) for n in names):
            return None
        added = sum(len(h.added_lines()) for h in fd.text_hunks)
        deleted = sum(len(h.removed_lines()) for h in fd.text_hunks)
        rows.append((names[-1], names, fd.is_binary, added, deleted))  # the new name, else the old
    max_len = max((len(n) for _name, names, *_ in rows for n in names), default=0)
    max_change = max((a + d for *_, a, d in rows), default=0)
    out = []
    for name, _names, binary, add, dele in rows:
        width = min(max_len, 50)
        if len(name) > width:
            start = len(name) + 3 - width
            cut = name.find("/", start)
            name = "..." + name[cut if cut >= 0 else start:]
        if binary:
            out.append(f" {name:<{width}} |  Bin\n")
            continue
        bar = 70 - width if width + max_change > 70 else max_change
        plus, minus = add, dele
        if max_change > 0:
            total = ((add + dele) * bar + max_change // 2) // max_change
            plus = (add * bar + max_change // 2) // max_change
            minus = total - plus
        out.append(f" {name:<{width}} |{add + dele:5d} {'+' * min(plus, 70)}{'-' * min(minus, 70)}\n")
    files_n, adds, dels = len(rows), sum(r[3] for r in rows), sum(r[4] for r in rows)
    if not files_n:
        return " 0 files changed\n"
    summary = f" {files_n} file{'' if files_n == 1 else 's'} changed"
    if adds or dels == 0:
        summary += f", {adds} insertion{'' if adds == 1 else 's'}(+)"
    if dels or adds == 0:
        summary += f", {dels} deletion{'' if dels == 1 else 's'}(-)"
    return "".join(out) + summary + "\n"


def _fold(ids: Sequence[str], width: int = 72) -> str:
    """Trailer value over several lines (continuation lines start with a space, as git allows)."""
    lines, line = [], ""
    for hid in ids:
        if line and len(line) + 1 + len(hid) > width:
            lines.append(line)
            line = hid
        else:
            line = f"{line} {hid}" if line else hid
    lines.append(line)
    return "\n ".join(lines)


def _header(text: str) -> str:
    return text if text.isascii() else Header(text, "utf-8", maxlinelen=76).encode()


def _mail_date(pr: RecordedPR, repo: GitRepo, sha: str) -> str:
    for value in (pr.merged_at if pr.state == "merged" else None, pr.created_at):
        if value:
            try:
                return format_datetime(datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc))
            except ValueError:
                pass
    when = repo.text("show", "-s", "--format=%at", sha)
    return format_datetime(datetime.fromtimestamp(int(when or 0), tz=timezone.utc))
