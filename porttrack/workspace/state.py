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

import re
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from porttrack.common.clock import utcnow  # noqa: F401  (re-exported for its importers until they import clock)
from porttrack.common.errors import InputError
from porttrack.workspace.files import read_json, write_json

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
        """Checked field by field against the shape every reader relies on (TypeError/ValueError
        naming the field): a hand-edited `observed_at: 12345` is a malformed file, not a crash
        in whichever command compares it first."""
        fields = dict(_object(data, "PR"))
        _number(fields, "number")
        for key in ("title", "author", "html_url"):
            _string(fields, key)
        if fields.get("state") not in ("open", "merged", "closed"):
            raise ValueError(f"state is {fields.get('state')!r:.40}, not open, merged or closed")
        for key in ("merge_commit_sha", "head_sha", "head_ref", "base_ref", "base_sha", "default_branch"):
            _string(fields, key, optional=True)
        for key in ("created_at", "updated_at", "merged_at", "closed_at"):
            _time(fields, key, optional=True)
        _time(fields, "observed_at")
        fields["stacked_on"] = tuple(StackLink(**_shaped(s, "stacked_on", number=int, via=str))
                                     for s in _list(fields, "stacked_on"))
        fields["heads"] = tuple(HeadSeen(**_shaped(h, "heads", sha=str, first_seen="time", change=str, commits=(int, None)))
                                for h in _list(fields, "heads"))
        fields["events"] = tuple(Event(**{**_shaped(e, "events", at="time", kind=str, detail=(str, None)), "detail": e.get("detail") or ""})
                                 for e in _list(fields, "events"))
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
            prs: dict[int, RecordedPR] = {}
            for key, value in _object(data.get("prs") or {}, "prs").items():
                pr = RecordedPR.from_json(value)
                if key != str(pr.number):
                    raise ValueError(f"prs.{key:.20} holds PR #{pr.number}")
                prs[pr.number] = pr
            _string(data, "upstream")
            _string(data, "source", optional=True)
            return cls(upstream=data["upstream"], observed_at=_time(data, "observed_at", optional=True),
                       source=data.get("source") or "", prs=prs)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed recorded state ({type(exc).__name__}: {exc}); restore it from git") from None


# -- the shape checks of `from_json` (TypeError or ValueError naming what is wrong) ---------------

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})")


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} is {type(value).__name__}, not an object")
    return value


def _list(fields: Mapping[str, Any], key: str) -> list[Any]:
    value = fields.get(key) or []
    if not isinstance(value, list):
        raise TypeError(f"{key} is {type(value).__name__}, not a list")
    return value


def _number(fields: Mapping[str, Any], key: str) -> int:
    value = fields.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} is {value!r:.40}, not a whole number")
    return value


def _string(fields: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = fields.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{key} is {value!r:.40}, not a string")
    return value


def _time(fields: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = fields.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not _ISO.fullmatch(value):
        raise ValueError(f"{key} is {value!r:.40}, not an ISO 8601 time")
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _shaped(value: Any, what: str, **shape: Any) -> dict[str, Any]:
    """`value`, an object whose keys are those of `shape` (the optional ones may be absent), each
    of its type: a type, a tuple of types (None: may be null) or "time"."""
    item = dict(_object(value, f"an entry of {what}"))
    for key, kind in shape.items():
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if key not in item and None in kinds:
            continue
        if "time" in kinds:
            _time(item, key)
        elif item.get(key) is None and None in kinds:
            continue
        elif not isinstance(item.get(key), tuple(k for k in kinds if isinstance(k, type))) or isinstance(item.get(key), bool):
            raise TypeError(f"{what}.{key} is {item.get(key)!r:.40}, not {' or '.join(getattr(k, '__name__', str(k)) for k in kinds)}")
    return item


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
        data = read_json(path)
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
