"""Post: create or update the week's issue, never a second one; link it once from the tracking issue.

The week's issue is found by the number `state/reports.json` recorded for the week, else by its
hidden marker (anywhere in the body) among issues with the configured labels; created if absent,
updated only if its body or title changed, left alone if a person closed it. A create that fails
uncertainly is never retried blindly: porttrack looks for the marker first, and if it is not there
yet, stops and says so.

Two checkouts (a person and the scheduled job) do not share a lock, so creation is serialised
through GitHub itself: after creating, porttrack lists the week's issues again and keeps the
oldest; when that is not its own, it closes its own as a duplicate with a pointer to the oldest
and updates that one instead. Issue numbers only grow, so every racer agrees on the oldest.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from porttrack.common import markdown as md
from porttrack.common.errors import GitHubAuthError, NotFound
from porttrack.github.client import GitHubClient, WriteUncertain
from porttrack.github.records import Issue, IssueComment
from porttrack.report.records import PostOutcome


def check_permission(client: "GitHubClient") -> str | None:
    """Fail before any work when the token cannot write issues; a note when GitHub does not say."""
    try:
        allowed = client.can_write_issues()
    except NotFound:
        raise GitHubAuthError(f"GitHub has no repository {client.repo}, or the token cannot see it") from None
    if allowed is False:
        raise GitHubAuthError(
            f"the token may not create or edit issues in {client.repo} (it needs triage or write access; "
            "in GitHub Actions grant `permissions: issues: write`)"
        )
    if allowed is None:
        return f"GitHub does not say what this token may do in {client.repo}; a refused write will be reported"
    return None


def labelled_issues(client: "GitHubClient", labels: Sequence[str]) -> list["Issue"]:
    return client.list_issues(labels, state="all")


def find_week_issue(issues: Iterable["Issue"], week: str) -> "Issue | None":
    """The week's issue by its marker; the oldest when a person copied the marker into another."""
    found = [i for i in issues if md.find_marker(i.body) == week]
    return min(found, key=lambda i: i.number) if found else None


def post(
    client: "GitHubClient",
    *,
    week: str,
    title: str,
    body: str,
    labels: Sequence[str],
    issues: Sequence["Issue"] | None = None,
    recorded: int | None = None,
    dry_run: bool = False,
) -> PostOutcome:
    """Create or update the week's issue; never a second one, never reopen a closed one.
    `recorded`: the issue number state/reports.json has for this week, looked at first."""
    existing = _recorded_issue(client, recorded, week)
    if existing is None:
        existing = find_week_issue(issues if issues is not None else labelled_issues(client, labels), week)
    if existing is None and not dry_run:
        # Look again, fresh, right before creating: the listing may be minutes old, and GitHub's
        # pagination is no snapshot (an issue unlabelled on page 1 while page 2 was read shifts
        # the week's issue onto the page already read). One more walk keeps a second issue away.
        existing = find_week_issue(labelled_issues(client, labels), week)
    if existing is not None:
        return _update(client, existing, title, body, dry_run)
    if dry_run:
        return PostOutcome("would-create", None, None, f"would create the {week} issue in {client.repo} (labels: {', '.join(labels)})")
    try:
        created = client.create_issue(title, body, labels)
    except WriteUncertain as exc:
        # The POST may have been applied: look before anything else, and never send it again blindly.
        again = find_week_issue(labelled_issues(client, labels), week)
        if again is None:
            raise WriteUncertain(
                f"creating the {week} issue did not complete ({exc}), and no issue with its marker exists yet; "
                "nothing was retried, so no duplicate can appear. Run again: porttrack looks for the marker before creating."
            ) from None
        outcome = _update(client, again, title, body, dry_run)
        return PostOutcome(outcome.action if outcome.action != "unchanged" else "created", again.number, again.html_url,
                           f"the create answered uncertainly, but issue #{again.number} carries the {week} marker: " + outcome.message)
    return _oldest_wins(client, created, week, title, body, labels)


def _recorded_issue(client: "GitHubClient", number: int | None, week: str) -> "Issue | None":
    """The issue state/reports.json recorded for the week, when it still carries the week's marker."""
    if number is None:
        return None
    try:
        issue = client.get_issue(number)
    except NotFound:
        return None
    return issue if md.find_marker(issue.body) == week else None


def _oldest_wins(client: "GitHubClient", created: "Issue", week: str, title: str, body: str, labels: Sequence[str]) -> PostOutcome:
    """After creating: if another checkout created the week's issue first, this one is the duplicate."""
    oldest = find_week_issue(labelled_issues(client, labels), week)
    if oldest is None or oldest.number >= created.number:
        return PostOutcome("created", created.number, created.html_url, f"created issue #{created.number} for {week}")
    client.comment_issue(created.number, f"Duplicate of #{oldest.number}: another porttrack run created the {week} issue first.")
    client.update_issue(created.number, state="closed")
    outcome = _update(client, oldest, title, body, dry_run=False)
    return PostOutcome(outcome.action, oldest.number, oldest.html_url,
                       f"issue #{oldest.number} for {week} was created first by another run; closed #{created.number} "
                       f"as its duplicate; {outcome.message}")


def _update(client: "GitHubClient", issue: "Issue", title: str, body: str, dry_run: bool) -> PostOutcome:
    if issue.state == "closed":
        return PostOutcome(
            "closed-by-person", issue.number, issue.html_url,
            f"issue #{issue.number} for this week was closed by a person; porttrack leaves it closed and did not "
            "update it (reopen it to let porttrack update it again)",
        )
    if issue.body == body and issue.title == title:
        return PostOutcome("unchanged", issue.number, issue.html_url, f"issue #{issue.number} is already up to date")
    if dry_run:
        return PostOutcome("would-update", issue.number, issue.html_url, f"would update issue #{issue.number} (its body changed)")
    updated = client.update_issue(issue.number, title=title if issue.title != title else None, body=body if issue.body != body else None)
    return PostOutcome("updated", updated.number, updated.html_url or issue.html_url, f"updated issue #{issue.number}")


LINK_MARKER = "porttrack:weekly-link:"


def comment_tracking(client: "GitHubClient", tracking_issue: int, week: str, outcome: PostOutcome, *, dry_run: bool = False) -> str:
    """One comment per week on the fork's tracking issue, linking the week's issue (idempotent)."""
    if outcome.number is None:
        return "no weekly issue to link"
    marker = f"<!-- {LINK_MARKER}{week} -->"
    if any(c.body.startswith(marker) for c in client.list_issue_comments(tracking_issue)):
        return f"#{tracking_issue} already links the {week} report"
    if dry_run:
        return f"would comment on #{tracking_issue} with a link to #{outcome.number}"
    body = f"{marker}\nWeekly status for {week}: #{outcome.number}\n"
    try:
        client.comment_issue(tracking_issue, body)
    except WriteUncertain:
        if any(c.body.startswith(marker) for c in client.list_issue_comments(tracking_issue)):
            return f"commented on #{tracking_issue} (confirmed after an uncertain answer)"
        raise
    return f"commented on #{tracking_issue} with a link to #{outcome.number}"


CUT_MARKER = "porttrack:weekly-cut:"


def cut_comments(client: "GitHubClient", number: int | None, week: str) -> list["IssueComment"]:
    """The comments of the week's issue `number` that hold what its body had to leave out
    (`post_cut`), in order; none when there is no issue yet."""
    if number is None:
        return []
    marker = f"<!-- {CUT_MARKER}{week}:"
    found: dict[int, IssueComment] = {}
    for comment in client.list_issue_comments(number):
        index = comment.body[len(marker):].split(" ", 1)[0] if comment.body.startswith(marker) else ""
        if index.isdigit():
            found.setdefault(int(index), comment)
    return [found[i] for i in sorted(found)]


def post_cut(client: "GitHubClient", number: int, week: str, parts: Sequence[str],
             kept: Sequence["IssueComment"]) -> list["IssueComment"]:
    """What the week's issue body had to leave out, whole, as comments of the issue a reader can
    open (the workspace's reports/ is on one machine): one per part, edited in place on the week's
    later runs (only when changed); a kept comment past the parts says that nothing more was cut."""
    out: list[IssueComment] = []
    texts = [*parts, *(["_Nothing more was cut from this week's issue._\n"] * max(0, len(kept) - len(parts)))]
    for i, text in enumerate(texts):
        body = f"<!-- {CUT_MARKER}{week}:{i + 1} -->\n" + (f"**Cut from the issue to fit, part {i + 1} of {len(parts)}**\n\n"
                                                          if i < len(parts) else "") + text
        if i >= len(kept):
            out.append(client.comment_issue(number, body))
        elif kept[i].body != body:
            out.append(client.edit_comment(kept[i].id, body))
        else:
            out.append(kept[i])
    return out
