"""Observe upstream: poll the tracked PRs, classify what changed, and fold it into the recorded state.

A poll is all-or-nothing: the new state is computed in memory and returned; the caller writes it
once, atomically, only when every PR was observed. A failure anywhere leaves the recorded state as
it was.
A PR head git cannot fetch (its refs/pull/N/head gone upstream) is not such a failure: that PR is
left out of the fetch, a note names it, its head change is classified with GitHub's compare, and
the poll succeeds (exit 0: a note never changes the exit code). A fetch failure of the whole remote
is one note, and every moved head goes to the compare.

Request budget (measured in benchmarks/status_poll.py): one GET per PR, all sent concurrently; with
stored ETags an unchanged PR is answered 304. Extra requests happen only when something needs them:
a changed head without a local fork checkout (one compare), a base branch that is not the default
branch (one search for the PR owning it), and a stacked-on PR that is not tracked (one GET).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from porttrack.common.clock import utcnow
from porttrack.common.errors import GitError, without_userinfo
from porttrack.common.text import for_terminal
from porttrack.git.repo import GitRepo, HeadChange, pull_ref, seen_ref, upstream_ref
from porttrack.workspace.state import Event, HeadSeen, RecordedPR, StackLink, UpstreamState, compact

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient
    from porttrack.github.records import PullRequest

# "stacked on #46076", "(stacked on #41481)", "depends on #123", "on top of owner/repo#45",
# "based on https://github.com/o/r/pull/7". Bounded quantifiers only: the body is untrusted text.
_STACK_TEXT = re.compile(
    r"(?i)\b(?:stacked\s+(?:on\s+top\s+of|on|upon)|depends\s+on|based\s+on|builds\s+on|on\s+top\s+of|requires)"
    r"\s{1,5}(?:(?P<repo>[\w.-]{1,100}/[\w.-]{1,100})?#(?P<num>\d{1,9})|https://github\.com/(?P<urepo>[\w.-]{1,100}/[\w.-]{1,100})/pull/(?P<unum>\d{1,9}))"
)
_TEXT_SCAN_LIMIT = 65536
# What can name a branch GitHub would search for: no controls, spaces, surrogates or the characters
# git refuses, at most 255 characters. Anything else is text from GitHub, not a branch to look up.
_BRANCH = re.compile(r"[^\x00-\x20\x7f~^:?*\[\\\ud800-\udfff]{1,255}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def stacked_from_text(title: str, body: str, repo: str) -> list[int]:
    """PR numbers this PR says it is stacked on, in order of mention, same repository only."""
    found: list[int] = []
    for match in _STACK_TEXT.finditer(f"{title}\n{(body or '')[:_TEXT_SCAN_LIMIT]}"):
        other_repo = match.group("repo") or match.group("urepo")
        if other_repo and other_repo.lower() != repo.lower():
            continue
        number = int(match.group("num") or match.group("unum"))
        if number not in found:
            found.append(number)
    return found


@dataclass(frozen=True)
class PRChange:
    """What one poll learned about one PR."""

    number: int
    events: tuple[Event, ...]
    head_change: HeadChange | None  # None: the head did not move, or this is the first observation
    unchanged: bool  # answered 304 and nothing derived changed
    first_seen: bool = False  # not in the recorded state before this poll: nothing to compare with
    notes: tuple[str, ...] = ()  # about this PR: a reference that is no PR, a stacking cycle, a 404
    failed: bool = False  # GitHub kept failing for it (5xx after retries): the recorded state is shown


@dataclass(frozen=True)
class PollResult:
    state: UpstreamState
    changes: dict[int, PRChange]
    requests: int
    notes: tuple[str, ...] = ()
    failed: dict[int, str] = field(default_factory=dict)  # PR -> why GitHub gave no answer for it (shown as recorded)


def poll(
    state: UpstreamState,
    tracked: Iterable[int],
    client: "GitHubClient",
    repo: GitRepo | None = None,
    remote: str = "upstream",
    now: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> PollResult:
    """Observe every tracked PR (and the PRs they are stacked on) and return the new state."""
    now = now or utcnow()
    notes: list[str] = []
    start_requests = client.requests_sent
    tracked = set(tracked)
    wanted = tracked | {s.number for n in tracked if n in state.prs for s in state.prs[n].stacked_on}
    # Text anyone can write upstream ("requires #1") names numbers that are no PR: GitHub answers
    # 404 for those. Such a number is a note on the PR that named it, never a failed poll.
    failed: dict[int, str] = {}
    fetched, absent = client.get_pulls_present(wanted, answered=(lambda d, t: progress(f"PRs answered: {d}/{t}")) if progress else None,
                                                failed=failed)
    stacks = {number: _stack_links(pr, client) for number, (pr, _) in fetched.items()}
    missing = {s.number for links in stacks.values() for s in links} - set(fetched) - set(absent)
    if missing:
        more, more_absent = client.get_pulls_present(missing, failed=failed)
        fetched.update(more)
        absent.update(more_absent)
        stacks.update({number: _stack_links(pr, client) for number, (pr, _) in more.items()})
    pr_notes = _absent_notes(tracked, stacks, absent)
    stacks = {n: tuple(link for link in links if link.number not in absent) for n, links in stacks.items()}
    for number, cycle in _cycles(stacks).items():
        pr_notes.setdefault(number, []).append(cycle)

    head_changes = _classify_heads(state, {n: pr for n, (pr, _) in fetched.items()}, client, repo, remote, notes, progress)

    prs = dict(state.prs)
    changes: dict[int, PRChange] = {}
    for number, (pr, cached) in sorted(fetched.items()):
        old = state.prs.get(number)
        new, fresh_events = _fold(old, pr, stacks[number], head_changes.get(number), now)
        prs[number] = new
        changes[number] = PRChange(number, fresh_events, head_changes.get(number), cached and not fresh_events, old is None,
                                   tuple(pr_notes.get(number, ())))
    for number in sorted(set(pr_notes) - set(fetched)):  # a tracked PR GitHub has no answer for
        changes[number] = PRChange(number, (), None, True, number not in state.prs, tuple(pr_notes[number]))
    for number in sorted(set(failed) & tracked):  # kept failing: its recorded state stands, said so
        old = state.prs.get(number)
        when = f"as recorded at {old.observed_at}" if old is not None and old.observed_at else "never observed"
        changes[number] = PRChange(number, (), None, True, old is None,
                                   (f"not polled: {failed[number]}; shown {when}",), failed=True)
    new_state = UpstreamState(
        upstream=client.repo, observed_at=now, source=f"live poll of {client.api_url}", prs=prs
    )
    return PollResult(new_state, changes, client.requests_sent - start_requests, tuple(notes),
                      {n: failed[n] for n in sorted(failed)})


def _absent_notes(tracked: set[int], stacks: dict[int, tuple[StackLink, ...]], absent: dict[int, str]) -> dict[int, list[str]]:
    """Per PR, what it says about numbers GitHub has no PR for."""
    notes: dict[int, list[str]] = {}
    for number in sorted(tracked & set(absent)):
        notes.setdefault(number, []).append(f"{absent[number]}; its recorded state (if any) is kept")
    for number, links in sorted(stacks.items()):
        for link in links:
            if link.number in absent:
                notes.setdefault(number, []).append(f"{absent[link.number]}: not counted as a PR it is stacked on")
    return notes


def _cycles(stacks: dict[int, tuple[StackLink, ...]]) -> dict[int, str]:
    """"stacking cycle #A → #B → #A" for every PR on a cycle of stacked-on links: such a stack
    can never be imported bottom-up, and the advice would go round it for ever."""
    found: dict[int, str] = {}
    for start in sorted(stacks):
        path, number = [start], start
        while True:
            nexts = [link.number for link in stacks.get(number, ()) if link.number in stacks]
            step = next((n for n in nexts if n == start), None) or next((n for n in nexts if n not in path), None)
            if step is None:
                break
            path.append(step)
            if step == start:
                words = "stacking cycle " + " → ".join(f"#{n}" for n in path)
                for member in path[:-1]:
                    found.setdefault(member, words)
                break
            number = step
            if len(path) > len(stacks) + 1:
                break
    return found


def _stack_links(pr: "PullRequest", client: "GitHubClient") -> tuple[StackLink, ...]:
    links: list[StackLink] = []
    default = pr.default_branch or "main"
    if pr.base_ref and pr.base_ref != default and _BRANCH.fullmatch(pr.base_ref):
        from porttrack.github.client import Rejected  # loaded already: the client came from there

        try:
            base_pr = client.find_pull_by_head(pr.base_ref)
        except Rejected:  # a branch name GitHub will not search for owns no PR we could stack on
            base_pr = None
        if base_pr and base_pr != pr.number:
            links.append(StackLink(base_pr, "base-branch"))
    for number in stacked_from_text(pr.title, pr.body, client.repo):
        if number != pr.number and all(link.number != number for link in links):
            links.append(StackLink(number, "text"))
    return tuple(links)


def _classify_heads(
    state: UpstreamState,
    fetched: dict[int, "PullRequest"],
    client: "GitHubClient",
    repo: GitRepo | None,
    remote: str,
    notes: list[str],
    progress: Callable[[str], None] | None,
) -> dict[int, HeadChange]:
    """Appended or force-pushed, for every PR whose head moved since the last observation."""
    moved = {
        n: (old, pr.head_sha)
        for n, pr in fetched.items()
        if n in state.prs and (old := state.prs[n].head_sha) and old != pr.head_sha
    }
    result: dict[int, HeadChange] = {}
    if repo is not None:
        shown = without_userinfo(remote)  # a remote may be given as a URL, credentials and all
        try:
            unfetched = _fetch_heads(repo, remote, fetched, progress, notes)
            result = {n: repo.classify_head_change(old, new) for n, (old, new) in moved.items() if n not in unfetched}
        except GitError as exc:
            notes.append(f"git fetch from {shown} failed ({exc}); classified head changes with GitHub's compare instead")
        else:
            notes.extend(_unfetched_note(n, fetched[n].head_sha, shown, why, n in moved) for n, why in sorted(unfetched.items()))
    # Without a checkout, or when the old head is not local (state recorded on another machine):
    # ask GitHub whether the new head is ahead of the old one or diverged from it.
    for number, (old, new) in moved.items():
        if number in result and result[number].kind != "unknown":
            continue
        if not (_SHA.fullmatch(old) and _SHA.fullmatch(new)):
            # the head is text from GitHub like any other: never put in a request path unchecked
            notes.append(f"#{number}: head {for_terminal(new, 50)!r} is not a commit SHA; its change was not classified")
            result[number] = HeadChange("unknown", None, "none")
            continue
        cmp = client.compare(old, new)
        if cmp is None:
            result[number] = HeadChange("force-pushed", None, "compare")  # old head no longer exists upstream
        elif cmp.status == "ahead":
            result[number] = HeadChange("appended", cmp.ahead_by, "compare")
        elif cmp.status == "identical":
            result[number] = HeadChange("unchanged", 0, "compare")
        else:
            result[number] = HeadChange("force-pushed", cmp.ahead_by, "compare")
    return result


def _fetch_heads(repo: GitRepo, remote: str, fetched: dict[int, "PullRequest"], progress, notes: list[str]) -> dict[int, str]:
    """Fetch every PR head we do not have yet, plus upstream's default branch, and record them
    under refs/porttrack/. Returns, per PR whose head is still not local, why.

    One `git fetch` when every head is there. A PR whose refs/pull/N/head is gone upstream (or
    points at another commit than GitHub reported) fails that PR only: `fetch_available` leaves
    its refspec out and fetches the rest. A failure of the whole remote raises GitError."""
    local = repo.commits_present(pr.head_sha for pr in fetched.values())
    absent = sorted(n for n, pr in fetched.items() if pr.head_sha not in local)
    heads = {f"+refs/pull/{n}/head:{pull_ref(n)}": n for n in absent}
    merged = [pr.merge_commit_sha for pr in fetched.values() if pr.merge_commit_sha]
    why: dict[int, str] = {}
    if heads or set(merged) - repo.commits_present(merged):
        branches = [f"+refs/heads/{b}:{upstream_ref(b)}" for b in sorted({pr.default_branch for pr in fetched.values() if pr.default_branch})]
        left_out = repo.fetch_available(remote, [*heads, *branches], progress)
        why = {heads[spec]: line for spec, line in left_out.items() if spec in heads}
        notes.extend(f"{spec.lstrip('+').split(':')[0]} could not be fetched from {without_userinfo(remote)} ({line})" for spec, line in left_out.items() if spec not in heads)
        local |= repo.commits_present(fetched[n].head_sha for n in absent)
    for number in absent:
        if number not in why and fetched[number].head_sha not in local:
            why[number] = f"its refs/pull/{number}/head is not at that commit; pushed again since GitHub answered?"
    repo.update_refs({
        ref: pr.head_sha for number, pr in sorted(fetched.items()) if pr.head_sha in local
        for ref in (pull_ref(number), seen_ref(number, pr.head_sha))
    })
    return why


def _unfetched_note(number: int, head: str, remote: str, why: str, moved: bool) -> str:
    then = "its head change was classified with GitHub's compare instead" if moved else "it is not in the fork checkout"
    return f"#{number}: head {head[:12]} could not be fetched from {remote} ({why}); {then}"


def _fold(old: RecordedPR | None, pr: "PullRequest", stacked: tuple[StackLink, ...], head: HeadChange | None,
          now: str) -> tuple[RecordedPR, tuple[Event, ...]]:
    """The PR as recorded after this observation (history bounded by `compact`), and the events
    this observation added."""
    events = list(old.events) if old else []
    known = len(events)
    heads = list(old.heads) if old else []
    if old is None:
        events.append(Event(now, "observed", f"first observed: {pr.state}"))
    else:
        if head is not None and head.kind in ("appended", "force-pushed", "unknown"):
            count = f", {head.commits} new commit{'s' if head.commits != 1 else ''}" if head.commits else ""
            kind = "force-pushed" if head.kind == "unknown" else head.kind
            events.append(Event(now, kind, f"{(old.head_sha or '?')[:12]} -> {pr.head_sha[:12]}{count} (by {head.method})"))
        if old.state != pr.state:
            if pr.state == "merged":
                events.append(Event(pr.merged_at or now, "merged", f"merge commit {pr.merge_commit_sha or '?'}"))
            elif pr.state == "closed":
                events.append(Event(pr.closed_at or now, "closed", "closed without merging"))
            else:
                events.append(Event(now, "reopened", f"was {old.state}"))
        if old.base_ref and old.base_ref != pr.base_ref:
            events.append(Event(now, "rebased-onto", f"base {old.base_ref} -> {pr.base_ref}"))
        if old.title != pr.title:
            events.append(Event(now, "retitled", pr.title[:200]))
    if not heads or heads[-1].sha != pr.head_sha:
        if not heads:
            kind, commits = "initial", None
        elif head is None:
            kind, commits = "unknown", None
        else:
            kind, commits = ("force-pushed" if head.kind == "unknown" else head.kind), head.commits
        heads.append(HeadSeen(pr.head_sha, now, kind, commits))
    return compact(RecordedPR(
        number=pr.number,
        title=pr.title,
        author=pr.author,
        state=pr.state,
        html_url=pr.html_url,
        created_at=pr.created_at,
        updated_at=pr.updated_at,
        merged_at=pr.merged_at,
        closed_at=pr.closed_at,
        merge_commit_sha=pr.merge_commit_sha,
        head_sha=pr.head_sha,
        head_ref=pr.head_ref,
        base_ref=pr.base_ref,
        base_sha=pr.base_sha,
        default_branch=pr.default_branch,
        observed_at=now,
        stacked_on=stacked,
        heads=tuple(heads),
        events=tuple(events),
    )), tuple(events[known:])
