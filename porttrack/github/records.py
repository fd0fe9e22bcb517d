"""What the GitHub door returns: porttrack's own records, built from GitHub's JSON answers.

`porttrack.github.client` is the only module that talks to GitHub; it hands these out, never PyGithub
objects. Each `from_json` checks the shape it reads and raises `MalformedResponse` (retried like a
5xx) on anything else. Light by design: importing this module imports no HTTP library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from porttrack.common.errors import UpstreamUnreachable


@dataclass(frozen=True)
class PullRequest:
    number: int
    title: str
    body: str
    state: str  # "open" | "merged" | "closed" (closed without merging)
    author: str
    html_url: str
    draft: bool
    created_at: str | None
    updated_at: str | None
    merged_at: str | None
    closed_at: str | None
    merge_commit_sha: str | None
    head_sha: str
    head_ref: str
    head_repo: str | None
    base_ref: str
    base_sha: str | None
    default_branch: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PullRequest":
        require_object(data, "pull request")
        try:
            merged_at = when(data, "merged_at")
            merged = flag(data, "merged") or merged_at is not None
            if data["state"] not in ("open", "closed"):
                raise ValueError(f"state {data['state']!r} is neither open nor closed")
            state = "open" if data["state"] == "open" else ("merged" if merged else "closed")
            head, base = obj(data, "head"), obj(data, "base")
            base_repo = obj(base, "repo", optional=True)
            head_repo = obj(head, "repo", optional=True)
            return cls(
                number=number(data),
                title=text(data, "title"),
                body=text(data, "body"),
                state=state,
                author=text(obj(data, "user", optional=True), "login"),
                html_url=text(data, "html_url"),
                draft=flag(data, "draft"),
                created_at=when(data, "created_at"),
                updated_at=when(data, "updated_at"),
                merged_at=merged_at,
                closed_at=when(data, "closed_at"),
                merge_commit_sha=sha(data, "merge_commit_sha") if merged else None,
                head_sha=sha(head, "sha", optional=False) or "",
                head_ref=text(head, "ref"),
                head_repo=text(head_repo, "full_name") or None,
                base_ref=text(base, "ref", optional=False),
                base_sha=sha(base, "sha"),
                default_branch=text(base_repo, "default_branch") or None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"pull request payload is missing or mistyped: {exc}") from None


# What `PullRequest.from_json` reads of a pull request, by key: the rest of GitHub's object (its
# two repository objects, the _links, ~6 KB of each PR and more on github.com) is not kept.
_PULL_READ: Mapping[str, Any] = {
    key: True for key in ("number", "title", "body", "state", "merged", "merged_at", "html_url", "draft",
                          "created_at", "updated_at", "closed_at", "merge_commit_sha")
} | {"user": {"login": True}, "head": {"sha": True, "ref": True, "repo": {"full_name": True}},
     "base": {"ref": True, "sha": True, "repo": {"default_branch": True}}}


def pull_as_read(data: Any, read: Mapping[str, Any] = _PULL_READ) -> Any:
    """A pull request object of GitHub's with only what `PullRequest.from_json` reads (the same
    record from either): what the ETag cache keeps of a listing page, so that 1,000 open PRs are
    not 20 MB to parse and walk on every run. Anything not an object is kept as it is."""
    if not isinstance(data, Mapping):
        return data
    return {key: (value if read[key] is True else pull_as_read(value, read[key])) for key, value in data.items() if key in read}


@dataclass(frozen=True)
class Comparison:
    status: str  # "ahead" | "behind" | "diverged" | "identical"
    ahead_by: int
    behind_by: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Comparison":
        require_object(data, "comparison")
        try:
            if data.get("status") not in ("ahead", "behind", "diverged", "identical"):
                raise ValueError(f"status is {data.get('status')!r:.40}")
            counts = {key: data.get(key) or 0 for key in ("ahead_by", "behind_by")}
            return cls(data["status"], number(counts, "ahead_by"), number(counts, "behind_by"))
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedResponse(f"comparison payload is missing or mistyped: {exc}") from None


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    state: str
    state_reason: str | None
    html_url: str
    labels: tuple[str, ...]
    created_at: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Issue":
        require_object(data, "issue")
        try:
            labels = data.get("labels") or ()
            if not isinstance(labels, (list, tuple)):
                raise ValueError(f"labels is {type(labels).__name__}, not a list")
            return cls(
                number=number(data),
                title=text(data, "title"),
                body=text(data, "body"),
                state=text(data, "state") or "open",
                state_reason=text(data, "state_reason") or None,
                html_url=text(data, "html_url"),
                labels=tuple(text(label, "name", optional=False) if isinstance(label, dict) else _plain(label, "label")
                             for label in labels),
                created_at=when(data, "created_at"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"issue payload is missing or mistyped: {exc}") from None


@dataclass(frozen=True)
class IssueComment:
    id: int
    body: str
    html_url: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "IssueComment":
        require_object(data, "issue comment")
        try:
            return cls(number(data, "id"), text(data, "body"), text(data, "html_url"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"issue comment payload is missing or mistyped: {exc}") from None


class MalformedResponse(UpstreamUnreachable):
    """GitHub answered with a body we cannot read (not JSON, or not the shape the endpoint has).
    A GET retries it like a 5xx; what is left is reported as GitHub failing (exit 5)."""


def require_object(data: Any, what: str) -> None:
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"{what} payload is not a JSON object (got {type(data).__name__})")


# -- the shapes relied on: each raises ValueError (turned into MalformedResponse by the caller) on
# anything else, so a mistyped answer is refused before it is recorded, never written into state/
# to crash every later command (issue 33: `merged_at: 12345` was recorded, then rc 70 for good).

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def _plain(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key} is {type(value).__name__}, not a string")
    return value


def obj(data: Mapping[str, Any], key: str, *, optional: bool = False) -> Mapping[str, Any]:
    """`data[key]`, an object (`{}` when optional and absent or null)."""
    value = data.get(key) if optional else data[key]
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} is {type(value).__name__}, not an object")
    return value


def text(data: Mapping[str, Any], key: str, *, optional: bool = True) -> str:
    """`data[key]`, a string ("" when optional and absent or null)."""
    value = data.get(key) if optional else data[key]
    return "" if value is None and optional else _plain(value, key)


def number(data: Mapping[str, Any], key: str = "number") -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key} is {value!r:.40}, not a whole number")
    return value


def flag(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key)
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{key} is {type(value).__name__}, not true or false")
    return bool(value)


def when(data: Mapping[str, Any], key: str) -> str | None:
    """A timestamp as GitHub writes them (ISO 8601, `Z` or an offset), or None."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not _ISO.fullmatch(value):
        raise ValueError(f"{key} is {value!r:.60}, not an ISO 8601 time")
    datetime.fromisoformat(value.replace("Z", "+00:00"))  # a 13th month is no time either
    return value


def sha(data: Mapping[str, Any], key: str, *, optional: bool = True) -> str | None:
    value = data.get(key) if optional else data[key]
    if value is None and optional:
        return None
    if not isinstance(value, str) or not _SHA.fullmatch(value):
        raise ValueError(f"{key} is {value!r:.60}, not a commit id")
    return value


@dataclass(frozen=True)
class WorkflowRun:
    id: int
    name: str
    display_title: str
    status: str  # queued | in_progress | completed | waiting | requested | pending
    conclusion: str | None  # success | failure | cancelled | timed_out | ... (when completed)
    html_url: str
    head_sha: str | None
    created_at: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WorkflowRun":
        require_object(data, "workflow run")
        try:
            return cls(
                id=number(data, "id"),
                name=text(data, "name"),
                display_title=text(data, "display_title"),
                status=text(data, "status") or "queued",
                conclusion=text(data, "conclusion") or None,
                html_url=text(data, "html_url"),
                head_sha=sha(data, "head_sha"),
                created_at=when(data, "created_at"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"workflow run payload is missing or mistyped: {exc}") from None


@dataclass(frozen=True)
class Artifact:
    id: int
    name: str
    size_in_bytes: int
    expired: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Artifact":
        require_object(data, "artifact")
        try:
            return cls(int(data["id"]), str(data["name"]), int(data.get("size_in_bytes") or 0), bool(data.get("expired")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"artifact payload is missing or mistyped: {exc}") from None


@dataclass(frozen=True)
class RateLimit:
    authenticated: bool
    limit: int | None
    remaining: int | None
    reset: int | None  # epoch seconds
    scopes: tuple[str, ...] | None  # classic token scopes (X-OAuth-Scopes); None: GitHub did not say


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- what the searches read (successors of a closed PR, collisions with the queue) -----------------


@dataclass(frozen=True)
class PRFile:
    """One file of a PR's file list (`GET /pulls/N/files`): `patch` is hunks only, as GitHub sends
    them (absent for a binary file or a diff GitHub found too large to show)."""

    filename: str
    status: str  # added | removed | modified | renamed | copied | changed
    previous_filename: str | None
    patch: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PRFile":
        require_object(data, "pull request file")
        try:
            patch = data.get("patch")
            return cls(text(data, "filename", optional=False), text(data, "status") or "modified",
                       text(data, "previous_filename") or None, patch if isinstance(patch, str) else None)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"pull request file payload is missing or mistyped: {exc}") from None


@dataclass(frozen=True)
class IssueRef:
    """An issue or pull request as a listing, a search or a timeline names it: enough to decide
    whether it is worth asking for in full."""

    number: int
    title: str
    body: str
    author: str
    is_pull: bool
    state: str  # open | closed
    created_at: str | None
    repo: str | None  # owner/name of the repository it lives in, when the answer says

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "IssueRef":
        require_object(data, "issue")
        try:
            repo = (data.get("repository") or {}).get("full_name") if isinstance(data.get("repository"), Mapping) else None
            if repo is None and isinstance(data.get("repository_url"), str) and "/repos/" in data["repository_url"]:
                repo = data["repository_url"].split("/repos/", 1)[1]
            return cls(number(data), text(data, "title"), text(data, "body"),
                       text(obj(data, "user", optional=True), "login"), "pull_request" in data,
                       text(data, "state") or "open", when(data, "created_at"), repo if isinstance(repo, str) else None)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"issue payload is missing or mistyped: {exc}") from None


def cross_references(events: Any) -> tuple[IssueRef, ...]:
    """The sources of an issue timeline's `cross-referenced` events (other items that mention it)."""
    if not isinstance(events, list):
        raise MalformedResponse("an issue timeline is a list of events")
    found = []
    for event in events:
        if isinstance(event, Mapping) and event.get("event") == "cross-referenced":
            source = event.get("source")
            if isinstance(source, Mapping) and isinstance(source.get("issue"), Mapping):
                found.append(IssueRef.from_json(source["issue"]))
    return tuple(found)
