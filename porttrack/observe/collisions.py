"""Collisions ahead: open upstream PRs that change what a queued patch changes.

Before the next rebase, a queued patch conflicts with any upstream change to the lines it edits.
Every open PR upstream is listed (all pages, most recently updated first) and compared, as far as
the request budget allows, by content: the same hunk ids, or changed lines of the same file that
overlap or touch. A PR that touches only other files, or other lines of the same file, is no
collision. The listing and the PRs' file lists come from the GitHub door, conditional and cached
(an unchanged week costs 304s).

Line numbers live in different files: a queued hunk's are against the commit its patch was made
on (`QueuedHunks.base`: the fork's build base for a regenerated patch, else upstream's base of the
imported PR), an open PR's against its own base, where the imported PR may already be merged and
everything around it moved. So each queued changed range is carried onto the open PR's base
through git's own diff of the two bases (`git diff -U0`, `LineMap`) before it is compared; a range
whose lines that diff rewrote maps onto the whole rewritten region (a collision reported, never
one missed). When a base is not in the fork checkout the ranges are compared unmapped, and the
overlap says so.

A scan cut short (the budget, GitHub) says "incomplete: N of M open PRs compared", never "none".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from porttrack.common.errors import PorttrackError
from porttrack.diff.hunks import Hunk, parse_diff
from porttrack.git.repo import GitRepo
from porttrack.github.budget import Budget, BudgetSpent
from porttrack.observe.prdiff import file_hunks

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient

PER_PAGE = 100  # open PRs per listing request (GitHub's maximum)
MAX_LISTING_PAGES = 50  # 5000 open PRs: more than any project has


@dataclass(frozen=True)
class QueuedHunks:
    """A live queued patch, as the comparison needs it."""

    name: str
    pr: int
    hunks: tuple[Hunk, ...]
    base: str | None = None  # the commit the hunks' line numbers are against (None: unknown)


@dataclass(frozen=True)
class Overlap:
    """kind: same-hunk (the id of a hunk both change) | overlapping-lines (detail: the lines of the
    open PR's base both change) | overlapping-lines-unmapped (the same, the bases not mapped) |
    renamed (detail: the new path) | removed: the open PR renames or deletes a file the patch changes."""

    kind: str
    path: str
    detail: str

    @property
    def words(self) -> str:
        if self.kind == "same-hunk":
            return f"both change hunk {self.detail} of {self.path}"
        if self.kind == "renamed":
            return f"it renames {self.path} to {self.detail}"
        if self.kind == "removed":
            return f"it deletes {self.path}"
        lines = f"line {self.detail}" if "-" not in self.detail else f"lines {self.detail}"
        if self.kind == "overlapping-lines-unmapped":
            return f"both change {self.path} {lines} (line numbers not mapped: a base is not in the fork checkout)"
        return f"both change {self.path} {lines}"


@dataclass(frozen=True)
class Collision:
    patch: str
    patch_pr: int
    upstream: int
    title: str
    url: str
    author: str
    updated_at: str | None
    overlaps: tuple[Overlap, ...]

    @property
    def text(self) -> str:
        first = "; ".join(o.words for o in self.overlaps[:3])
        more = f" (+{len(self.overlaps) - 3} more)" if len(self.overlaps) > 3 else ""
        return f"open #{self.upstream} ({self.title}) collides with {self.patch}: {first}{more}"

    def to_json(self) -> dict[str, Any]:
        return {"patch": self.patch, "patch_pr": self.patch_pr, "upstream": self.upstream, "title": self.title,
                "url": self.url, "author": self.author, "updated_at": self.updated_at, "text": self.text,
                "overlaps": [{"kind": o.kind, "path": o.path, "detail": o.detail} for o in self.overlaps]}


@dataclass(frozen=True)
class CollisionSearch:
    collisions: tuple[Collision, ...]
    compared: int  # open PRs whose files were compared
    problem: str | None = None
    open_prs: int | None = None  # open PRs listed upstream, the tracked ones left out (None: not listed)
    listed_all: bool = True  # False: the listing itself was cut short (`open_prs` is a lower bound)
    by_git: int = 0  # of `compared`: through git (refs/pull/N/head, every file); the rest from GitHub's file lists
    path_note: str | None = None  # why some PRs were not compared through git

    @property
    def complete(self) -> bool:
        return self.problem is None and self.open_prs is not None and self.compared >= self.open_prs

    @property
    def scope(self) -> str:
        total = "?" if self.open_prs is None else f"{'at least ' if not self.listed_all else ''}{self.open_prs}"
        return f"{self.compared} of {total} open PRs compared"

    def for_patch(self, name: str) -> tuple[Collision, ...]:
        return tuple(c for c in self.collisions if c.patch == name)

    def to_json(self) -> dict[str, Any]:
        return {"compared_open_prs": self.compared, "open_prs": self.open_prs, "listed_all": self.listed_all,
                "complete": self.complete, "problem": self.problem, "collisions": [c.to_json() for c in self.collisions],
                "compared_through_git": self.by_git, "compared_from_file_lists": self.compared - self.by_git,
                "method": self.method}

    @property
    def method(self) -> str:
        """Which path ran: "git" (every PR's head fetched and diffed locally), "file lists" (GitHub's
        files endpoint, capped at 300 files a PR here), "git and file lists", or "none"."""
        api = self.compared - self.by_git
        return {(True, True): "git and file lists", (True, False): "git", (False, True): "file lists"}.get(
            (self.by_git > 0, api > 0), "none")

    @property
    def method_words(self) -> str:
        api = self.compared - self.by_git
        parts = []
        if self.by_git:
            parts.append(f"{self.by_git} through git, their refs/pull/N/head diffed locally: every file and line")
        if api:
            parts.append(f"{api} from GitHub's file lists, at most 300 files each")
        why = f"; {self.path_note}" if self.path_note and api else ""
        return "compared " + "; ".join(parts) + why if parts else ""


# Without a token GitHub allows 60 requests an hour per address. Every open PR's file list costs
# one (the listing carries no files, and the search API cannot filter PRs by path), so ~270 open PRs
# cannot be compared in one tokenless run. The scan takes what leaves RESERVE of the hour for the
# polls, remembers each PR it compared at its head SHA (a PR whose head has not moved is compared
# again from the remembered file list, with no request), and goes on from there next run.
RESERVE = 40
WAVE = 8  # file lists asked at once


def find_collisions(client: "GitHubClient", budget: Budget, queued: Sequence[QueuedHunks], skip: frozenset[int] = frozenset(),
                    repo: GitRepo | None = None, max_prs: int | None = None, listed: "tuple[list, bool] | None" = None,
                    remote: str = "upstream", cache: "Path | None" = None, default_branch: str = "main",
                    token_unbounded: bool = False, fetch: bool = True) -> CollisionSearch:
    """Collisions of each queued patch with the open upstream PRs (`skip`: the tracked PRs
    themselves, whose later revisions `refresh` already covers). `repo`: the fork checkout: every
    PR whose head git can fetch from `remote` is compared there (`gitcollide`, verdicts cached in
    `cache`); the rest, or all without a checkout, from GitHub's file lists, bases mapped in the
    checkout when it has them. Never raises for GitHub trouble or a spent budget: it stops and
    says how far it got. `token_unbounded`: with a token, the file lists are not held to `budget`
    (the searches' default bound) but to the hour GitHub says is left: one run compares all. `listed`: `list_open`'s answer, asked beforehand (the caller asks it
    while the successor searches run)."""
    if not queued:
        return CollisionSearch((), 0, None, 0)
    from concurrent.futures import ThreadPoolExecutor

    found: list[Collision] = []
    compared, problem = 0, None
    open_prs, listed_all = listed if listed is not None else list_open(client, budget, skip)
    if not listed_all:
        problem = "the listing of open PRs was cut short"
    wanted = open_prs[:max_prs]
    by_git: dict[int, dict[str, tuple]] = {}
    through_git: frozenset[int] = frozenset()
    path_note = None
    if repo is not None and not repo.offline and wanted:
        from porttrack.observe import gitcollide

        try:
            verdicts = gitcollide.scan(repo, remote, wanted, queued, cache, _git_overlaps, LineMap, default_branch, fetch=fetch)
        except PorttrackError as exc:  # git itself failed: GitHub's file lists answer instead
            path_note = f"git could not compare them ({exc})"
        else:
            by_git, through_git = verdicts.found, verdicts.compared
            path_note = verdicts.note or _unserved_words(verdicts.unserved)
    maps = _Maps(repo, queued)
    api_prs = [pr for pr in wanted if pr.number not in through_git]
    files = {pr.number: _remembered(client, pr) for pr in api_prs}
    missing = [pr for pr in api_prs if files[pr.number] is None]
    if token_unbounded and client.authenticated and missing:
        # with a token the hour holds 5000: every file list in this run (up to 3 pages each), not
        # the searches' default bound, keeping RESERVE of what GitHub says is left
        left = client.rate_seen.remaining if client.rate_seen is not None and client.rate_seen.remaining is not None else 5000
        budget = Budget(client, max(0, min(3 * len(missing) + 8, left - RESERVE)))
    halted = None  # why no more file lists are asked this run
    with ThreadPoolExecutor(max_workers=WAVE) as pool:
        while missing and halted is None:
            allowed = min(WAVE, _allowance(client), budget.left)
            if allowed <= 0:
                halted = "request limit reached" if budget.left <= 0 else _budget_words(client)
                break
            wave, missing = missing[:allowed], missing[allowed:]
            asked = [(pr, pool.submit(budget.call, client.pull_files, pr.number)) for pr in wave]
            for pr, future in asked:  # every answer that came is kept, whatever became of the others
                try:
                    files[pr.number] = future.result()
                    _remember(client, pr)
                except BudgetSpent:
                    halted = "request limit reached"
                except PorttrackError as exc:
                    halted = halted or f"GitHub: {exc}"
    problem = problem or halted
    for pr in wanted:
        if pr.number in through_git:
            compared += 1
            for patch in queued:
                overlaps = by_git.get(pr.number, {}).get(patch.name)
                if overlaps:
                    found.append(Collision(patch.name, patch.pr, pr.number, pr.title, pr.html_url, pr.author, pr.updated_at,
                                           tuple(Overlap(*o) for o in overlaps)))
            continue
        if files[pr.number] is None:
            continue
        compared += 1
        theirs = file_hunks(files[pr.number])
        changed = _listed_changes(files[pr.number])
        for patch in queued:
            overlaps = tuple(Overlap(*o) for o in _git_overlaps(patch, theirs, changed, maps.onto(patch, pr.base_sha)))
            if overlaps:
                found.append(Collision(patch.name, patch.pr, pr.number, pr.title, pr.html_url, pr.author,
                                       pr.updated_at, overlaps))
    if problem is None and max_prs is not None and compared < len(open_prs):
        problem = f"at most {max_prs} compared per run"
    return CollisionSearch(tuple(found), compared, problem, len(open_prs), listed_all, len(through_git), path_note)


def _git_overlaps(patch: QueuedHunks, theirs: Sequence[Hunk], changed: dict, lines: "LineMap | None") -> tuple[tuple[str, str, str], ...]:
    """One queued patch against one open PR's git diff: files it renames or deletes, then lines."""
    out: list[tuple[str, str, str]] = []
    gone: set[str] = set()
    for path in dict.fromkeys(h.path for h in patch.hunks):
        status, new = changed.get(path, (None, None))
        if status == "renamed":
            out.append(("renamed", path, str(new)))
            gone.add(path)
        elif status == "removed":
            out.append(("removed", path, ""))
            gone.add(path)
    kept = [h for h in patch.hunks if h.path not in gone]
    out += [(o.kind, o.path, o.detail) for o in compare(kept, theirs, lines)]
    return tuple(out)


def _listed_changes(files) -> dict[str, tuple[str, str | None]]:
    """What a PR's file list says became of each old path: renamed (GitHub sends a rename with no
    hunks when only the name changed) or removed."""
    out: dict[str, tuple[str, str | None]] = {}
    for f in files:
        if f.status == "renamed" and f.previous_filename and f.previous_filename != f.filename:
            out[f.previous_filename] = ("renamed", f.filename)
        elif f.status == "removed":
            out[f.filename] = ("removed", None)
    return out


def _unserved_words(unserved: dict[int, str]) -> str | None:
    if not unserved:
        return None
    first = sorted(unserved)[:3]
    more = f" and {len(unserved) - 3} more" if len(unserved) > 3 else ""
    return "not through git: " + ", ".join(f"#{n} ({unserved[n]})" for n in first) + more


def _memory_key(client: "GitHubClient", number: int) -> str:
    return f"porttrack:compared:{client.api_url}/repos/{client.repo}#{int(number)}"


def _remembered(client: "GitHubClient", pr) -> Any:
    """The file list of `pr` compared in an earlier run at the same head SHA (None: not remembered)."""
    if not pr.head_sha or client.cache.recall(_memory_key(client, pr.number)) != pr.head_sha:
        return None
    return client.remembered_pull_files(pr.number)


def _remember(client: "GitHubClient", pr) -> None:
    if pr.head_sha:
        client.cache.remember(_memory_key(client, pr.number), pr.head_sha)


def _allowance(client: "GitHubClient") -> int:
    """File lists this run may still ask for: any number with a token; without one, what keeps
    RESERVE of the hour's requests for the polls (by the budget the last answer stated)."""
    if client.authenticated:
        return WAVE
    seen = client.rate_seen
    if seen is None or seen.remaining is None:
        return WAVE
    return seen.remaining - RESERVE


def _budget_words(client: "GitHubClient") -> str:
    return (f"without a token GitHub allows {client.rate_seen.limit if client.rate_seen else 60} requests an hour and "
            f"each open PR's file list costs one, so a run checks only what leaves {RESERVE} for the polls "
            "(with a token, all are checked in one run)")


def list_open(client: "GitHubClient", budget: Budget, skip: frozenset[int]) -> tuple[list, bool]:
    """Every open PR not in `skip`, most recently updated first; and whether the listing was read
    to its end. The pages the last run read are asked at once (remembered: their number), then any
    further ones in turn; unchanged pages answer 304."""
    from concurrent.futures import ThreadPoolExecutor

    key = f"porttrack:open-pages:{client.api_url}/repos/{client.repo}"
    known = client.cache.recall(key)
    first = max(1, min(int(known) if isinstance(known, int) else 1, MAX_LISTING_PAGES, budget.left or 1))
    pages: list = []
    try:
        with ThreadPoolExecutor(max_workers=min(first, 8)) as pool:
            pages = list(pool.map(lambda n: budget.call(client.open_pulls, n, PER_PAGE), range(1, first + 1)))
        while pages[-1][1] and pages[-1][0] and len(pages) < MAX_LISTING_PAGES:
            pages.append(budget.call(client.open_pulls, len(pages) + 1, PER_PAGE))
    except (BudgetSpent, PorttrackError):
        return _merged(pages, skip), False
    # the pages that end the listing (an empty one past a full last page is not kept as one)
    used = len(pages) if pages[-1][0] or len(pages) == 1 else len(pages) - 1
    if used != known:
        client.cache.remember(key, used)
    complete = not pages[-1][1] or not pages[-1][0]
    return _merged(pages, skip), complete


def _merged(pages: list, skip: frozenset[int]) -> list:
    out: list = []
    seen: set[int] = set()
    for prs, _more in pages:
        for p in prs:  # a PR updated between two pages' answers shows on both
            if p.number not in skip and p.number not in seen:
                seen.add(p.number)
                out.append(p)
    return out


def compare(mine: Sequence[Hunk], theirs: Sequence[Hunk], lines: "LineMap | None" = None) -> tuple[Overlap, ...]:
    """What `theirs` changes of what `mine` changes: shared hunk ids first, then changed lines that
    overlap or touch, `mine` carried onto `theirs`' base by `lines` (None: taken as they are)."""
    ids = {h.id for h in theirs}
    out = [Overlap("same-hunk", h.path, h.id) for h in mine if h.id in ids]
    for h in mine:
        if h.id in ids or h.kind != "text":
            continue
        span = changed_span(h)
        mapped = lines.hunk_span(h) if lines is not None else None
        kind = "overlapping-lines" if mapped is not None or lines is None else "overlapping-lines-unmapped"
        mine_span = mapped if mapped is not None else span
        for other in theirs:
            if other.path == h.path and other.kind == "text" and _touch(mine_span, changed_span(other)):
                out.append(Overlap(kind, h.path, _lines(mine_span, changed_span(other))))
                break
    return tuple(out)


# -- changed lines, and carrying them from one base to another -----------------------------------
# A span is a closed interval in half-line units of the old file: removed line k is [2k, 2k+2],
# a line inserted before line k is the point [2k, 2k]. Edits of adjacent lines touch (3-way merge
# calls that a conflict); an insertion touches the lines on both sides of it.


def changed_span(h: Hunk) -> tuple[int, int]:
    """The span of the lines `h` removes or inserts (context lines left out)."""
    n = h.old_start if h.old_len else h.old_start + 1
    lo, hi = None, None
    for marker, _content in h._lines():
        if marker == b"-":
            lo, hi = min(lo if lo is not None else 2 * n, 2 * n), max(hi or 0, 2 * n + 2)
            n += 1
        elif marker == b"+":
            lo, hi = min(lo if lo is not None else 2 * n, 2 * n), max(hi or 0, 2 * n)
        else:
            n += 1
    return (lo, hi) if lo is not None and hi is not None else (2 * n, 2 * n)


def _touch(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _lines(a: tuple[int, int], b: tuple[int, int]) -> str:
    """The lines the two changes cover together (in the open PR's base)."""
    start, end = min(a[0], b[0]) // 2, max((max(a[1], b[1]) - 1) // 2, min(a[0], b[0]) // 2)
    return f"{start}-{end}" if end > start else str(start)


class LineMap:
    """Lines of commit `old` carried onto commit `new`, file by file, by `git diff -U0 old new`."""

    def __init__(self, repo: GitRepo, old: str, new: str, paths: Sequence[str]):
        self._regions: dict[str, list[tuple[int, int, int, int]]] = {}
        self._added: dict[str, list[list[bytes]]] = {}
        for fd in parse_diff(repo.diff_zero(old, new, paths)):
            for path in {fd.old_path, fd.new_path} - {None}:
                self._regions[str(path)] = [(h.old_start, h.old_len, h.new_start, h.new_len) for h in fd.text_hunks]
                self._added[str(path)] = [[line.rstrip() for line in h.added_lines()] for h in fd.text_hunks]

    def span(self, path: str, span: tuple[int, int]) -> tuple[int, int]:
        lo_line, lo_half = divmod(span[0], 2)
        hi_line, hi_half = divmod(span[1], 2)
        regions = self._regions.get(path, ())
        return 2 * _carry(regions, lo_line, low=True) + lo_half, 2 * _carry(regions, hi_line, low=False) + hi_half

    def hunk_span(self, h: Hunk) -> tuple[int, int]:
        """Where `h`'s change stands in the new commit. Where the two commits' own diff changed
        lines at or next to it (an insertion at the same place, a new file, the queued change
        itself merged upstream), the span covers what that diff put there: exactly the hunk's added
        lines when the new commit holds them there, else the whole region (a collision reported,
        never one missed)."""
        span = changed_span(h)
        mapped = self.span(h.path, span)
        regions = self._regions.get(h.path, ())
        touching = [i for i, r in enumerate(regions) if _touch(_old_span(r), span)]
        if not touching:
            return mapped
        added = [line.rstrip() for line in h.added_lines()]
        for i in touching:
            at = _find(self._added[h.path][i], added)
            if at is not None:
                start = regions[i][2] + at
                return 2 * start, 2 * (start + len(added))
        news = [_new_span(regions[i]) for i in touching]
        return min(mapped[0], *(a for a, _ in news)), max(mapped[1], *(b for _, b in news))


def _old_span(r: tuple[int, int, int, int]) -> tuple[int, int]:
    old_start, old_len = r[0], r[1]
    return (2 * old_start, 2 * (old_start + old_len)) if old_len else (2 * (old_start + 1), 2 * (old_start + 1))


def _new_span(r: tuple[int, int, int, int]) -> tuple[int, int]:
    new_start, new_len = r[2], r[3]
    return (2 * new_start, 2 * (new_start + new_len)) if new_len else (2 * (new_start + 1), 2 * (new_start + 1))


def _find(lines: Sequence[bytes], wanted: Sequence[bytes]) -> int | None:
    """Where `wanted` (non-empty) starts as a run of `lines`, or None."""
    if not wanted or len(wanted) > len(lines):
        return None
    for i in range(len(lines) - len(wanted) + 1):
        if lines[i] == wanted[0] and list(lines[i:i + len(wanted)]) == list(wanted):
            return i
    return None


def _carry(regions: Sequence[tuple[int, int, int, int]], x: int, low: bool) -> int:
    """Line `x` of the old file in the new one; a line inside a region the diff rewrote maps to
    that region's first (`low`) or last line in the new file."""
    shift = 0
    for old_start, old_len, new_start, new_len in regions:
        if old_len == 0:  # inserted after line old_start
            if old_start < x:
                shift += new_len
            continue
        if old_start + old_len <= x:
            shift += new_len - old_len
        elif old_start <= x:
            return new_start if low or new_len == 0 else new_start + new_len
        else:
            break
    return x + shift


class _Maps:
    """One `LineMap` per (queued base, open PR base), made when first asked for."""

    def __init__(self, repo: GitRepo | None, queued: Sequence[QueuedHunks]):
        self.repo = repo
        self.paths = sorted({h.path for q in queued for h in q.hunks})
        self._made: dict[tuple[str, str], LineMap | None] = {}

    def onto(self, patch: QueuedHunks, base: str | None) -> LineMap | None:
        if self.repo is None or patch.base is None or base is None:
            return None
        key = (patch.base, base)
        if key not in self._made:
            known = self.repo.commits_present([patch.base, base]) == {patch.base, base}
            self._made[key] = LineMap(self.repo, patch.base, base, self.paths) if known else None
        return self._made[key]


def render_lines(search: CollisionSearch) -> list[str]:
    """Lines for `status`, `queue` and the weekly issue: never "none" for a scan cut short."""
    if search.compared == 0 and not search.complete and search.problem:  # a refusal, not a finding
        return [f"collisions ahead: not searched ({search.problem})"]
    if search.complete:
        head = f"collisions ahead ({search.scope})" + (":" if search.collisions else ": none")
    else:
        head = f"collisions ahead: incomplete: {search.scope}" + (":" if search.collisions else "; none among those")
    lines = [head]
    lines += [f"  {c.text}" for c in search.collisions]
    if search.method_words:
        lines.append(f"  ({search.method_words})")
    if search.problem:
        lines.append(f"  (search incomplete: {search.problem}; the rest waits for the next run)")
    return lines


__all__ = ["Collision", "CollisionSearch", "LineMap", "Overlap", "QueuedHunks", "changed_span", "compare", "find_collisions", "list_open",
           "render_lines"]
