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
from porttrack.gitrepo import GitRepo
from porttrack.workspace.queue import Regenerated, Revision
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
                stat: str | None = None) -> bytes:
    """One `git format-patch` mail: headers from the PR, provenance trailers, diffstat, diff.
    `stat`: `git apply --stat` of `diff` when the caller has it already (None: asked of git)."""
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
