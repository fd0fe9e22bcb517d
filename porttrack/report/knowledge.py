"""What the queue, coverage and convergence records know about each PR, for `porttrack status`;
and (`search_upstream`) what a live run finds upstream: successors of orphaned PRs, collisions.

`gather` never fails status: a part that cannot be read (no queue yet, no checkout of the fork, a
malformed record) is simply left out of the `Knowledge` it returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from porttrack.common.errors import ConfigError, PorttrackError
from porttrack.converge.coverage import Coverage, track_coverage
from porttrack.converge.record import latest_verdicts
from porttrack.diff.hunks import parse_diff
from porttrack.git.repo import GitRepo
from porttrack.github.budget import DEFAULT_LIMIT, Budget, Cost
from porttrack.queue import manifest as queue_mod
from porttrack.report.status import Knowledge, NextAction, StatusReport, TrackStatus, tracked_numbers
from porttrack.tracks.config import Config
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient
    from porttrack.observe.collisions import CollisionSearch, QueuedHunks
    from porttrack.observe.successors import SuccessorSearch

# The searches (porttrack.observe.collisions, .successors, .prdiff) and their threads are imported
# where a live run starts them, not here: `status --offline` runs none of them (issue 34, start-up).


def gather(ws: Workspace, config: Config, fork: GitRepo | None = None, fork_problem: str | None = None) -> Knowledge:
    """`fork`: the fork checkout (coverage is looked for in it, recorded verdicts are bound to its
    branch tip), or None and why (`fork_problem`); neither given: the configured checkout, opened
    here, for callers that hold no door (the command layer hands in `Context.fork_or_problem`)."""
    if fork is None and fork_problem is None:
        fork, fork_problem = open_configured_fork(config)
    live = _live_patches(ws)
    coverage = _coverage(ws, config, fork, fork_problem)
    return Knowledge(
        queued={p.pr: p.state for p in live},
        converged=_converged(ws, config, fork, fork_problem),
        coverage={c.pr: c.text for c in coverage},
        coverage_unknown=frozenset(c.pr for c in coverage if c.problem),
        queued_heads={p.pr: p.revision.head for p in live if not p.revision.merged},
        fork_commits_missing={c.pr: c.fork_commits_missing for c in coverage if not c.problem},
    )


def open_configured_fork(config: Config) -> tuple[GitRepo | None, str | None]:
    """`Context.fork_or_problem` for a caller that holds no door (a library caller, a test)."""
    path = config.fork_checkout()
    if path is None or not path.exists():
        return None, None  # coverage says so in its one-line form
    try:
        return GitRepo.open(path), None
    except PorttrackError as exc:
        return None, str(exc)


def _live_patches(ws: Workspace):
    try:
        return queue_mod.load(ws).live()
    except PorttrackError:
        return ()


def _converged(ws: Workspace, config: Config, fork: GitRepo | None, problem: str | None):
    """PR -> its recorded verdict, bound to fork.branch's tip (`converge_record.RecordedVerdict`)."""
    try:
        return latest_verdicts(ws, config.fork.branch, fork, problem)
    except PorttrackError:
        return {}


def _coverage(ws: Workspace, config: Config, fork: GitRepo | None, problem: str | None) -> tuple[Coverage, ...]:
    try:
        return track_coverage(ws, config, fork, problem)
    except PorttrackError:
        return ()


# -- searches upstream (successors of orphaned PRs, collisions ahead of the queue) ---------------


@dataclass(frozen=True)
class Findings:
    """What the searches found in one live run, and what they cost (`skipped`: why none ran)."""

    successors: tuple[SuccessorSearch, ...] = ()
    collisions: CollisionSearch | None = None
    cost: Cost | None = None
    skipped: str | None = None
    recorded_at: str | None = None  # read from state/ (an offline run): what the live run at that time found

    def successors_of(self, pr: int) -> SuccessorSearch | None:
        return next((s for s in self.successors if s.pr == pr), None)

    def to_json(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "cost": self.cost.to_json() if self.cost else None,
                "successors": [s.to_json() for s in self.successors],
                "collisions": self.collisions.to_json() if self.collisions else None}


class _Tally(Budget):
    """A budget that also keeps, per call, whether it was answered from the ETag cache."""

    def __init__(self, client: "GitHubClient", limit: int):
        super().__init__(client, limit)
        self.cached: list[bool] = []

    def call(self, fn, *args):
        result, cached = fn(*args)
        self.cached.append(bool(cached))
        return result


@dataclass
class Prefetch:
    """The open-PR listing, asked while the poll runs (a round trip saved): `start_listing`."""

    queued: tuple[QueuedHunks, ...]
    skip: frozenset[int]
    tally: _Tally
    future: Any  # the listing (None: no live queue)
    timelines: dict[int, Any]  # recorded-closed tracked PR -> its timeline, asked

    def result(self) -> "tuple[tuple[list, bool] | None, Cost]":
        listed = self.future.result() if self.future is not None else None
        for future in self.timelines.values():
            try:
                future.result()
            except PorttrackError:
                pass  # said by the successor search that reads it
        pages = self.tally.cached
        return listed, Cost(len(pages), sum(pages), search_limit(), False)


def start_listing(ws: Workspace, config: Config, client: "GitHubClient") -> Prefetch | None:
    """Send the listing of open PRs now, in a thread, when collisions will want it (a live queue,
    searches on): `status` asks it before its poll, `search_upstream` takes the answer."""
    if os.environ.get("PORTTRACK_SEARCH", "").strip().lower() in ("0", "off", "no", "false"):
        return None
    queued = queued_hunks(ws)
    try:  # the tracked PRs recorded closed: their timelines are what the successor search asks first
        recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    except PorttrackError:
        recorded = None
    closed = sorted(n for n in tracked_numbers(config) if recorded is not None and n in recorded.prs
                    and recorded.prs[n].state == "closed" and any(n in t.prs for t in config.tracks.values()))
    if not queued and not closed:
        return None
    from concurrent.futures import ThreadPoolExecutor

    from porttrack.observe.collisions import list_open

    skip = frozenset(tracked_numbers(config))
    tally = _Tally(client, search_limit())
    pool = ThreadPoolExecutor(max_workers=1 + len(closed), thread_name_prefix="prefetch")
    future = pool.submit(list_open, client, tally, skip) if queued else None
    timelines = {n: pool.submit(tally.call, lambda n=n: (lambda answer: (answer, answer[1]))(client.issue_timeline(n)))
                 for n in closed}
    pool.shutdown(wait=False)
    return Prefetch(queued, skip, tally, future, timelines)


def search_upstream(ws: Workspace, config: Config, client: "GitHubClient", report: StatusReport,
                    fork: GitRepo | None = None, prefetch: Prefetch | None = None, fetch: bool = True) -> Findings:
    """Run the searches a live `status` (and the weekly report) adds: successor candidates for each
    tracked PR closed without merging, and collisions of the live queue with open upstream PRs.
    Bounded by PORTTRACK_SEARCH_LIMIT requests (default `budget.DEFAULT_LIMIT`); PORTTRACK_SEARCH=off
    skips them. `fork`: the fork checkout, where collisions map line numbers between bases (None:
    the configured one is opened here). `prefetch`: the listing `start_listing` sent already (its
    requests are counted in the cost). Never fails the caller."""
    from concurrent.futures import ThreadPoolExecutor

    from porttrack.observe.collisions import find_collisions, list_open
    from porttrack.observe.prdiff import git_hunks
    from porttrack.observe.successors import find_successors

    if os.environ.get("PORTTRACK_SEARCH", "").strip().lower() in ("0", "off", "no", "false"):
        return Findings(skipped="searches switched off (PORTTRACK_SEARCH)")
    early, early_cost = prefetch.result() if prefetch is not None else (None, None)
    budget = Budget(client, search_limit() - (early_cost.requests if early_cost else 0))
    orphaned = [(t.id, pr.recorded) for t in report.tracks for pr in t.prs
                if pr.recorded is not None and pr.state == "closed" and pr.number in config.tracks[t.id].prs]
    queued = prefetch.queued if prefetch is not None else queued_hunks(ws)
    skip = frozenset(tracked_numbers(config))
    # the open-PR listing goes out while the successors are searched; the file lists after them,
    # so that they take only what the successors left of a tokenless hour
    if (queued or orphaned) and fork is None:
        fork, _problem = open_configured_fork(config)
    remote = config.upstream.remote

    def local(number: int, head: str | None, base: str | None):
        return git_hunks(fork, remote, number, head, base, fetch)

    timelines = prefetch.timelines if prefetch is not None else {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        listed = (pool.submit(lambda: early) if early is not None
                  else pool.submit(list_open, client, budget, skip) if queued else None)
        successors = tuple(find_successors(client, budget, recorded, tid, config.tracks[tid].prs,
                                           local=local if fork is not None else None,
                                           timeline=timelines.get(recorded.number)) for tid, recorded in orphaned)
        collisions = find_collisions(client, budget, queued, skip, fork, listed=listed.result(), remote=config.upstream.remote,
                                     cache=ws.cache_dir / "collisions.json",
                                     default_branch=config.upstream.default_branch,
                                     token_unbounded=not os.environ.get("PORTTRACK_SEARCH_LIMIT", "").strip(),
                                     fetch=fetch) if listed is not None else None
    cost = budget.cost()
    if early_cost is not None:
        cost = Cost(cost.requests + early_cost.requests, cost.not_modified + early_cost.not_modified, search_limit(), cost.exhausted)
    return Findings(successors, collisions, cost)


SUCCESSORS_FILE = "successors.json"  # in state/: what the last live run's successor searches found


def record_findings(ws: Workspace, findings: Findings, observed_at: str | None) -> None:
    """Keep what the successor searches found (state/successors.json, committed with the recorded
    state), so that `status --offline` and `report weekly --offline` say what the live run said
    ("follow #N?"), not "decide" again. A search that stopped short keeps the last whole one."""
    from porttrack.workspace.files import lock, write_json

    if findings.skipped:
        return
    path = ws.state_dir / SUCCESSORS_FILE
    kept = _recorded_searches(path)
    for search in findings.successors:
        if search.problem is None or str(search.pr) not in kept:
            kept[str(search.pr)] = {**search.to_json(), "observed_at": observed_at}
    with lock(ws, "status: recording the successor searches"):
        ws.state_dir.mkdir(parents=True, exist_ok=True)
        write_json(path, {"schema": "porttrack/successors/v1", "searches": kept})


def recorded_findings(ws: Workspace, config: Config, report: StatusReport) -> Findings | None:
    """The successor searches the last live run recorded, for the tracks' closed PRs as they are
    now (None: nothing recorded)."""
    from porttrack.observe.successors import search_from_json

    kept = _recorded_searches(ws.state_dir / SUCCESSORS_FILE)
    found = []
    for track in report.tracks:
        for pr in track.prs:
            data = kept.get(str(pr.number))
            if data is not None and pr.state == "closed" and pr.number in config.tracks[track.id].prs:
                search = search_from_json(data, track.id, tuple(config.tracks[track.id].prs))
                if search is not None:
                    found.append(search)
    return Findings(tuple(found), None, None, recorded_at=max((str(kept[str(s.pr)].get("observed_at") or "") for s in found), default=None)) if found else None


def _recorded_searches(path) -> dict:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    searches = data.get("searches") if isinstance(data, dict) and data.get("schema") == "porttrack/successors/v1" else None
    return dict(searches) if isinstance(searches, dict) else {}


def with_findings(report: StatusReport, findings: Findings, yaml_hint: bool = True) -> StatusReport:
    """`report` carrying `findings`; an orphaned track whose PR has a candidate sharing at least half
    its hunks gets "follow #N?" (with the tracks.yaml change, `yaml_hint`) as its next action."""
    from porttrack.observe.successors import follow_words

    tracks = []
    for track in report.tracks:
        action = track.next_action
        prs = []
        for pr in track.prs:
            search = findings.successors_of(pr.number)
            words = follow_words(search, yaml_hint) if search is not None and search.track == track.id else None
            if words and pr.next_action.kind == "orphaned":  # the PR says what its track says (--json too)
                pr = replace(pr, next_action=NextAction("orphaned", words, None))
                if action.kind == "orphaned" and action.text.startswith(f"#{pr.number} "):
                    action = pr.next_action
            prs.append(pr)
        tracks.append(replace(track, prs=tuple(prs), next_action=action))
    return replace(report, tracks=tuple(tracks), findings=findings)


def search_limit() -> int:
    raw = os.environ.get("PORTTRACK_SEARCH_LIMIT", "").strip()
    if not raw:
        return DEFAULT_LIMIT
    try:
        return max(0, int(raw))
    except ValueError:
        raise ConfigError(f"PORTTRACK_SEARCH_LIMIT={raw!r}: expected a whole number of requests") from None


def queued_hunks(ws: Workspace) -> tuple[QueuedHunks, ...]:
    from porttrack.observe.collisions import QueuedHunks

    out = []
    for patch in _live_patches(ws):
        try:
            files = parse_diff(queue_mod.read_patch(ws, patch))
        except PorttrackError:
            continue  # a patch that cannot be read is reported by `queue`, not here
        # the commit the stored diff's line numbers are against: the fork's build base when it was
        # regenerated there, else upstream's base of the imported revision
        base = patch.regenerated.base if patch.regenerated is not None else patch.revision.base
        out.append(QueuedHunks(patch.name, patch.pr, tuple(h for fd in files for h in fd.text_hunks), base))
    return tuple(out)


def findings_lines(findings: Findings | None, track: TrackStatus) -> list[str]:
    """What `status` prints under a track's next action: successor candidates of its orphaned PRs."""
    if findings is None:
        return []
    lines: list[str] = []
    for pr in track.prs:
        search = findings.successors_of(pr.number)
        if search is not None and search.track == track.id:
            from porttrack.observe.successors import render_lines as render_successors

            found = render_successors(search)
            if findings.recorded_at and found:
                found[0] = f"{found[0].rstrip(':')} (as the live run of {findings.recorded_at} found them):"
            lines += found
    return lines
