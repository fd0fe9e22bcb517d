"""Recorded upstream state: what porttrack last knew about each tracked PR, and how it got there.

`state/upstream.json` is machine-written text committed with the workspace, so a fresh CI checkout
(or a newcomer with no network) sees the same picture, and the weekly report can say what changed
"since the previous report" from history rather than from a machine-local cache.

Shape (schema `porttrack/upstream-state/v1`, keys sorted when written):
  observed_at   when the last successful observation was made (UTC, ISO 8601, `Z`)
  source        where it came from: a live poll of <api url>, or a documented reference
  prs.<N>       the PR as last seen: number, title, author, state (open|merged|closed), created_at,
                updated_at, merged_at, closed_at, merge_commit_sha, head_sha, head_ref, base_ref,
                base_sha, default_branch, html_url, stacked_on [{number, via}], observed_at,
                heads  [{sha, first_seen, change: initial|appended|force-pushed|unknown, commits}]
                events [{at, kind, detail}]   kinds: observed, appended, force-pushed, merged,
                                              closed, reopened, retitled, rebased-onto, compacted
Unknown values are null, never guessed.

Bounded: a PR renamed and force-pushed on every poll would otherwise grow the file (and the weekly
issue that quotes it) without end. `compact` keeps the first head and the latest `MAX_HEADS`, the
latest `MAX_EVENTS` events, and says what it left out in one `compacted` event.

Two processes may poll at once (`status` polls outside the workspace lock); `save` merges PR by
PR and keeps the later observation, so the recorded head never goes backwards.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from porttrack.common.clock import utcnow  # noqa: F401  (re-exported for its importers until they import clock)
from porttrack.common.errors import InputError
from porttrack.workspace.files import write_json

SCHEMA = "porttrack/upstream-state/v1"
MAX_EVENTS = 60
MAX_HEADS = 40


@dataclass(frozen=True)
class StackLink:
    number: int
    via: str  # "base-branch" | "text"


@dataclass(frozen=True)
class HeadSeen:
    sha: str
    first_seen: str
    change: str  # initial | appended | force-pushed | unknown
    commits: int | None = None


@dataclass(frozen=True)
class Event:
    at: str
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class RecordedPR:
    number: int
    title: str
    author: str
    state: str
    html_url: str
    created_at: str | None
    updated_at: str | None
    merged_at: str | None
    closed_at: str | None
    merge_commit_sha: str | None
    head_sha: str | None
    head_ref: str | None
    base_ref: str | None
    base_sha: str | None
    default_branch: str | None
    observed_at: str
    stacked_on: tuple[StackLink, ...] = ()
    heads: tuple[HeadSeen, ...] = ()
    events: tuple[Event, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["stacked_on"] = [asdict(s) for s in self.stacked_on]
        data["heads"] = [asdict(h) for h in self.heads]
        data["events"] = [asdict(e) for e in self.events]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RecordedPR":
        fields = dict(data)
        fields["stacked_on"] = tuple(StackLink(**s) for s in fields.get("stacked_on") or ())
        fields["heads"] = tuple(HeadSeen(**h) for h in fields.get("heads") or ())
        fields["events"] = tuple(Event(**e) for e in fields.get("events") or ())
        return cls(**fields)

    def with_changes(self, **changes: Any) -> "RecordedPR":
        return replace(self, **changes)


@dataclass(frozen=True)
class UpstreamState:
    upstream: str
    observed_at: str | None
    source: str
    prs: dict[int, RecordedPR] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "upstream": self.upstream,
            "observed_at": self.observed_at,
            "source": self.source,
            "prs": {str(n): pr.to_json() for n, pr in sorted(self.prs.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "state") -> "UpstreamState":
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            raise InputError(f"{where}: not a porttrack upstream state file (expected schema {SCHEMA})")
        try:
            prs = {int(k): RecordedPR.from_json(v) for k, v in (data.get("prs") or {}).items()}
            return cls(upstream=str(data["upstream"]), observed_at=data.get("observed_at"), source=str(data.get("source") or ""), prs=prs)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed recorded state ({type(exc).__name__}: {exc}); restore it from git") from None


def compact(pr: RecordedPR) -> RecordedPR:
    """`pr` with its history bounded (see the module docstring); the compaction is recorded as an
    event carrying how much was left out in all, so repeated compactions keep one such event."""
    events = [e for e in pr.events if e.kind != "compacted"]
    earlier = next((e for e in pr.events if e.kind == "compacted"), None)
    if len(events) <= MAX_EVENTS - (1 if earlier else 0) and len(pr.heads) <= MAX_HEADS:
        return pr
    dropped_events = _count(earlier, "events") + max(0, len(events) - (MAX_EVENTS - 1))
    dropped_heads = _count(earlier, "heads") + max(0, len(pr.heads) - MAX_HEADS)
    kept_events = events[-(MAX_EVENTS - 1):]
    heads = pr.heads if len(pr.heads) <= MAX_HEADS else (pr.heads[0], *pr.heads[-(MAX_HEADS - 1):])
    since = earlier.at if earlier else (events[0].at if events else pr.observed_at)
    note = Event(since, "compacted", f"{dropped_events} events and {dropped_heads} heads left out, the earliest")
    return replace(pr, events=(note, *kept_events), heads=tuple(heads))


def _count(event: Event | None, what: str) -> int:
    """The number before `what` in a compacted event's detail (written by `compact` itself)."""
    if event is None:
        return 0
    words = event.detail.split()
    for index, word in enumerate(words[1:], 1):
        if word == what and words[index - 1].isdigit():
            return int(words[index - 1])
    return 0


def newer(a: RecordedPR, b: RecordedPR) -> bool:
    """Whether `a` is a later observation of the PR than `b`: observed later, or, in the same
    second, having seen `b`'s head and moved past it."""
    if a.observed_at != b.observed_at:
        return (a.observed_at or "") > (b.observed_at or "")
    return a.head_sha != b.head_sha and any(h.sha == b.head_sha for h in a.heads[:-1])


def load(path: Path, upstream: str) -> UpstreamState:
    if not path.is_file():
        return UpstreamState(upstream=upstream, observed_at=None, source="nothing recorded yet")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{path}: recorded state is not valid JSON ({exc}); restore it from git") from None
    return UpstreamState.from_json(data, where=str(path))


def save(path: Path, state: UpstreamState, *, only: Iterable[int] | None = None) -> UpstreamState:
    """Record `state`. With `only` — the PRs this process polled — those PRs are written over what
    is recorded *now* and every other PR is kept as recorded now: the caller polled without the
    workspace lock, so another process (a `status`, an `import`) may have recorded meanwhile, and
    what it learnt about other PRs must not be lost. A polled PR recorded meanwhile from a *later*
    observation is kept too (`newer`): a slower poll never takes the recorded head backwards.
    The caller holds the lock. Returns what was written."""
    if only is not None:
        current = load(path, state.upstream)
        polled = set(only)
        prs = dict(current.prs)
        for number, pr in state.prs.items():
            if number in polled and not (number in current.prs and newer(current.prs[number], pr)):
                prs[number] = pr
        if current.observed_at and (state.observed_at or "") < current.observed_at:
            state = replace(state, observed_at=current.observed_at, source=current.source)
        state = replace(state, prs=dict(sorted(prs.items())))
    write_json(path, state.to_json())
    return state
