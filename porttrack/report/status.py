"""`porttrack status`: what each tracked PR is now, what changed, and what to do next.

`refresh` polls (or declines to, saying why) and records; `build_report` turns recorded state plus
whatever the queue and convergence checks know into plain records; the CLI prints them. The JSON
shape (`report_to_json`) is published in docs/json.md and golden-tested: change it only additively.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Mapping

from porttrack.common import clock
from porttrack.common.errors import PorttrackError
from porttrack.converge.record import RecordedVerdict
from porttrack.git.repo import GitRepo
from porttrack.observe.poll import PRChange, poll
from porttrack.tracks.config import Config
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace, checkpoint, lock
from porttrack.workspace.state import Event, RecordedPR, UpstreamState

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient
    from porttrack.github.records import RateLimit  # only a live poll has one: `status --offline` loads no GitHub door

JSON_SCHEMA = "porttrack/status/v1"


@dataclass(frozen=True)
class NextAction:
    kind: str  # port-candidate | wait-for-stack | queued | refresh | convergence-check | converged | orphaned | unknown
    text: str
    command: str | None = None


@dataclass(frozen=True)
class Note:
    """Something else porttrack knows about a PR, as data: `kind` is coverage (of a hand port),
    coverage-unknown (it could not be evaluated; the weekly report lists it as a problem) or
    upstream (what the poll found odd: a reference that is no PR, a 404, a stacking cycle)."""

    kind: str
    text: str


@dataclass(frozen=True)
class PRStatus:
    """One PR as `status` shows it: the recorded PR itself (embedded, not copied field by field),
    what this poll saw, and what to do next. `to_json` gives the published flat shape."""

    number: int
    recorded: RecordedPR | None  # as last observed; None: never observed
    head_change: str | None  # appended | force-pushed | unchanged | None: first observation (live; "first seen") or offline
    head_change_commits: int | None
    stacked_on: tuple[dict[str, Any], ...]
    changes: tuple[Event, ...]  # events of this poll (kind + detail)
    fork_commits: tuple[str, ...]
    notes: tuple[Note, ...]
    next_action: NextAction

    @property
    def state(self) -> str:
        return self.recorded.state if self.recorded else "unobserved"

    # The recorded PR's fields, read through; a PR never observed has none.
    @property
    def title(self) -> str:
        return self.recorded.title if self.recorded else ""

    @property
    def author(self) -> str:
        return self.recorded.author if self.recorded else ""

    @property
    def merged_at(self) -> str | None:
        return self.recorded.merged_at if self.recorded else None

    @property
    def closed_at(self) -> str | None:
        return self.recorded.closed_at if self.recorded else None

    @property
    def merge_commit_sha(self) -> str | None:
        return self.recorded.merge_commit_sha if self.recorded else None

    @property
    def head_sha(self) -> str | None:
        return self.recorded.head_sha if self.recorded else None

    @property
    def base_ref(self) -> str | None:
        return self.recorded.base_ref if self.recorded else None

    @property
    def updated_at(self) -> str | None:
        return self.recorded.updated_at if self.recorded else None

    @property
    def observed_at(self) -> str | None:
        return self.recorded.observed_at if self.recorded else None

    @property
    def url(self) -> str:
        return self.recorded.html_url if self.recorded else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            **{name: getattr(self, name) for name in _SHOWN},
            "state": self.state,
            "url": self.url,
            "head_change": self.head_change,
            "head_change_commits": self.head_change_commits,
            "stacked_on": [dict(s) for s in self.stacked_on],
            "changes": [change_words(e) for e in self.changes],
            "fork_commits": list(self.fork_commits),
            "notes": [n.text for n in self.notes],
            "next_action": asdict(self.next_action),
        }


# What `status --json` shows of the recorded PR, under the recorded names.
_SHOWN = ("title", "author", "merged_at", "closed_at", "merge_commit_sha", "head_sha", "base_ref", "updated_at", "observed_at")


def change_words(event: Event) -> str:
    """"force-pushed: 2 commits" (or the kind alone): one change as `status` prints it."""
    return f"{event.kind}: {event.detail}" if event.detail else event.kind


@dataclass(frozen=True)
class TrackStatus:
    id: str
    title: str
    prs: tuple[PRStatus, ...]
    next_action: NextAction


@dataclass(frozen=True)
class StatusReport:
    mode: str  # "live" | "offline"
    offline_reason: str | None
    observed_at: str | None
    source: str
    tracks: tuple[TrackStatus, ...]
    notes: tuple[str, ...] = ()
    requests: int = 0
    findings: Any = None  # knowledge.Findings of a live run's searches (successors, collisions), or None
    # How GitHub was asked: None offline (nothing asked), False without a token (public reads only)
    authenticated: bool | None = None
    # The budget left as GitHub's answers stated it (X-RateLimit-*); None when nothing was asked
    rate_limit: RateLimit | None = None
    # PR -> why GitHub gave no answer for it in this live poll (5xx after the retries): shown as recorded
    failed: Mapping[int, str] = field(default_factory=dict)
    # fork.branch as read in the fork checkout (`git.repo.qualify_branch`, the ref doctor, apply and
    # verify-converged read too): {"name", "ref", "sha"}, ref and sha None when it is no branch
    # there; None without a fork checkout
    fork_branch: Mapping[str, str | None] | None = None


@dataclass(frozen=True)
class Knowledge:
    """What other parts of porttrack know about a PR, folded into its next action."""

    queued: Mapping[int, str] = field(default_factory=dict)  # PR -> "queued" | "gated" | "default-enabled" | ...
    # PR -> its last verify-converged verdict, bound to fork.branch's tip (`converge_record.latest_verdicts`)
    converged: Mapping[int, RecordedVerdict] = field(default_factory=dict)
    coverage: Mapping[int, str] = field(default_factory=dict)  # PR -> "7/9 hunks present in the fork"
    coverage_unknown: frozenset[int] = frozenset()  # PRs whose coverage could not be evaluated (`Coverage.problem`)
    queued_heads: Mapping[int, str] = field(default_factory=dict)  # PR -> upstream head its live patch was made from
    # PR -> the tracks.yaml fork_commits its coverage found NOT in the fork branch (checked only
    # for a PR in `coverage` and not in `coverage_unknown`)
    fork_commits_missing: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


def next_action(pr: RecordedPR, prs: Mapping[int, RecordedPR], fork_commits: tuple[str, ...], know: Knowledge) -> NextAction:
    n = pr.number
    if pr.state == "merged":
        last = know.converged.get(n)
        # Only a verdict for fork.branch at its tip now may say "in the fork"; a stale one, or one
        # computed on another ref, keeps the convergence check as the next action.
        if last is not None and last.current and last.verdict == "converged":
            return NextAction("converged", f"#{n} is in the fork (verified); drop any carried copy", None)
        when = (pr.merged_at or "")[:10] or "date unknown"
        if last is not None and last.current and last.verdict == "undone-upstream":  # upstream took it back: never "port it"
            return NextAction(
                "convergence-check",
                f"#{n} merged {when}, but upstream has since undone part of it (last verdict: {last.words}): keep carrying "
                f"those hunks or drop them; do not port them back over upstream's own change (`porttrack verify-converged {n}` "
                f"names the commits)",
                f"porttrack verify-converged {n}",
            )
        if last is not None and last.current:  # checked at the tip, and not converged: say what to do
            return NextAction(
                "convergence-check",
                f"#{n} merged {when}, but the fork branch lacks part of it (last verdict: {last.words}): "
                f"rebase it onto an upstream base that contains the merge, or port the missing hunks "
                f"(`porttrack verify-converged {n}` lists them; keep any queued copy until then), then check again",
                f"porttrack verify-converged {n}",
            )
        return NextAction(
            "convergence-check",
            f"#{n} merged {when} -> now a convergence check" + (f" (last verdict: {last.words})" if last else ""),
            f"porttrack verify-converged {n}",
        )
    if pr.state == "closed":
        carried = _carried_words(n, fork_commits, know)
        return NextAction(
            "orphaned",
            f"#{n} closed without merging -> orphaned: decide carry / follow a successor / drop{carried}",
            None,
        )
    if pr.state != "open":
        return NextAction("unknown", f"#{n}: state {pr.state!r} not understood", None)
    blocking = [s.number for s in pr.stacked_on if prs.get(s.number) is None or prs[s.number].state != "merged"]
    blocking = [b for b in blocking if b not in know.queued]
    if blocking:
        listed = ", ".join(f"#{b} ({prs[b].state if b in prs else 'not observed'})" for b in blocking)
        return NextAction("wait-for-stack", f"#{n} is stacked on {listed}: import that first or wait for it to merge", f"porttrack import {blocking[0]}")
    if n in know.queued:
        imported = know.queued_heads.get(n)
        if imported and pr.head_sha and imported != pr.head_sha:
            return NextAction(
                "refresh",
                f"#{n} moved upstream since it was queued (imported {imported[:12]}, head now {pr.head_sha[:12]}): review what changed",
                f"porttrack refresh {n}",
            )
        return NextAction("queued", f"#{n} is in the queue ({know.queued[n]}); up to date with upstream", f"porttrack gate run {n}")
    return NextAction("port-candidate", f"#{n} open -> port candidate: take its stable, separable hunks", f"porttrack import {n}")


def _carried_words(n: int, fork_commits: tuple[str, ...], know: Knowledge) -> str:
    """"the fork carries X" only for listed commits checked to be in the fork branch (issue 21)."""
    if not fork_commits:
        return ""
    if n not in know.coverage or n in know.coverage_unknown:
        return f"; tracks.yaml lists fork commits {', '.join(fork_commits)} (not checked against the fork branch)"
    missing = know.fork_commits_missing.get(n, ())
    has = [c for c in fork_commits if c not in missing]
    words = [f"the fork carries {', '.join(has)}"] if has else []
    words += [f"tracks.yaml lists {', '.join(missing)}, which the fork branch does not have"] if missing else []
    return "; " + "; ".join(words)


_PRIORITY = ["orphaned", "convergence-check", "refresh", "wait-for-stack", "port-candidate", "queued", "unknown", "converged"]


def build_report(
    config: Config,
    state: UpstreamState,
    *,
    mode: str,
    offline_reason: str | None = None,
    changes: Mapping[int, PRChange] | None = None,
    notes: tuple[str, ...] = (),
    requests: int = 0,
    know: Knowledge | None = None,
) -> StatusReport:
    know = know or Knowledge()
    changes = changes or {}
    tracks = []
    for track_id, track in config.tracks.items():
        fork_commits = tuple(track.fork_commits)
        numbers: list[int] = []
        for n in track.prs:  # the track's PRs, then what they are stacked on
            numbers.append(n)
            for link in state.prs[n].stacked_on if n in state.prs else ():
                if link.number not in numbers:
                    numbers.append(link.number)
        prs = tuple(_pr_status(n, state, changes.get(n), fork_commits if n in track.prs else (), know) for n in numbers)
        actions = [p.next_action for p in prs if p.number in track.prs]
        actions.sort(key=lambda a: _PRIORITY.index(a.kind) if a.kind in _PRIORITY else len(_PRIORITY))
        track_action = actions[0] if actions else NextAction("unknown", "no PR of this track has been observed", "porttrack status")
        tracks.append(TrackStatus(track_id, track.title, prs, track_action))
    return StatusReport(mode, offline_reason, state.observed_at, state.source, tuple(tracks), notes, requests)


def _pr_status(n: int, state: UpstreamState, change: PRChange | None, fork_commits: tuple[str, ...], know: Knowledge) -> PRStatus:
    pr = state.prs.get(n)
    upstream_notes = tuple(Note("upstream", text) for text in (change.notes if change else ()))
    if pr is None:
        return PRStatus(
            n, None, None, None, (), (), fork_commits, upstream_notes,
            NextAction("unknown", f"#{n} has not been observed yet: run a live `porttrack status`", "porttrack status"),
        )
    head = change.head_change if change else None
    stacked = tuple(
        {"number": s.number, "via": s.via, "state": state.prs[s.number].state if s.number in state.prs else "unobserved"}
        for s in pr.stacked_on
    )
    coverage = know.coverage.get(n)
    notes = upstream_notes + ((Note("coverage-unknown" if n in know.coverage_unknown else "coverage", coverage),) if coverage else ())
    return PRStatus(
        number=n,
        recorded=pr,
        head_change=_head_change(change),
        head_change_commits=(head.commits if head else None),
        stacked_on=stacked,
        changes=change.events if change else (),
        fork_commits=fork_commits,
        notes=notes,
        next_action=next_action(pr, state.prs, fork_commits, know),
    )


def _head_change(change: PRChange | None) -> str | None:
    """None when there is nothing to compare with: offline, or a PR this poll saw first."""
    if change is None or change.first_seen:
        return None
    return change.head_change.kind if change.head_change else "unchanged"


def report_to_json(report: StatusReport) -> dict[str, Any]:
    data = {"schema": JSON_SCHEMA, **asdict(replace(report, tracks=(), findings=None))}
    data["findings"] = report.findings.to_json() if report.findings is not None else None
    data["tracks"] = [{**asdict(replace(t, prs=())), "prs": [p.to_json() for p in t.prs]} for t in report.tracks]
    return data


def _known(know: "Knowledge | Callable[[], Knowledge] | None") -> Knowledge | None:
    return know() if callable(know) else know


def recorded_ago(observed_at: str | None, now: datetime) -> str:
    """"recorded 97 days ago": how old the recorded state is, for every offline view."""
    if not observed_at:
        return "nothing recorded yet"
    try:
        seconds = (now - clock.parse_moment(observed_at, "observed_at")).total_seconds()
    except PorttrackError:
        return f"recorded at {observed_at!r} (not a time)"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"recorded {count} {unit}{'s' if count != 1 else ''} ago"
    return "recorded just now" if seconds >= -60 else f"recorded at {observed_at}, which is in the future"


def rate_words(rate: RateLimit | None, authenticated: bool | None) -> str | None:
    """"unauthenticated: 57 of 60 requests left this hour": how GitHub was asked and what is left."""
    if authenticated is None:
        return None
    who = "authenticated" if authenticated else "unauthenticated"
    if rate is None or rate.remaining is None or rate.limit is None:
        return f"{who}: rate limit not stated (no answer carried it)"
    return f"{who}: {rate.remaining} of {rate.limit} requests left this hour"


def tracked_numbers(config: Config) -> list[int]:
    return sorted({n for track in config.tracks.values() for n in track.prs})


def refresh(
    ws: Workspace,
    config: Config,
    *,
    client: "GitHubClient | None",
    repo: GitRepo | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
    know: "Knowledge | Callable[[], Knowledge] | None" = None,
) -> tuple[StatusReport, PorttrackError | None]:
    """Poll and record, or show the recorded state saying why. `client`: the upstream's GitHub
    client, None for --offline; without a token it polls unauthenticated (a public upstream is
    readable, from 60 requests an hour; its conditional requests answered 304 cost none);
    `repo`: the fork checkout PR heads are fetched into, None to classify with GitHub's compare
    instead. Returns the report and the error that forced an offline view (None when the poll
    succeeded or offline was asked for). `know` may be a function: asked once the poll has fetched
    the PR heads and recorded their state (coverage of a hand port reads both: asked before, the
    first live run said "coverage unknown: not in the fork checkout" of a head it then fetched)."""
    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    if client is None:
        return build_report(config, recorded, mode="offline", offline_reason="--offline was given", know=_known(know)), None
    try:
        result = poll(recorded, tracked_numbers(config), client, repo, config.upstream.remote, progress=progress)
    except PorttrackError as exc:  # whatever GitHub answered, the recorded state is still shown
        report = build_report(config, recorded, mode="offline", offline_reason=f"GitHub unavailable: {exc}", know=_known(know))
        return replace(report, authenticated=client.authenticated, rate_limit=client.rate_seen), exc
    if not dry_run:
        checkpoint("status:polled")
        with lock(ws, "status: recording upstream state"):
            state_mod.save(ws.upstream_state_file, result.state, only=result.changes)
            client.save_cache()
    report = build_report(config, result.state, mode="live", changes=result.changes, notes=result.notes,
                          requests=result.requests, know=_known(know))
    return replace(report, authenticated=client.authenticated, rate_limit=client.rate_seen, failed=dict(result.failed)), None
