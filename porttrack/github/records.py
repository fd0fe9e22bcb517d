"""What the GitHub door returns: porttrack's own records, built from GitHub's JSON answers.

`porttrack.github.client` is the only module that talks to GitHub; it hands these out, never PyGithub
objects. Each `from_json` checks the shape it reads and raises `MalformedResponse` (retried like a
5xx) on anything else. Light by design: importing this module imports no HTTP library.
"""

from __future__ import annotations

from dataclasses import dataclass
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
            merged = bool(data.get("merged")) or data.get("merged_at") is not None
            state = "open" if data["state"] == "open" else ("merged" if merged else "closed")
            head, base = data["head"], data["base"]
            base_repo = base.get("repo") or {}
            return cls(
                number=int(data["number"]),
                title=str(data.get("title") or ""),
                body=str(data.get("body") or ""),
                state=state,
                author=str((data.get("user") or {}).get("login") or ""),
                html_url=str(data.get("html_url") or ""),
                draft=bool(data.get("draft")),
                created_at=data.get("created_at"),
                updated_at=data.get("updated_at"),
                merged_at=data.get("merged_at"),
                closed_at=data.get("closed_at"),
                merge_commit_sha=data.get("merge_commit_sha") if merged else None,
                head_sha=str(head["sha"]),
                head_ref=str(head.get("ref") or ""),
                head_repo=((head.get("repo") or {}) or {}).get("full_name"),
                base_ref=str(base["ref"]),
                base_sha=base.get("sha"),
                default_branch=base_repo.get("default_branch"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"pull request payload is missing or mistyped: {exc}") from None


@dataclass(frozen=True)
class Comparison:
    status: str  # "ahead" | "behind" | "diverged" | "identical"
    ahead_by: int
    behind_by: int


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
            return cls(
                number=int(data["number"]),
                title=str(data.get("title") or ""),
                body=str(data.get("body") or ""),
                state=str(data.get("state") or "open"),
                state_reason=data.get("state_reason"),
                html_url=str(data.get("html_url") or ""),
                labels=tuple(str(label["name"] if isinstance(label, dict) else label) for label in data.get("labels") or ()),
                created_at=data.get("created_at"),
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
            return cls(int(data["id"]), str(data.get("body") or ""), str(data.get("html_url") or ""))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedResponse(f"issue comment payload is missing or mistyped: {exc}") from None


class MalformedResponse(UpstreamUnreachable):
    """GitHub answered with a body we cannot read (not JSON, or not the shape the endpoint has).
    A GET retries it like a 5xx; what is left is reported as GitHub failing (exit 5)."""


def require_object(data: Any, what: str) -> None:
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"{what} payload is not a JSON object (got {type(data).__name__})")


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
                id=int(data["id"]),
                name=str(data.get("name") or ""),
                display_title=str(data.get("display_title") or ""),
                status=str(data.get("status") or "queued"),
                conclusion=data.get("conclusion"),
                html_url=str(data.get("html_url") or ""),
                head_sha=data.get("head_sha"),
                created_at=data.get("created_at"),
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
            return cls(str(data["filename"]), str(data.get("status") or "modified"),
                       data.get("previous_filename"), patch if isinstance(patch, str) else None)
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
            return cls(int(data["number"]), str(data.get("title") or ""), str(data.get("body") or ""),
                       str((data.get("user") or {}).get("login") or ""), "pull_request" in data,
                       str(data.get("state") or "open"), data.get("created_at"), repo)
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
