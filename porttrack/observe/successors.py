"""Successors of a PR closed without merging: who took the work over.

Candidates come from three independent places, because each misses some:
- the closed PR's timeline (`cross-referenced` events: other PRs that mention it; GitHub is known
  to leave some of these out, PyGithub #2978);
- the issue search for PR bodies that name it ("supersedes #N", "replaces #N", "follow-up to #N");
- later PRs by the same author that touch the same files.
Each candidate's hunks (its file list, `porttrack.observe.prdiff`) are compared with the closed PR's: hunk
ids shared, and near-matches (same path, mostly the same added lines). Ranking is by that content
first, then by how explicit the link is. Every candidate carries why it was proposed, as data
(`Reason`: kind + detail), and the tracks.yaml lines that adopt it; one that shares no hunk carries
a warning. A source that fails (the search API's own 403) is named in `failed` and leaves the
other sources' candidates standing. A candidate sharing at least half the hunks becomes the
orphaned track's next action, "follow #N?" (`follow_words`, applied by `knowledge.with_findings`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from porttrack.common.errors import PorttrackError
from porttrack.diff.hunks import Hunk
from porttrack.github.budget import Budget, BudgetSpent
from porttrack.github.records import IssueRef, PullRequest
from porttrack.observe.prdiff import file_hunks, near_match
from porttrack.workspace.state import RecordedPR

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient

MAX_CANDIDATES = 6  # candidates looked at in full (2 requests each) per closed PR
SHOWN = 3  # best candidates shown under the next action

# How explicit each kind of link is (a tie-break after shared content).
_STRENGTH = {"body-says": 3, "cross-referenced": 2, "mentions": 1, "same-author": 1}
_PHRASE = r"(supersedes|supersede|superseded|replaces|replacing|follow[- ]?up (?:to|of|on|for)|successor (?:to|of))"


@dataclass(frozen=True)
class Reason:
    """Why a candidate was proposed: kind in shares-hunks | near-hunks | body-says | cross-referenced
    | mentions | same-author | state; detail is the datum the words are made from."""

    kind: str
    detail: str

    @property
    def words(self) -> str:
        return {
            "shares-hunks": f"shares {self.detail} hunks",
            "near-hunks": f"nearly matches {self.detail} more (same file, mostly the same added lines)",
            "body-says": f"its body says '{self.detail}'",
            "cross-referenced": f"it references #{self.detail} (timeline)",
            "mentions": f"its body mentions #{self.detail}",
            "same-author": f"same author ({self.detail})",
            "state": self.detail,
        }.get(self.kind, f"{self.kind}: {self.detail}")


@dataclass(frozen=True)
class Candidate:
    number: int
    title: str
    url: str
    author: str
    state: str  # open | merged | closed
    merged_at: str | None
    shared: int
    near: int
    total: int  # hunks of the closed PR
    reasons: tuple[Reason, ...]
    draft: bool = False  # an open PR marked draft: said, and ranked after ready ones of the same content

    @property
    def warning(self) -> str | None:
        """Said of a candidate that shares no hunk: whatever links it, its content is other work."""
        if self.shared or not self.total:
            return None
        near = f" (nearly matches {self.near})" if self.near else ""
        return f"warning: shares none of the closed PR's {self.total} hunks{near}"

    @property
    def follows(self) -> bool:
        """Shares at least half the closed PR's hunks: worth proposing as the track's PR."""
        return self.total > 0 and 2 * self.shared >= self.total

    @property
    def score(self) -> tuple:
        strength = max((_STRENGTH.get(r.kind, 0) for r in self.reasons), default=0)
        return (-(self.shared + 0.5 * self.near), self.draft, -strength, self.state != "merged", -self.number)

    @property
    def text(self) -> str:
        return "; ".join([r.words for r in self.reasons] + ([self.warning] if self.warning else []))

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.title, "url": self.url, "author": self.author, "state": self.state,
                "merged_at": self.merged_at, "draft": self.draft, "shared_hunks": self.shared, "near_hunks": self.near, "of_hunks": self.total,
                "warning": self.warning, "reasons": [{"kind": r.kind, "detail": r.detail} for r in self.reasons], "text": self.text}


@dataclass(frozen=True)
class SuccessorSearch:
    pr: int
    track: str
    track_prs: tuple[int, ...]
    candidates: tuple[Candidate, ...]  # best first
    problem: str | None = None  # why the search stopped short (what was found still stands)
    failed: tuple[Reason, ...] = ()  # sources that failed: kind = timeline | search | same-author, detail = why

    def follow(self) -> Candidate | None:
        """The best candidate when it shares at least half the hunks (`Candidate.follows`), else None."""
        best = self.candidates[0] if self.candidates else None
        return best if best is not None and best.follows else None

    def adopt_lines(self, candidate: Candidate) -> tuple[str, ...]:
        """The tracks.yaml lines that make `candidate` the track's PR instead of the closed one."""
        prs = [candidate.number if n == self.pr else n for n in self.track_prs]
        return (f"  {self.track}:", f"    prs: [{', '.join(str(n) for n in prs)}] # #{candidate.number} succeeds #{self.pr} (closed without merging)")

    def to_json(self) -> dict[str, Any]:
        return {"pr": self.pr, "track": self.track, "problem": self.problem,
                "failed_sources": [{"source": f.kind, "detail": f.detail} for f in self.failed],
                "candidates": [{**c.to_json(), "adopt": list(self.adopt_lines(c))} for c in self.candidates]}


def find_successors(client: "GitHubClient", budget: Budget, closed: RecordedPR, track: str,
                    track_prs: Sequence[int], max_candidates: int = MAX_CANDIDATES,
                    local: "Callable[[int, str | None, str | None], tuple[Hunk, ...] | None] | None" = None,
                    timeline: Any = None) -> SuccessorSearch:
    """Candidates for `closed`'s successor, best first. Never raises for GitHub trouble or a spent
    budget: the search stops and says why, keeping what it found. `local(number, head, base)`: a
    PR's hunks from git (`prdiff.git_hunks`), asked before GitHub's file list (None: ask GitHub).
    `timeline`: the closed PR's timeline already asked (a future of `issue_timeline`'s answer,
    sent with the poll: a round trip saved), else it is asked here.

    The questions go out together (the closed PR's files, its timeline, the search, the author's
    listing; then every candidate at once). When the closed PR answered 304 in this run's poll and
    its timeline answers 304 too, nothing that names it has changed: the last run's search is used
    as it was, and the search and the author's listing are not asked (`reused`)."""
    remembered = client.cache.recall(_memory_key(client, closed.number))
    timeline_first = remembered is not None and client.answered_unchanged(closed.number)
    found: list[Candidate] = []
    failed: list[Reason] = []
    problem = None
    refs: tuple[IssueRef, ...] | None = None
    try:
        if timeline is not None:
            refs, cached = _await_timeline(timeline, failed)
            if not timeline_first:
                cached = False
        if timeline_first:
            if timeline is None:
                refs, cached = _ask_timeline(client, budget, closed.number, failed)
            if cached and not failed:
                again = search_from_json(remembered, track, tuple(track_prs))
                if again is not None:
                    return again
        elif timeline is None:
            refs, cached = None, False
        from concurrent.futures import ThreadPoolExecutor  # here: `status --offline` reads recorded searches only

        with ThreadPoolExecutor(max_workers=4) as pool:
            wanted_f = pool.submit(_hunks_of, client, budget, local, closed.number, closed.head_sha, closed.base_sha)
            leads = _leads(client, budget, closed, failed, pool, refs)
            wanted = wanted_f.result()
            numbers = _ordered(leads)[:max_candidates]
            examined = [pool.submit(_examine, client, budget, closed, n, leads[n], wanted, local) for n in numbers]
            for number, future in zip(numbers, examined):
                try:
                    candidate = future.result()
                except BudgetSpent:
                    raise
                except PorttrackError as exc:  # this one stays unread; the others are still compared
                    failed.append(Reason("candidate", f"#{number}: {exc}"))
                    continue
                if candidate is not None:
                    found.append(candidate)
    except BudgetSpent:
        problem = "request limit reached before every candidate was compared"
    except PorttrackError as exc:
        problem = f"GitHub: {exc}"
    if failed and problem is None:
        problem = "; ".join(f"the {SOURCES[f.kind]} failed ({f.detail})" for f in failed) + "; the other sources' candidates stand"
    found.sort(key=lambda c: c.score)
    search = SuccessorSearch(closed.number, track, tuple(track_prs), tuple(found), problem, tuple(failed))
    if problem is None:
        client.cache.remember(_memory_key(client, closed.number), search.to_json())
    return search


def _memory_key(client: "GitHubClient", number: int) -> str:
    return f"porttrack:successors:{client.api_url}/repos/{client.repo}#{int(number)}"


def search_from_json(data: Any, track: str, track_prs: tuple[int, ...]) -> SuccessorSearch | None:
    """A search `SuccessorSearch.to_json` wrote (None: not readable as one), for `track` as it is now."""
    try:
        candidates = tuple(
            Candidate(int(c["number"]), str(c["title"]), str(c["url"]), str(c["author"]), str(c["state"]), c.get("merged_at"),
                      int(c["shared_hunks"]), int(c["near_hunks"]), int(c["of_hunks"]),
                      tuple(Reason(str(r["kind"]), str(r["detail"])) for r in c["reasons"]), bool(c.get("draft")))
            for c in data["candidates"])
        return SuccessorSearch(int(data["pr"]), track, track_prs, candidates, data.get("problem"), ())
    except (KeyError, TypeError, ValueError):
        return None


def _ask_timeline(client: "GitHubClient", budget: Budget, n: int, failed: list[Reason]) -> tuple[tuple[IssueRef, ...], bool]:
    try:
        return budget.call(lambda: (client.issue_timeline(n), False))  # (refs, answered 304)
    except BudgetSpent:
        raise
    except PorttrackError as exc:
        failed.append(Reason("timeline", str(exc)))
        return (), False


def _await_timeline(future: Any, failed: list[Reason]) -> tuple[tuple[IssueRef, ...], bool]:
    try:
        return future.result()
    except PorttrackError as exc:
        failed.append(Reason("timeline", str(exc)))
        return (), False


# Where leads come from (each asked once; one failing leaves the others' leads standing).
SOURCES = {"timeline": "timeline", "search": "issue search", "same-author": "same-author listing",
           "candidate": "read of a candidate"}


def _leads(client: "GitHubClient", budget: Budget, closed: RecordedPR, failed: list[Reason], pool: Any,
           timeline: tuple[IssueRef, ...] | None = None) -> dict[int, set[str]]:
    """PR number -> the kinds of link that named it (before its content is looked at), the three
    sources asked at once (`timeline`: already read). A source GitHub refuses (a 403 from the
    search's own rate limit, say) is added to `failed`; the leads of the others stand. A spent
    budget stops at once (BudgetSpent)."""
    n = closed.number
    leads: dict[int, set[str]] = {}

    def add(ref: IssueRef, kind: str) -> None:
        if ref.is_pull and ref.number != n and (ref.repo is None or ref.repo.lower() == client.repo.lower()):
            leads.setdefault(ref.number, set()).add(kind)

    def ask(source: str, fn: Any, *args: Any) -> tuple[IssueRef, ...]:
        try:
            return budget.call(fn, *args)
        except BudgetSpent:
            raise
        except PorttrackError as exc:
            failed.append(Reason(source, str(exc)))
            return ()

    asked = {
        "timeline": pool.submit(ask, "timeline", client.issue_timeline, n) if timeline is None else None,
        "search": pool.submit(ask, "search", client.search_pulls, f"{n} in:body"),
        "same-author": pool.submit(ask, "same-author", client.pulls_by_author, closed.author) if closed.author else None,
    }
    for ref in (asked["timeline"].result() if asked["timeline"] is not None else timeline or ()):
        add(ref, "cross-referenced")
    for ref in asked["search"].result():
        add(ref, "body-says" if says_succeeds(ref.body, n) else "mentions")
    for ref in asked["same-author"].result() if asked["same-author"] is not None else ():
        if ref.number > n:  # later work: numbers grow with time
            add(ref, "same-author")
    return leads


def _ordered(leads: dict[int, set[str]]) -> list[int]:
    return sorted(leads, key=lambda k: (-max(_STRENGTH.get(kind, 0) for kind in leads[k]), -len(leads[k]), -k))


_GIT = threading.Lock()  # one git fetch at a time in the checkout (candidates are read at once)


def _hunks_of(client: "GitHubClient", budget: Budget, local, number: int, head: str | None, base: str | None) -> tuple[Hunk, ...]:
    """A PR's hunks: from git when it can say (no request), else from GitHub's file list."""
    if local is not None:
        with _GIT:
            found = local(number, head, base)
        if found is not None:
            return found
    return file_hunks(budget.call(client.pull_files, number))


def _examine(client: "GitHubClient", budget: Budget, closed: RecordedPR, number: int, kinds: set[str],
             wanted: Sequence[Hunk], local=None) -> Candidate | None:
    pr: PullRequest = budget.call(client.get_pull, number)
    theirs = _hunks_of(client, budget, local, number, pr.head_sha, pr.base_sha)  # the two in turn: candidates are read at once
    ids = {h.id for h in theirs}
    shared = [h for h in wanted if h.id in ids]
    near = [h for h in wanted if h.id not in ids and near_match(h, theirs) is not None]
    same_files = {h.path for h in wanted} & {h.path for h in theirs}
    reasons: list[Reason] = []
    if shared:
        reasons.append(Reason("shares-hunks", f"{len(shared)} of {len(wanted)}"))
    if near:
        reasons.append(Reason("near-hunks", f"{len(near)} of {len(wanted)}"))
    said = says_succeeds(pr.body, closed.number)
    if said:
        reasons.append(Reason("body-says", said))
    elif "mentions" in kinds or "body-says" in kinds:
        reasons.append(Reason("mentions", str(closed.number)))
    if "cross-referenced" in kinds:
        reasons.append(Reason("cross-referenced", str(closed.number)))
    if pr.author and pr.author == closed.author:
        if not same_files and not reasons:
            return None  # same author, other files: unrelated later work
        files = f", touches {len(same_files)} of its {len({h.path for h in wanted})} files" if wanted else ""
        reasons.append(Reason("same-author", f"{pr.author}{files}"))
    if not reasons:
        return None
    reasons.append(Reason("state", _state_words(pr)))
    return Candidate(pr.number, pr.title, pr.html_url, pr.author, pr.state, pr.merged_at, len(shared), len(near),
                     len(wanted), tuple(reasons), pr.state == "open" and pr.draft)


def _state_words(pr: PullRequest) -> str:
    if pr.state == "merged":
        return f"merged {(pr.merged_at or '')[:10]}".strip()
    if pr.state == "open":
        return "open, draft" if pr.draft else "open"
    return "closed without merging"


def says_succeeds(body: str, number: int) -> str | None:
    """The phrase in `body` that says it takes over #number ("supersedes #48804"), or None."""
    match = re.search(rf"{_PHRASE}:?\s+(?:PR\s*)?(?:https?://\S+/pull/|#){number}(?!\d)", body or "", re.I)
    return match.group(0) if match else None


def render_lines(search: SuccessorSearch, shown: int = SHOWN) -> list[str]:
    """Lines for `status` and the weekly issue, under the orphaned PR's next action."""
    if not search.candidates:
        if search.problem:  # a refusal is no finding: the search did not (fully) run
            return [f"successors of #{search.pr} not searched: {search.problem}"]
        return [f"no successor found for #{search.pr}"]
    lines = [f"successor candidates for #{search.pr}:"]
    for c in search.candidates[:shown]:
        lines.append(f"  #{c.number} {c.title}: {c.text}")
    best = search.candidates[0]
    lines.append(f"  to follow #{best.number}, in tracks.yaml:")
    lines += [f"    {line}" for line in search.adopt_lines(best)]
    if search.problem:
        lines.append(f"  (search incomplete: {search.problem})")
    return lines


def follow_words(search: SuccessorSearch, yaml_hint: bool = True) -> str | None:
    """The orphaned PR's next action when a candidate shares at least half its hunks, with the
    tracks.yaml change that adopts it (`yaml_hint`; the weekly issue shows that change as a block
    of its own); None when no candidate does."""
    best = search.follow()
    if best is None:
        return None
    prs = ", ".join(str(best.number if n == search.pr else n) for n in search.track_prs)
    words = f"#{search.pr} closed without merging -> follow #{best.number}? (shares {best.shared} of {best.total} hunks, {_state_words_of(best)})"
    return words + (f" tracks.yaml: {search.track}: prs: [{prs}]" if yaml_hint else "")


def _state_words_of(c: Candidate) -> str:
    if c.state == "merged":
        return f"merged {(c.merged_at or '')[:10]}".strip()
    if c.state == "open":
        return "open, draft" if c.draft else "open"
    return "closed without merging"


__all__ = ["SOURCES", "Candidate", "Reason", "SuccessorSearch", "find_successors", "follow_words", "render_lines", "says_succeeds"]
