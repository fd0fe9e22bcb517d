"""The emulator's state: plain records guarded by `FakeGitHub._lock`, and the helpers that
fill them (clock and time parsing, deterministic fake SHAs and user ids).

A pull request is an `Item` with `pull` set: issues and PRs share one number space, as on
GitHub. Records hold what was seeded or written; JSON is rendered from them per request
(payloads.py), so nothing here knows a URL.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def iso(t: dt.datetime | None) -> str | None:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def parse_time(v: dt.datetime | str | int | float | None) -> dt.datetime | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)).replace(microsecond=0)
    if isinstance(v, (int, float)):
        return dt.datetime.fromtimestamp(int(v), dt.timezone.utc)
    s = v.strip().replace("Z", "+00:00")
    if len(s) == 10:
        s += "T00:00:00+00:00"
    t = dt.datetime.fromisoformat(s)
    return (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).replace(microsecond=0)


def fake_sha(*parts: object) -> str:
    return hashlib.sha1("\0".join(map(str, parts)).encode()).hexdigest()


def user_id(login: str) -> int:
    return zlib.crc32(login.encode()) % 90_000_000 + 10_000_000


@dataclass
class Token:
    login: str
    push: bool
    admin: bool
    limit: int
    remaining: int
    reset: int


@dataclass
class Comment:
    id: int
    body: str
    user: str
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass
class Pull:
    head_sha: str
    head_ref: str
    head_label: str
    head_repo: str
    base_ref: str
    base_sha: str
    merged: bool = False
    merged_at: dt.datetime | None = None
    merge_commit_sha: str | None = None
    merged_by: str | None = None
    draft: bool = False
    html_url: str | None = None
    files: list[dict] | None = None       # explicit; else computed from the linked git
    commits: list[Any] | None = None


@dataclass
class Item:
    """An issue; a pull request is an issue with `pull` set (they share one number space)."""
    id: int
    number: int
    title: str
    body: str | None
    user: str
    created_at: dt.datetime
    updated_at: dt.datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: dt.datetime | None = None
    closed_by: str | None = None
    labels: list[str] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    pull: Pull | None = None


@dataclass
class Workflow:
    id: int
    file: str
    name: str
    inputs: dict[str, dict] | None
    run_name: str | None
    created_at: dt.datetime


@dataclass
class Artifact:
    id: int
    run_id: int
    repo: str
    name: str
    data: bytes
    created_at: dt.datetime


@dataclass
class Run:
    id: int
    repo: str
    workflow: Workflow
    run_number: int
    ref: str
    head_branch: str
    head_sha: str
    inputs: dict
    actor: str
    display_title: str
    created_at: dt.datetime
    updated_at: dt.datetime
    polls: tuple[int, int]
    planned_conclusion: str
    planned_artifacts: dict[str, bytes]
    event: str = "workflow_dispatch"
    seen: int = 0
    status: str = "queued"
    conclusion: str | None = None
    run_started_at: dt.datetime | None = None
    artifacts: list[int] = field(default_factory=list)


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    private: bool
    fork_of: str | None
    created_at: dt.datetime
    items: dict[int, Item] = field(default_factory=dict)
    label_colors: dict[str, str] = field(default_factory=dict)
    workflows: dict[str, Workflow] = field(default_factory=dict)
    git_dir: Path | None = None
    objects_dir: str | None = None

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

