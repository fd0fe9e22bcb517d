"""A stateful GitHub REST v3 emulator, answering over real HTTP on loopback.

`FakeGitHub` is one werkzeug handler installed behind a catch-all matcher of a pytest-httpserver
`HTTPServer(threaded=True)`; the `fake` fixture (tests/conftest.py) and `running_emulator()`
(benchmarks, scripts) do that. State lives in plain dataclasses guarded by one lock; JSON is
rendered from it per request, so every `url` and `Link` points at `base_url` (PyGithub asserts
the host of URLs it follows).

Behaviour that clients must cope with is built in: ETags and 304s that cost no rate limit, Link
pagination, a per-token rate limit, permissions, and faults queued with `inject()`. Requests are
logged without credentials. An exception inside the emulator, or a request for an endpoint it
does not implement, is recorded and reported by `check()` (the fixture fails the test with it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import hashlib
import io
import itertools
import json
import logging
import os
import re
import socket
import struct
import subprocess
import threading
import time
import traceback
import urllib.parse
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug import Request, Response

__all__ = [
    "DEFAULT_TOKEN",
    "READONLY_TOKEN",
    "FAULT_KINDS",
    "FakeGitHub",
    "LoggedRequest",
    "commits_from_git",
    "files_from_git",
    "make_zip",
    "running_emulator",
]

# Token-shaped on purpose (the redactor must catch them), split so no secret scanner flags the file.
DEFAULT_TOKEN = "ghp" + "_porttrackTestRW000000000000000000001"   # push access, login porttrack-bot
READONLY_TOKEN = "ghp" + "_porttrackTestRO000000000000000000002"  # pull only, login reader
DOCS = "https://docs.github.com/rest"

PRIMARY_LIMIT_MESSAGE = ("API rate limit exceeded for user ID {uid}. If you reach out to GitHub "
                         "Support for help, please include the request ID {rid}.")
SECONDARY_LIMIT_MESSAGE = ("You have exceeded a secondary rate limit. Please wait a few minutes "
                           "before you try again. If you reach out to GitHub Support for help, "
                           "please include the request ID {rid}.")

FAULT_KINDS: dict[str, set[str]] = {   # kind -> accepted parameters
    "status": {"status", "body", "json", "headers", "content_type"},
    "rate_limit": {"reset_in", "message"},
    "secondary_rate_limit": {"retry_after", "message", "status"},
    "too_many": {"retry_after", "message"},
    "delay": {"seconds"},
    "malformed": {"body", "content_type"},
    "truncated": set(),
    "reset": set(),
}


# ------------------------------------------------------------------------------------ helpers


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def _iso(t: dt.datetime | None) -> str | None:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def _parse_time(v: dt.datetime | str | int | float | None) -> dt.datetime | None:
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


def _fake_sha(*parts: object) -> str:
    return hashlib.sha1("\0".join(map(str, parts)).encode()).hexdigest()


_HEX40 = re.compile(r"[0-9a-f]{40}")


def make_zip(files: Mapping[str, bytes | str]) -> bytes:
    """A zip archive (deterministic timestamps) holding `files`, for artifacts."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            zf.writestr(info, data.encode() if isinstance(data, str) else data)
    return buf.getvalue()


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


def _not_found() -> _HTTPError:
    return _HTTPError(404, "Not Found")


def _validation(resource: str, field_: str, code: str = "missing_field") -> _HTTPError:
    return _HTTPError(422, "Validation Failed",
                      errors=[{"resource": resource, "code": code, "field": field_}])


# ------------------------------------------------------------------------------ git queries


def _git(git_dir: Path, *args: str, env: Mapping[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[bytes]:
    p = subprocess.run(["git", "-C", str(git_dir), *args], capture_output=True, timeout=120,
                       env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **(env or {})})
    if check and p.returncode:
        raise RuntimeError(f"git {' '.join(args)} in {git_dir} exited {p.returncode}: "
                           f"{p.stderr.decode('utf-8', 'replace').strip()}")
    return p


_LOG_FORMAT = "%H%x00%T%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%B%x1e"


def commits_from_git(git_dir: Path, base: str | None, head: str, *,
                     env: Mapping[str, str] | None = None, limit: int | None = None) -> list[dict]:
    """Commits reachable from `head` but not `base`, oldest first, as plain info dicts
    (sha, tree, parents, author/committer {name, email, date}, message)."""
    args = ["log", f"--format={_LOG_FORMAT}", "--reverse", "--topo-order"]
    if limit is not None:
        args.append(f"--max-count={limit}")   # with --reverse: the newest `limit`, oldest first
    args += [head, *([f"^{base}"] if base else []), "--"]
    out = _git(git_dir, *args, env=env).stdout.decode("utf-8", "replace")
    commits = []
    for rec in out.split("\x1e"):
        rec = rec.lstrip("\n")
        if not rec:
            continue
        sha, tree, parents, an, ae, at, cn, ce, ct, msg = rec.split("\x00", 9)
        commits.append({
            "sha": sha, "tree": tree, "parents": parents.split(),
            "author": {"name": an, "email": ae, "date": _iso(_parse_time(int(at)))},
            "committer": {"name": cn, "email": ce, "date": _iso(_parse_time(int(ct)))},
            "message": msg.rstrip("\n"),
        })
    return commits


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}


def files_from_git(git_dir: Path, base: str, head: str, *,
                   env: Mapping[str, str] | None = None) -> list[dict]:
    """The files endpoint's items for the diff `base`..`head` (use the merge base as `base`):
    filename, status, additions, deletions, changes, sha, patch (hunks only, as GitHub sends;
    absent for binary files), previous_filename for renames."""
    raw = _git(git_dir, "diff", "--raw", "-z", "-M", "--no-abbrev", base, head, "--", env=env).stdout
    fields = raw.split(b"\0")
    entries = []
    i = 0
    while i < len(fields) and fields[i].startswith(b":"):
        meta = fields[i][1:].decode().split()
        status = meta[4]
        if status[0] in "RC":
            old, new = fields[i + 1], fields[i + 2]
            i += 3
        else:
            old = new = fields[i + 1]
            i += 2
        entries.append((meta, status, old.decode("utf-8", "surrogateescape"),
                        new.decode("utf-8", "surrogateescape")))
    patch = _git(git_dir, "-c", "core.quotePath=false", "diff", "-M", "--no-color", "--no-ext-diff",
                 "--full-index", "-p", base, head, "--", env=env).stdout
    blocks = re.split(rb"(?m)^(?=diff --git )", patch)
    blocks = [b for b in blocks if b.startswith(b"diff --git ")]
    files = []
    for n, (meta, status, old, new) in enumerate(entries):
        block = blocks[n] if n < len(blocks) else b""
        hunks_at = re.search(rb"(?m)^@@", block)
        text = block[hunks_at.start():].decode("utf-8", "replace").rstrip("\n") if hunks_at else None
        adds = dels = 0
        for line in (text or "").split("\n"):
            if line.startswith("+"):
                adds += 1
            elif line.startswith("-"):
                dels += 1
        kind = _STATUS.get(status[0], "modified")
        if kind == "modified" and meta[0] != meta[1] and meta[2] == meta[3]:
            kind = "changed"   # mode-only change
        item: dict[str, Any] = {"sha": meta[3] if status[0] != "D" else meta[2], "filename": new,
                                "status": kind, "additions": adds, "deletions": dels,
                                "changes": adds + dels}
        if text is not None:
            item["patch"] = text
        if kind in ("renamed", "copied"):
            item["previous_filename"] = old
        files.append(item)
    return files


# ------------------------------------------------------------------------------------- state


@dataclass
class _Token:
    login: str
    push: bool
    admin: bool
    limit: int
    remaining: int
    reset: int


@dataclass
class _Comment:
    id: int
    body: str
    user: str
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass
class _Pull:
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
class _Item:
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
    comments: list[_Comment] = field(default_factory=list)
    pull: _Pull | None = None


@dataclass
class _Workflow:
    id: int
    file: str
    name: str
    inputs: dict[str, dict] | None
    run_name: str | None
    created_at: dt.datetime


@dataclass
class _Artifact:
    id: int
    run_id: int
    repo: str
    name: str
    data: bytes
    created_at: dt.datetime


@dataclass
class _Run:
    id: int
    repo: str
    workflow: _Workflow
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
class _Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    private: bool
    fork_of: str | None
    created_at: dt.datetime
    items: dict[int, _Item] = field(default_factory=dict)
    label_colors: dict[str, str] = field(default_factory=dict)
    workflows: dict[str, _Workflow] = field(default_factory=dict)
    check_runs: dict[str, list[dict]] = field(default_factory=dict)
    statuses: dict[str, list[dict]] = field(default_factory=dict)
    git_dir: Path | None = None
    objects_dir: str | None = None

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class _Fault:
    kind: str
    path: re.Pattern[str] | None
    method: str | None
    times: int
    params: dict[str, Any]

    def matches(self, method: str, path: str) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path is None or bool(self.path.search(path))))


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the emulator saw it. Credentials are never stored."""
    method: str
    path: str
    query: dict[str, str]
    status: int | None          # None: the connection was reset without an answer
    conditional: bool           # If-None-Match was sent
    matched_etag: bool          # ...and it matched (answered 304)
    auth_present: bool
    login: str | None           # the token's user, when the token was valid
    time: float
    duration: float
    json: Any                   # parsed body of writes (POST/PATCH/PUT/DELETE), else None
    fault: str | None           # the injected fault kind that shaped this answer
    headers: dict[str, str]     # request headers minus Authorization/Cookie


@dataclass
class _Reply:
    status: int = 200
    payload: Any = None                       # JSON-able, or bytes/str for raw bodies
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"
    last_modified: dt.datetime | None = None


@dataclass
class _Ctx:
    request: Request
    token: _Token | None
    args: Mapping[str, str]
    body: Any

    @property
    def login(self) -> str | None:
        return self.token.login if self.token else None


# -------------------------------------------------------------------------------- emulator


class FakeGitHub:
    """Stateful GitHub REST emulator; call it with a werkzeug Request.

    Seed state with add_repo / add_token / put_pull / put_issue / set_checks / add_workflow /
    link_git; shape answers with latency_s, inject(), on_request, on_dispatch, run_schedule;
    inspect with log / requests() / pull() / issue() / runs() / dispatches; call check() at the end.
    """

    def __init__(self, base_url: str, *, latency_s: float = 0.0, seed_tokens: bool = True) -> None:
        self.base_url = base_url.rstrip("/")
        self.html_base = self.base_url
        self.latency_s = latency_s
        self.on_request: Callable[[str, str, dict[str, str]], None] | None = None
        # on_dispatch(repo, workflow_file, ref, inputs) -> {conclusion, artifacts: {name: zip
        # bytes or {file: content}}, polls: (queued, in_progress), display_title} or None.
        # It runs inside the emulator's lock: it must not call the emulator over HTTP.
        self.on_dispatch: Callable[[str, str, str, dict], Mapping[str, Any] | None] | None = None
        self.run_schedule: tuple[int, int] = (1, 1)   # polls seen queued, then in_progress
        self.strict = True        # report requests for endpoints the emulator lacks
        self.log: list[LoggedRequest] = []
        self.errors: list[str] = []
        self.unrouted: list[str] = []
        self.dispatches: list[dict] = []
        self.server: Any = None
        self._lock = threading.RLock()
        self._ids = itertools.count(1001)          # object ids: depend only on what was created
        self._request_ids = itertools.count(1)     # kept apart so request counts don't shift ids
        self._repos: dict[str, _Repo] = {}
        self._tokens: dict[str, _Token] = {}
        self._anon = _Token("", False, False, 60, 60, int(time.time()) + 3600)
        self._faults: list[_Fault] = []
        self._runs: dict[int, _Run] = {}
        self._artifacts: dict[int, _Artifact] = {}
        self._git_cache: dict[tuple, Any] = {}
        self._offset = dt.timedelta(0)
        self._frozen: dt.datetime | None = None
        self._started = self.now()
        self._routes = self._build_routes()
        if seed_tokens:
            self.add_token(DEFAULT_TOKEN, push=True, login="porttrack-bot")
            self.add_token(READONLY_TOKEN, push=False, login="reader")

    # ================================================================ installation & clock

    def install(self, server: Any) -> FakeGitHub:
        """Answer every request `server` (a pytest_httpserver HTTPServer) receives."""
        server.expect_request(re.compile(".*")).respond_with_handler(self)
        self.server = server
        return self

    def now(self) -> dt.datetime:
        if self._frozen is not None:
            return self._frozen
        return _utcnow() + self._offset

    def freeze_time(self, when: dt.datetime | str | None = None) -> None:
        """Stop the emulator clock (at `when`, or now); timestamps it writes then stay put."""
        self._frozen = _parse_time(when) if when is not None else self.now()

    def advance(self, seconds: float) -> None:
        """Move the emulator clock forward (frozen or not)."""
        delta = dt.timedelta(seconds=seconds)
        if self._frozen is not None:
            self._frozen += delta
        else:
            self._offset += delta

    def _bump(self, old: dt.datetime | None) -> dt.datetime:
        # every change moves updated_at strictly forward, even within one second
        now = self.now()
        return now if old is None or now > old else old + dt.timedelta(seconds=1)

    # ===================================================================== seeding state

    def add_token(self, token: str, *, push: bool = True, admin: bool = False,
                  login: str = "porttrack-bot", limit: int = 5000) -> None:
        with self._lock:
            self._tokens[token] = _Token(login, push, admin, limit, limit, int(time.time()) + 3600)

    def set_rate_limit(self, token: str, *, remaining: int | None = None, limit: int | None = None,
                       reset_in: int | None = None) -> None:
        with self._lock:
            t = self._tokens[token]
            if limit is not None:
                t.limit = limit
            if remaining is not None:
                t.remaining = remaining
            if reset_in is not None:
                t.reset = int(time.time()) + reset_in

    def rate_limit(self, token: str) -> dict[str, int]:
        with self._lock:
            t = self._refill(self._tokens[token])
            return {"limit": t.limit, "remaining": t.remaining, "used": t.limit - t.remaining,
                    "reset": t.reset}

    def add_repo(self, full_name: str, *, default_branch: str = "main", private: bool = False,
                 fork_of: str | None = None) -> None:
        owner, _, name = full_name.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repository names are owner/name, got {full_name!r}")
        with self._lock:
            if full_name.lower() in self._repos:
                raise ValueError(f"repository {full_name} exists")
            self._repos[full_name.lower()] = _Repo(next(self._ids), owner, name, default_branch,
                                                   private, fork_of, self.now())

    def has_repo(self, full_name: str) -> bool:
        return full_name.lower() in self._repos

    def link_git(self, full_name: str, git_dir: Path) -> None:
        """Answer compare / commits / PR files and diffs for `full_name` from this repository."""
        git_dir = Path(git_dir)
        absolute = _git(git_dir, "rev-parse", "--absolute-git-dir").stdout.decode().strip()
        with self._lock:
            r = self._repo(full_name)
            r.git_dir, r.objects_dir = git_dir, os.path.join(absolute, "objects")

    def put_pull(self, full_name: str, number: int, **fields: Any) -> dict:
        """Create or update pull request `number`; returns its JSON as GET would.

        Fields: title, body, state (open|closed), merged, merged_at, closed_at, created_at,
        updated_at, merge_commit_sha, merged_by, head_sha, head_ref, head_label, head_repo,
        base_ref, base_sha, user, draft, html_url, labels, files (list of dicts), commits
        (list of SHAs or dicts). updated_at moves forward on every call unless given.
        """
        allowed = {"title", "body", "state", "merged", "merged_at", "closed_at", "created_at",
                   "updated_at", "merge_commit_sha", "merged_by", "head_sha", "head_ref",
                   "head_label", "head_repo", "base_ref", "base_sha", "user", "draft", "html_url",
                   "labels", "files", "commits"}
        unknown = set(fields) - allowed
        if unknown:
            raise TypeError(f"put_pull: unknown fields {sorted(unknown)}")
        with self._lock:
            r = self._repo(full_name)
            item = r.items.get(number)
            if item is None:
                item = self._new_pull(r, number, fields)
            elif item.pull is None:
                raise ValueError(f"#{number} in {full_name} is an issue, not a pull request")
            p = item.pull
            assert p is not None
            for key in ("title", "body", "user"):
                if key in fields:
                    setattr(item, key, fields[key])
            for key in ("head_sha", "head_ref", "head_repo", "base_ref", "base_sha", "merge_commit_sha",
                        "merged_by", "draft", "html_url", "files", "commits"):
                if key in fields:
                    setattr(p, key, fields[key])
            if "labels" in fields:
                item.labels = self._ensure_labels(r, fields["labels"])
            if "head_label" in fields:
                p.head_label = fields["head_label"]
            elif {"head_ref", "head_repo"} & set(fields):
                p.head_label = f"{p.head_repo.split('/')[0]}:{p.head_ref}"
            if "created_at" in fields:
                item.created_at = _parse_time(fields["created_at"])  # type: ignore[assignment]
            if "state" in fields:
                if fields["state"] not in ("open", "closed"):
                    raise ValueError("state is open or closed")
                item.state = fields["state"]
                if item.state == "open":
                    item.closed_at, p.merged, p.merged_at = None, False, None
            if fields.get("merged"):
                p.merged, item.state = True, "closed"
                p.merged_at = _parse_time(fields.get("merged_at")) or p.merged_at or self.now()
            elif "merged" in fields:
                p.merged, p.merged_at = False, None
            elif "merged_at" in fields:
                p.merged_at = _parse_time(fields["merged_at"])
                p.merged = p.merged_at is not None
            if "closed_at" in fields:
                item.closed_at = _parse_time(fields["closed_at"])
            elif item.state == "closed" and item.closed_at is None:
                item.closed_at = p.merged_at or self.now()
            item.updated_at = (_parse_time(fields["updated_at"]) if "updated_at" in fields  # type: ignore[assignment]
                               else self._bump(item.updated_at))
            return self._pull_json(r, item, None)

    def _new_pull(self, r: _Repo, number: int, fields: Mapping[str, Any]) -> _Item:
        head_ref = fields.get("head_ref", f"pr/{number}")
        head_repo = fields.get("head_repo", r.full_name)
        base_ref = fields.get("base_ref", r.default_branch)
        head_sha = fields.get("head_sha") or self._try_resolve(r, f"refs/pull/{number}/head") \
            or _fake_sha(r.full_name, "pull", number)
        base_sha = fields.get("base_sha") or self._try_resolve(r, f"refs/heads/{base_ref}") \
            or _fake_sha(r.full_name, "base", base_ref)
        now = self.now()
        item = _Item(next(self._ids), number, f"PR {number}", "", "contributor",
                     _parse_time(fields.get("created_at")) or now, now,
                     pull=_Pull(head_sha, head_ref, f"{head_repo.split('/')[0]}:{head_ref}",
                                head_repo, base_ref, base_sha))
        r.items[number] = item
        return item

    def put_issue(self, full_name: str, number: int | None = None, **fields: Any) -> dict:
        """Create (number=None: next free number) or update an issue; returns its JSON.

        Fields: title, body, state, state_reason, labels, user, created_at, updated_at,
        closed_at, closed_by.
        """
        allowed = {"title", "body", "state", "state_reason", "labels", "user", "created_at",
                   "updated_at", "closed_at", "closed_by"}
        unknown = set(fields) - allowed
        if unknown:
            raise TypeError(f"put_issue: unknown fields {sorted(unknown)}")
        with self._lock:
            r = self._repo(full_name)
            if number is None:
                number = self._next_number(r)
            item = r.items.get(number)
            if item is None:
                now = self.now()
                item = _Item(next(self._ids), number, f"Issue {number}", "", "porttrack-bot",
                             _parse_time(fields.get("created_at")) or now, now)
                r.items[number] = item
            elif item.pull is not None:
                raise ValueError(f"#{number} is a pull request")
            for key in ("title", "body", "user", "state_reason", "closed_by"):
                if key in fields:
                    setattr(item, key, fields[key])
            if "labels" in fields:
                item.labels = self._ensure_labels(r, fields["labels"])
            if "created_at" in fields:
                item.created_at = _parse_time(fields["created_at"])  # type: ignore[assignment]
            if "state" in fields:
                item.state = fields["state"]
                if item.state == "closed":
                    item.closed_at = _parse_time(fields.get("closed_at")) or item.closed_at or self.now()
                    item.state_reason = fields.get("state_reason", item.state_reason or "completed")
                else:
                    item.closed_at = item.closed_by = None
            item.updated_at = (_parse_time(fields["updated_at"]) if "updated_at" in fields  # type: ignore[assignment]
                               else self._bump(item.updated_at))
            return self._issue_json(r, item, full=True)

    def set_checks(self, full_name: str, sha: str, *,
                   runs: Mapping[str, str | None] | Sequence[Mapping[str, Any]] | None = None,
                   statuses: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None) -> None:
        """Set the check runs and/or commit statuses of a commit (a ref is resolved via git).

        runs: {name: conclusion} (None / "queued" / "in_progress" = not completed) or a list of
        dicts (name, status, conclusion, details_url, output). statuses: {context: state}
        (success|failure|error|pending) or a list of dicts (context, state, description,
        target_url). Each given argument replaces what that commit had.
        """
        with self._lock:
            r = self._repo(full_name)
            sha = self._try_resolve(r, sha) or sha
            now = self.now()
            if runs is not None:
                items = ([{"name": k, "conclusion": v} for k, v in runs.items()]
                         if isinstance(runs, Mapping) else [dict(x) for x in runs])
                out = []
                for x in items:
                    conclusion = x.get("conclusion")
                    status = x.get("status") or ("completed" if conclusion not in (None, "queued", "in_progress")
                                                 else (conclusion or "queued"))
                    if status != "completed":
                        conclusion = None
                    out.append({"id": next(self._ids), "name": x["name"], "status": status,
                                "conclusion": conclusion, "details_url": x.get("details_url"),
                                "output": x.get("output") or {}, "started_at": now,
                                "completed_at": now if status == "completed" else None})
                r.check_runs[sha] = out
            if statuses is not None:
                items = ([{"context": k, "state": v} for k, v in statuses.items()]
                         if isinstance(statuses, Mapping) else [dict(x) for x in statuses])
                r.statuses[sha] = [{"id": next(self._ids), "context": x["context"], "state": x["state"],
                                    "description": x.get("description"), "target_url": x.get("target_url"),
                                    "created_at": now} for x in items]

    def add_workflow(self, full_name: str, file: str, *, name: str | None = None,
                     inputs: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None,
                     run_name: str | None = None) -> int:
        """Declare `.github/workflows/<file>`. inputs: names (or {name: {"required": bool}}) the
        workflow_dispatch trigger accepts (None: accept anything). run_name may use
        `${{ inputs.X }}`, like a workflow's `run-name:`. Returns the workflow id."""
        with self._lock:
            r = self._repo(full_name)
            decl = None
            if inputs is not None:
                decl = ({k: dict(v) for k, v in inputs.items()} if isinstance(inputs, Mapping)
                        else {k: {} for k in inputs})
            wf = _Workflow(next(self._ids), file, name or file.rsplit(".", 1)[0], decl, run_name,
                           self.now())
            r.workflows[file] = wf
            return wf.id

    # ================================================================== fault injection

    def inject(self, kind: str, *, path: str | None = None, method: str | None = None,
               times: int = 1, **params: Any) -> None:
        """Queue a fault for the next `times` requests matching `path` (regex, searched in the
        path) and `method`. Queued faults are consumed in order.

        status (status=502, body= / json=, headers=) · rate_limit (reset_in=60) ·
        secondary_rate_limit (retry_after=60, status=403) · too_many (retry_after=1) ·
        delay (seconds=1.0, then the normal answer) · malformed (body=, content_type=) ·
        truncated (the normal JSON cut in half) · reset (connection dropped, no answer)
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {sorted(FAULT_KINDS)}")
        unknown = set(params) - FAULT_KINDS[kind]
        if unknown:
            raise TypeError(f"fault {kind!r} takes {sorted(FAULT_KINDS[kind])}, not {sorted(unknown)}")
        with self._lock:
            self._faults.append(_Fault(kind, re.compile(path) if path else None,
                                       method.upper() if method else None, times, params))

    def pending_faults(self) -> list[tuple[str, int]]:
        with self._lock:
            return [(f.kind, f.times) for f in self._faults]

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for f in self._faults:
                if f.matches(method, path):
                    f.times -= 1
                    if f.times <= 0:
                        self._faults.remove(f)
                    return f
        return None

    # ==================================================================== inspection

    def requests(self, method: str | None = None, path_re: str | None = None) -> list[LoggedRequest]:
        with self._lock:
            return [x for x in self.log
                    if (method is None or x.method == method.upper())
                    and (path_re is None or re.search(path_re, x.path))]

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    def pull(self, full_name: str, number: int) -> dict:
        with self._lock:
            r = self._repo(full_name)
            item = r.items[number]
            return self._pull_json(r, item, None)

    def issue(self, full_name: str, number: int) -> dict:
        with self._lock:
            r = self._repo(full_name)
            return self._issue_json(r, r.items[number], full=True)

    def issues(self, full_name: str) -> list[dict]:
        """Every issue (not PR) of the repository, lowest number first."""
        with self._lock:
            r = self._repo(full_name)
            return [self._issue_json(r, i, full=True) for _, i in sorted(r.items.items()) if i.pull is None]

    def comments(self, full_name: str, number: int) -> list[dict]:
        with self._lock:
            r = self._repo(full_name)
            return [self._comment_json(r, r.items[number], c) for c in r.items[number].comments]

    def runs(self, full_name: str) -> list[dict]:
        """Workflow runs of the repository, oldest first, without counting as polls."""
        with self._lock:
            r = self._repo(full_name)
            return [self._run_json(r, x) for x in self._runs.values() if x.repo == r.full_name]

    def complete_run(self, run_id: int) -> None:
        """Finish a run now, as if it had been polled enough."""
        with self._lock:
            run = self._runs[run_id]
            run.seen = sum(run.polls) + 1
            self._settle_run(run)

    def problems(self) -> list[str]:
        with self._lock:
            return [*self.errors, *(self.unrouted if self.strict else [])]

    def check(self) -> None:
        """Raise AssertionError for emulator exceptions and (when strict) unrouted requests."""
        problems = self.problems()
        if problems:
            raise AssertionError("GitHub emulator problems:\n" + "\n".join(problems))

    # ========================================================================== serving

    def __call__(self, request: Request) -> Response:
        started = time.time()
        try:
            return self._serve(request, started)
        except Exception:
            with self._lock:
                self.errors.append(f"{request.method} {request.path}: {traceback.format_exc()}")
                self.log.append(LoggedRequest(
                    request.method.upper(), request.path, {}, 500, "If-None-Match" in request.headers,
                    False, "Authorization" in request.headers, None, started, time.time() - started,
                    None, None, {}))
            body = json.dumps({"message": "GitHub emulator error (see fake.errors)"}).encode()
            return Response(body, 500, content_type="application/json; charset=utf-8")

    def _serve(self, request: Request, started: float) -> Response:
        if self.latency_s:
            time.sleep(self.latency_s)
        method, path = request.method.upper(), request.path
        query = {k: ("REDACTED" if k.lower() in ("access_token", "token") else v)
                 for k, v in request.args.items()}
        if self.on_request is not None:
            self.on_request(method, path, dict(query))
        inm = request.headers.get("If-None-Match")
        auth = request.headers.get("Authorization")
        raw = request.get_data()
        body = None
        body_error = False
        if method in ("POST", "PATCH", "PUT", "DELETE") and raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body_error = True
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("authorization", "proxy-authorization", "cookie")}
        fault = self._take_fault(method, path)

        def record(status: int | None, token: _Token | None, matched: bool = False) -> None:
            rec = LoggedRequest(method, path, query, status, inm is not None, matched, auth is not None,
                                token.login if token else None, started, time.time() - started,
                                body if method != "GET" else None, fault.kind if fault else None, headers)
            with self._lock:
                self.log.append(rec)

        if fault is not None and fault.kind == "delay":
            time.sleep(float(fault.params.get("seconds", 1.0)))
        elif fault is not None and fault.kind == "reset":
            # Log before the socket dies: the client sees the reset at once and a test may read
            # the log before this thread would get to a later line.
            record(None, None)
            self._drop_connection(request)
            return Response(b"", 200)
        elif fault is not None and fault.kind != "truncated":
            resp = self._fault_response(fault, self._token_for(auth))
            record(resp.status_code, None)
            return resp

        token = self._token_for(auth)
        if path.startswith("/_blobs/"):          # signed storage URLs need no credentials
            reply = self._route(method, path, _Ctx(request, None, request.args, body))
            resp = self._respond(reply, None, counted=False)
            record(resp.status_code, None)
            return resp
        if token is None:
            resp = self._respond(_Reply(401, {"message": "Bad credentials", "documentation_url": DOCS}),
                                 None, counted=False)
            record(401, None)
            return resp
        with self._lock:
            self._refill(token)
            exhausted = token.remaining <= 0 and path != "/rate_limit"
        if exhausted:
            resp = self._respond(_Reply(403, {"message": PRIMARY_LIMIT_MESSAGE.format(
                uid=self._user_id(token.login), rid=self._request_id()), "documentation_url": DOCS}),
                token, counted=False)
            record(403, token)
            return resp
        if body_error:
            reply = _Reply(400, {"message": "Problems parsing JSON", "documentation_url": DOCS})
        else:
            reply = self._route(method, path, _Ctx(request, token, request.args, body))
        matched = False
        if method == "GET" and reply.status == 200 and inm is not None:
            # weak comparison (RFC 9110): W/"x" and "x" match each other
            etag = self._etag(self._encode(reply)[0]).removeprefix("W/")
            sent = {t.strip().removeprefix("W/") for t in inm.split(",")}
            matched = etag in sent or "*" in sent
        resp = self._respond(reply, token, counted=not matched and path != "/rate_limit",
                             not_modified=matched)
        if fault is not None and fault.kind == "truncated":
            data = resp.get_data()
            resp.set_data(data[: len(data) // 2])
        record(resp.status_code, token, matched)
        return resp

    @staticmethod
    def _drop_connection(request: Request) -> None:
        # SO_LINGER 0 + shutdown: the client sees the connection die before any status line
        # (requests raises ConnectionError); werkzeug's later write fails and is ignored.
        sock = request.environ.get("werkzeug.socket")
        if sock is None:
            raise RuntimeError("werkzeug.socket missing: cannot emulate a connection reset")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)

    def _fault_response(self, fault: _Fault, token: _Token | None) -> Response:
        p, rid = fault.params, self._request_id()
        if fault.kind == "status":
            status = int(p.get("status", 502))
            if "body" in p:
                data = p["body"].encode() if isinstance(p["body"], str) else p["body"]
                ctype = p.get("content_type", "text/plain; charset=utf-8")
            else:
                data = json.dumps(p.get("json", {"message": _reason(status)})).encode()
                ctype = p.get("content_type", "application/json; charset=utf-8")
            resp = Response(data, status, content_type=ctype)
            self._rate_headers(resp, token)
            resp.headers.update(p.get("headers", {}))
            return resp
        if fault.kind == "rate_limit":
            login = token.login if token else "anonymous"
            msg = p.get("message", PRIMARY_LIMIT_MESSAGE.format(uid=self._user_id(login), rid=rid))
            resp = Response(json.dumps({"message": msg, "documentation_url": DOCS}), 403,
                            content_type="application/json; charset=utf-8")
            limit = token.limit if token else 60
            resp.headers.update({"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": "0",
                                 "X-RateLimit-Used": str(limit),
                                 "X-RateLimit-Reset": str(int(time.time()) + int(p.get("reset_in", 60))),
                                 "X-RateLimit-Resource": "core", "X-GitHub-Request-Id": rid})
            return resp
        if fault.kind in ("secondary_rate_limit", "too_many"):
            status = 429 if fault.kind == "too_many" else int(p.get("status", 403))
            msg = p.get("message", SECONDARY_LIMIT_MESSAGE.format(rid=rid))
            resp = Response(json.dumps({"message": msg, "documentation_url": DOCS}), status,
                            content_type="application/json; charset=utf-8")
            self._rate_headers(resp, token)
            resp.headers["Retry-After"] = str(p.get("retry_after", 60 if fault.kind != "too_many" else 1))
            return resp
        if fault.kind == "malformed":
            data = p.get("body", b"<html><body><h1>Unicorn!</h1>This page is taking too long to load.</body></html>")
            resp = Response(data.encode() if isinstance(data, str) else data, 200,
                            content_type=p.get("content_type", "text/html; charset=utf-8"))
            self._rate_headers(resp, token)
            return resp
        raise AssertionError(fault.kind)

    # ------------------------------------------------------------------- response shaping

    def _token_for(self, auth: str | None) -> _Token | None:
        if not auth:
            return None
        scheme, _, value = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        with self._lock:
            return self._tokens.get(value.strip())

    @staticmethod
    def _refill(t: _Token) -> _Token:
        if time.time() >= t.reset:
            t.remaining, t.reset = t.limit, int(time.time()) + 3600
        return t

    def _request_id(self) -> str:
        return f"EMU:{next(self._request_ids):08X}"

    @staticmethod
    def _etag(data: bytes) -> str:
        return f'W/"{hashlib.sha1(data).hexdigest()}"'

    @staticmethod
    def _encode(reply: _Reply) -> tuple[bytes, str]:
        if reply.payload is None:
            return b"", reply.content_type
        if isinstance(reply.payload, bytes):
            return reply.payload, reply.content_type
        if isinstance(reply.payload, str):
            return reply.payload.encode(), reply.content_type
        return json.dumps(reply.payload, separators=(",", ":")).encode(), reply.content_type

    def _rate_headers(self, resp: Response, token: _Token | None) -> None:
        t = token or self._anon
        resp.headers.update({"X-RateLimit-Limit": str(t.limit), "X-RateLimit-Remaining": str(t.remaining),
                             "X-RateLimit-Used": str(t.limit - t.remaining),
                             "X-RateLimit-Reset": str(t.reset), "X-RateLimit-Resource": "core"})

    def _respond(self, reply: _Reply, token: _Token | None, *, counted: bool,
                 not_modified: bool = False) -> Response:
        if counted and token is not None:
            with self._lock:
                token.remaining = max(0, token.remaining - 1)
        data, ctype = self._encode(reply)
        etag = self._etag(data) if reply.status == 200 and data else None
        if not_modified:
            resp = Response(status=304)
        elif reply.status in (204, 304) or (reply.payload is None and reply.status in (301, 302)):
            resp = Response(status=reply.status)
        else:
            resp = Response(data, reply.status, content_type=ctype)
        resp.headers["X-GitHub-Request-Id"] = self._request_id()
        resp.headers["X-GitHub-Api-Version-Selected"] = "2022-11-28"
        if etag:
            resp.headers["ETag"] = etag
            resp.headers["Last-Modified"] = email.utils.format_datetime(
                reply.last_modified or self._started, usegmt=True)
            resp.headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
            resp.headers["Vary"] = "Accept, Authorization, Cookie, X-GitHub-OTP"
        self._rate_headers(resp, token)
        resp.headers.update(reply.headers)
        return resp

    # ========================================================================== routing

    def _build_routes(self) -> list[tuple[str, re.Pattern[str], Callable[..., _Reply]]]:
        R = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
        table = [
            ("GET", r"/rate_limit", self._h_rate_limit),
            ("GET", r"/user", self._h_user),
            ("GET", R, self._h_repo),
            ("GET", R + r"/pulls", self._h_pulls),
            ("GET", R + r"/pulls/(?P<n>\d+)", self._h_pull),
            ("GET", R + r"/pulls/(?P<n>\d+)/files", self._h_pull_files),
            ("GET", R + r"/pulls/(?P<n>\d+)/commits", self._h_pull_commits),
            ("GET", R + r"/compare/(?P<basehead>.+)", self._h_compare),
            ("GET", R + r"/commits/(?P<ref>.+)/check-runs", self._h_check_runs),
            ("GET", R + r"/commits/(?P<ref>.+)/status", self._h_status),
            ("GET", R + r"/check-runs/(?P<cid>\d+)", self._h_check_run),
            ("GET", R + r"/commits/(?P<ref>[^/]+)", self._h_commit),
            ("GET", R + r"/issues", self._h_issues),
            ("POST", R + r"/issues", self._h_create_issue),
            ("GET", R + r"/issues/(?P<n>\d+)", self._h_issue),
            ("PATCH", R + r"/issues/(?P<n>\d+)", self._h_edit_issue),
            ("GET", R + r"/issues/(?P<n>\d+)/comments", self._h_comments),
            ("POST", R + r"/issues/(?P<n>\d+)/comments", self._h_create_comment),
            ("GET", R + r"/issues/comments/(?P<cid>\d+)", self._h_comment),
            ("PATCH", R + r"/issues/comments/(?P<cid>\d+)", self._h_edit_comment),
            ("POST", R + r"/issues/(?P<n>\d+)/labels", self._h_add_labels),
            ("DELETE", R + r"/issues/(?P<n>\d+)/labels/(?P<label>.+)", self._h_remove_label),
            ("GET", R + r"/actions/workflows", self._h_workflows),
            ("GET", R + r"/actions/workflows/(?P<wf>[^/]+)", self._h_workflow),
            ("POST", R + r"/actions/workflows/(?P<wf>[^/]+)/dispatches", self._h_dispatch),
            ("GET", R + r"/actions/workflows/(?P<wf>[^/]+)/runs", self._h_runs),
            ("GET", R + r"/actions/runs", self._h_runs),
            ("GET", R + r"/actions/runs/(?P<run>\d+)", self._h_run),
            ("GET", R + r"/actions/runs/(?P<run>\d+)/artifacts", self._h_run_artifacts),
            ("GET", R + r"/actions/artifacts", self._h_repo_artifacts),
            ("GET", R + r"/actions/artifacts/(?P<aid>\d+)", self._h_artifact),
            ("GET", R + r"/actions/artifacts/(?P<aid>\d+)/zip", self._h_artifact_zip),
            ("GET", r"/_blobs/artifacts/(?P<aid>\d+)/(?P<sig>[0-9a-f]+)\.zip", self._h_blob),
        ]
        return [(m, re.compile(p), h) for m, p, h in table]

    def _route(self, method: str, path: str, ctx: _Ctx) -> _Reply:
        path_matched = False
        for m, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if not match:
                continue
            path_matched = True
            if m != method:
                continue
            try:
                with self._lock:
                    return handler(ctx, **match.groupdict())
            except _HTTPError as e:
                return _Reply(e.status, {"message": e.message, **e.extra, "documentation_url": DOCS})
        with self._lock:
            self.unrouted.append(f"unrouted request: {method} {path}"
                                 + (" (path known, method not)" if path_matched else ""))
        return _Reply(404, {"message": "Not Found", "documentation_url": DOCS})

    # ------------------------------------------------------------------ lookups & rules

    def _repo(self, full_name: str) -> _Repo:
        r = self._repos.get(full_name.lower())
        if r is None:
            raise KeyError(f"no repository {full_name} in the emulator (add_repo first)")
        return r

    def _repo_for(self, owner: str, name: str) -> _Repo:
        r = self._repos.get(f"{owner}/{name}".lower())
        if r is None:
            raise _not_found()
        return r

    @staticmethod
    def _require_push(ctx: _Ctx) -> None:
        if ctx.token is None or not ctx.token.push:
            raise _HTTPError(403, "Resource not accessible by integration")

    def _item(self, r: _Repo, n: str | int) -> _Item:
        item = r.items.get(int(n))
        if item is None:
            raise _not_found()
        return item

    def _next_number(self, r: _Repo) -> int:
        return max(r.items, default=0) + 1

    def _ensure_labels(self, r: _Repo, labels: Sequence[Any]) -> list[str]:
        names = []
        for lab in labels:
            name = lab["name"] if isinstance(lab, Mapping) else str(lab)
            r.label_colors.setdefault(name, hashlib.sha1(name.encode()).hexdigest()[:6])
            if name not in names:
                names.append(name)
        return names

    @staticmethod
    def _user_id(login: str) -> int:
        return zlib.crc32(login.encode()) % 90_000_000 + 10_000_000

    def _arg_int(self, ctx: _Ctx, name: str, default: int) -> int:
        try:
            return int(ctx.args.get(name, default))
        except ValueError:
            return default

    def _paginate(self, ctx: _Ctx, items: Sequence[Any], *, default: int = 30,
                  maximum: int = 100) -> tuple[list[Any], dict[str, str]]:
        per_page = self._arg_int(ctx, "per_page", default)
        per_page = default if per_page <= 0 else min(per_page, maximum)
        page = max(1, self._arg_int(ctx, "page", 1))
        last = max(1, -(-len(items) // per_page))
        chunk = list(items[(page - 1) * per_page: page * per_page])
        req = ctx.request

        def url(p: int) -> str:
            params = [(k, v) for k, v in req.args.items(multi=True) if k != "page"] + [("page", str(p))]
            return f"{self.base_url}{urllib.parse.quote(req.path)}?{urllib.parse.urlencode(params)}"

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(min(page - 1, last))}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return chunk, ({"Link": ", ".join(links)} if links else {})

    # --------------------------------------------------------------------- git plumbing

    def _git_env(self) -> dict[str, str]:
        # every linked repository's objects are visible, like GitHub's shared fork network
        dirs = [r.objects_dir for r in self._repos.values() if r.objects_dir]
        return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(dirs)} if dirs else {}

    def _try_resolve(self, r: _Repo, ref: str) -> str | None:
        if r.git_dir is None or ref.startswith("-"):
            return None
        if _HEX40.fullmatch(ref) and ("known", ref) in self._git_cache:
            return ref          # objects never disappear: a SHA seen once stays valid
        p = _git(r.git_dir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                 env=self._git_env(), check=False)
        if p.returncode:
            return None
        sha = p.stdout.decode().strip()
        self._git_cache[("known", sha)] = True
        return sha or None

    def _resolve_spec(self, r: _Repo, spec: str) -> str | None:
        # GitHub accepts ref, owner:ref and owner:repo:ref on either side of a compare
        parts = spec.split(":")
        target = r
        if len(parts) in (2, 3):
            other = self._repos.get(f"{parts[0]}/{parts[1] if len(parts) == 3 else r.name}".lower())
            if other is None:
                return None
            target, spec = other, parts[-1]
        return self._try_resolve(target, spec)

    def _cached(self, key: tuple, fn: Callable[[], Any]) -> Any:
        if key not in self._git_cache:
            self._git_cache[key] = fn()
        return self._git_cache[key]

    def _merge_base(self, r: _Repo, a: str, b: str) -> str | None:
        assert r.git_dir is not None
        p = _git(r.git_dir, "merge-base", a, b, env=self._git_env(), check=False)
        return p.stdout.decode().strip() or None

    def _pr_files(self, r: _Repo, p: _Pull) -> list[dict]:
        if p.files is not None:
            return [{"status": "modified", "additions": 0, "deletions": 0, "changes": 0,
                     "sha": _fake_sha(f.get("filename")), **f} for f in p.files]
        if r.git_dir is None or not self._try_resolve(r, p.head_sha):
            return []
        return self._cached(("files", str(r.git_dir), p.base_sha, p.head_sha), lambda: files_from_git(
            r.git_dir, self._merge_base(r, p.base_sha, p.head_sha) or p.base_sha, p.head_sha,  # type: ignore[arg-type]
            env=self._git_env()))

    def _pr_commits(self, r: _Repo, p: _Pull) -> list[dict]:
        if p.commits is not None:
            out = []
            for c in p.commits:
                if isinstance(c, str):
                    found = self._commit_info(r, c)
                    out.append(found or self._synthetic_commit(c))
                else:
                    out.append({**self._synthetic_commit(c["sha"]), **c})
            return out
        if r.git_dir is None or not self._try_resolve(r, p.head_sha):
            return []
        return self._cached(("commits", str(r.git_dir), p.base_sha, p.head_sha), lambda: commits_from_git(
            r.git_dir, p.base_sha, p.head_sha, env=self._git_env(), limit=250))  # type: ignore[arg-type]

    def _commit_info(self, r: _Repo, sha: str) -> dict | None:
        if ("commit", sha) in self._git_cache:
            return self._git_cache[("commit", sha)]
        full = self._try_resolve(r, sha)
        if full is None:
            return None
        return self._cached(("commit", full), lambda: commits_from_git(
            r.git_dir, None, full, env=self._git_env(), limit=1)[0])  # type: ignore[arg-type]

    @staticmethod
    def _synthetic_commit(sha: str) -> dict:
        person = {"name": "Contributor", "email": "contributor@example.invalid", "date": "2026-01-01T00:00:00Z"}
        return {"sha": sha, "tree": _fake_sha("tree", sha), "parents": [], "author": person,
                "committer": person, "message": f"commit {sha[:7]}"}

    def _raw_diff(self, r: _Repo, base: str, head: str, media: str) -> bytes:
        assert r.git_dir is not None
        if "patch" in media:
            return _git(r.git_dir, "format-patch", "--stdout", f"{base}..{head}", env=self._git_env()).stdout
        return _git(r.git_dir, "diff", "--no-color", "--no-ext-diff", "-M", base, head, "--",
                    env=self._git_env()).stdout

    @staticmethod
    def _diff_media(ctx: _Ctx) -> str | None:
        accept = ctx.request.headers.get("Accept", "")
        m = re.search(r"application/vnd\.github(?:\.v3)?\.(diff|patch)", accept)
        return m.group(1) if m else None

    # ========================================================================= renderers

    def _user(self, login: str | None) -> dict | None:
        if not login:
            return None
        uid = self._user_id(login)
        return {"login": login, "id": uid, "node_id": f"U_{uid}",
                "avatar_url": f"{self.base_url}/_avatars/{uid}", "gravatar_id": "",
                "url": f"{self.base_url}/users/{login}", "html_url": f"{self.html_base}/{login}",
                "type": "Bot" if login.endswith("[bot]") else "User", "site_admin": False}

    def _repo_json(self, r: _Repo, token: _Token | None, *, full: bool = False) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        d: dict[str, Any] = {
            "id": r.id, "node_id": f"R_{r.id}", "name": r.name, "full_name": r.full_name,
            "private": r.private, "owner": self._user(r.owner),
            "html_url": f"{self.html_base}/{r.full_name}", "description": None,
            "fork": r.fork_of is not None, "url": api,
            "pulls_url": api + "/pulls{/number}", "issues_url": api + "/issues{/number}",
            "commits_url": api + "/commits{/sha}", "compare_url": api + "/compare/{base}...{head}",
            "labels_url": api + "/labels{/name}", "statuses_url": api + "/statuses/{sha}",
            "clone_url": f"{self.html_base}/{r.full_name}.git",
            "default_branch": r.default_branch, "visibility": "private" if r.private else "public",
            "archived": False, "disabled": False, "created_at": _iso(r.created_at),
            "updated_at": _iso(r.created_at), "pushed_at": _iso(r.created_at),
        }
        if token is not None:
            d["permissions"] = {"admin": token.admin, "maintain": token.admin, "push": token.push,
                                "triage": token.push, "pull": True}
        if full and r.fork_of and r.fork_of.lower() in self._repos:
            parent = self._repo_json(self._repos[r.fork_of.lower()], token)
            d["parent"] = d["source"] = parent
        return d

    def _label_json(self, r: _Repo, name: str) -> dict:
        lid = zlib.crc32(f"{r.full_name}:{name}".encode())
        return {"id": lid, "node_id": f"LA_{lid}", "name": name, "color": r.label_colors.get(name, "ededed"),
                "default": False, "description": None,
                "url": f"{self.base_url}/repos/{r.full_name}/labels/{urllib.parse.quote(name)}"}

    def _branch_json(self, r: _Repo, label: str, ref: str, sha: str, repo_name: str, token: _Token | None) -> dict:
        other = self._repos.get(repo_name.lower())
        repo = self._repo_json(other, token) if other else {
            "name": repo_name.split("/")[-1], "full_name": repo_name, "url": f"{self.base_url}/repos/{repo_name}",
            "html_url": f"{self.html_base}/{repo_name}", "owner": self._user(repo_name.split("/")[0]),
            "fork": True, "private": False}
        return {"label": label, "ref": ref, "sha": sha, "user": self._user(label.split(":")[0]), "repo": repo}

    def _pull_json(self, r: _Repo, item: _Item, token: _Token | None, *, listing: bool = False) -> dict:
        p = item.pull
        assert p is not None
        api = f"{self.base_url}/repos/{r.full_name}"
        url = f"{api}/pulls/{item.number}"
        html = p.html_url or f"{self.html_base}/{r.full_name}/pull/{item.number}"
        d: dict[str, Any] = {
            "url": url, "id": item.id, "node_id": f"PR_{item.id}", "html_url": html,
            "diff_url": html + ".diff", "patch_url": html + ".patch",
            "issue_url": f"{api}/issues/{item.number}", "commits_url": url + "/commits",
            "review_comments_url": url + "/comments", "review_comment_url": api + "/pulls/comments{/number}",
            "comments_url": f"{api}/issues/{item.number}/comments", "statuses_url": f"{api}/statuses/{p.head_sha}",
            "number": item.number, "state": item.state, "locked": False, "title": item.title,
            "user": self._user(item.user), "body": item.body,
            "labels": [self._label_json(r, x) for x in item.labels], "milestone": None,
            "active_lock_reason": None, "created_at": _iso(item.created_at),
            "updated_at": _iso(item.updated_at), "closed_at": _iso(item.closed_at),
            "merged_at": _iso(p.merged_at), "merge_commit_sha": p.merge_commit_sha,
            "assignee": None, "assignees": [], "requested_reviewers": [], "requested_teams": [],
            "head": self._branch_json(r, p.head_label, p.head_ref, p.head_sha, p.head_repo, token),
            "base": self._branch_json(r, f"{r.owner}:{p.base_ref}", p.base_ref, p.base_sha, r.full_name, token),
            "_links": {"self": {"href": url}, "html": {"href": html},
                       "issue": {"href": f"{api}/issues/{item.number}"},
                       "comments": {"href": f"{api}/issues/{item.number}/comments"},
                       "review_comments": {"href": url + "/comments"},
                       "review_comment": {"href": api + "/pulls/comments{/number}"},
                       "commits": {"href": url + "/commits"},
                       "statuses": {"href": f"{api}/statuses/{p.head_sha}"}},
            "author_association": "CONTRIBUTOR", "auto_merge": None, "draft": p.draft,
        }
        if not listing:   # like GitHub, list items carry no merged/mergeable/counts
            files = self._pr_files(r, p)
            d.update({
                "merged": p.merged, "mergeable": True if item.state == "open" else None,
                "rebaseable": True if item.state == "open" else None,
                "mergeable_state": "clean" if item.state == "open" else "unknown",
                "merged_by": self._user(p.merged_by), "comments": len(item.comments),
                "review_comments": 0, "maintainer_can_modify": False,
                "commits": len(self._pr_commits(r, p)),
                "additions": sum(f["additions"] for f in files),
                "deletions": sum(f["deletions"] for f in files), "changed_files": len(files)})
        return d

    def _issue_json(self, r: _Repo, item: _Item, *, full: bool = False) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        url = f"{api}/issues/{item.number}"
        kind = "pull" if item.pull else "issues"
        html = f"{self.html_base}/{r.full_name}/{kind}/{item.number}"
        d: dict[str, Any] = {
            "url": url, "repository_url": api, "labels_url": url + "/labels{/name}",
            "comments_url": url + "/comments", "events_url": url + "/events", "html_url": html,
            "timeline_url": url + "/timeline", "id": item.id, "node_id": f"I_{item.id}",
            "number": item.number, "title": item.title, "user": self._user(item.user),
            "labels": [self._label_json(r, x) for x in item.labels], "state": item.state,
            "state_reason": item.state_reason, "locked": False, "assignee": None, "assignees": [],
            "milestone": None, "comments": len(item.comments), "created_at": _iso(item.created_at),
            "updated_at": _iso(item.updated_at), "closed_at": _iso(item.closed_at),
            "author_association": "OWNER", "active_lock_reason": None, "body": item.body,
        }
        if full:
            d["closed_by"] = self._user(item.closed_by)
        if item.pull:
            d["draft"] = item.pull.draft
            d["pull_request"] = {"url": f"{api}/pulls/{item.number}", "html_url": html,
                                 "diff_url": html + ".diff", "patch_url": html + ".patch",
                                 "merged_at": _iso(item.pull.merged_at)}
        return d

    def _comment_json(self, r: _Repo, item: _Item, c: _Comment) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        return {"id": c.id, "node_id": f"IC_{c.id}", "url": f"{api}/issues/comments/{c.id}",
                "html_url": f"{self.html_base}/{r.full_name}/issues/{item.number}#issuecomment-{c.id}",
                "issue_url": f"{api}/issues/{item.number}", "body": c.body, "user": self._user(c.user),
                "created_at": _iso(c.created_at), "updated_at": _iso(c.updated_at),
                "author_association": "OWNER"}

    def _commit_json(self, r: _Repo, c: Mapping[str, Any]) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        sha = c["sha"]
        return {
            "sha": sha, "node_id": f"C_{sha}", "url": f"{api}/commits/{sha}",
            "html_url": f"{self.html_base}/{r.full_name}/commit/{sha}",
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {"author": c["author"], "committer": c["committer"], "message": c["message"],
                       "tree": {"sha": c["tree"], "url": f"{api}/git/trees/{c['tree']}"},
                       "url": f"{api}/git/commits/{sha}", "comment_count": 0,
                       "verification": {"verified": False, "reason": "unsigned", "signature": None,
                                        "payload": None, "verified_at": None}},
            "author": None, "committer": None,
            "parents": [{"sha": x, "url": f"{api}/commits/{x}",
                         "html_url": f"{self.html_base}/{r.full_name}/commit/{x}"} for x in c["parents"]],
        }

    def _file_json(self, r: _Repo, f: Mapping[str, Any], ref: str) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        q = urllib.parse.quote(f["filename"])
        return {**f, "blob_url": f"{self.html_base}/{r.full_name}/blob/{ref}/{q}",
                "raw_url": f"{self.html_base}/{r.full_name}/raw/{ref}/{q}",
                "contents_url": f"{api}/contents/{q}?ref={ref}"}

    def _workflow_json(self, r: _Repo, wf: _Workflow) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        return {"id": wf.id, "node_id": f"W_{wf.id}", "name": wf.name, "path": f".github/workflows/{wf.file}",
                "state": "active", "created_at": _iso(wf.created_at), "updated_at": _iso(wf.created_at),
                "url": f"{api}/actions/workflows/{wf.id}",
                "html_url": f"{self.html_base}/{r.full_name}/blob/{r.default_branch}/.github/workflows/{wf.file}",
                "badge_url": f"{self.html_base}/{r.full_name}/workflows/{urllib.parse.quote(wf.name)}/badge.svg"}

    def _run_json(self, r: _Repo, run: _Run) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        url = f"{api}/actions/runs/{run.id}"
        simple = self._repo_json(r, None)
        return {
            "id": run.id, "name": run.workflow.name, "node_id": f"WFR_{run.id}",
            "head_branch": run.head_branch, "head_sha": run.head_sha,
            "path": f".github/workflows/{run.workflow.file}", "display_title": run.display_title,
            "run_number": run.run_number, "event": run.event, "status": run.status,
            "conclusion": run.conclusion, "workflow_id": run.workflow.id,
            "check_suite_id": run.id + 1, "check_suite_node_id": f"CS_{run.id + 1}",
            "url": url, "html_url": f"{self.html_base}/{r.full_name}/actions/runs/{run.id}",
            "pull_requests": [], "created_at": _iso(run.created_at), "updated_at": _iso(run.updated_at),
            "actor": self._user(run.actor), "triggering_actor": self._user(run.actor),
            "run_attempt": 1, "referenced_workflows": [], "run_started_at": _iso(run.run_started_at),
            "jobs_url": url + "/jobs", "logs_url": url + "/logs", "check_suite_url": f"{api}/check-suites/{run.id + 1}",
            "artifacts_url": url + "/artifacts", "cancel_url": url + "/cancel", "rerun_url": url + "/rerun",
            "previous_attempt_url": None, "workflow_url": f"{api}/actions/workflows/{run.workflow.id}",
            "head_commit": {"id": run.head_sha, "tree_id": _fake_sha("tree", run.head_sha), "message": "",
                            "timestamp": _iso(run.created_at),
                            "author": {"name": "Porttrack Test", "email": "test@porttrack.invalid"},
                            "committer": {"name": "Porttrack Test", "email": "test@porttrack.invalid"}},
            "repository": simple, "head_repository": simple,
        }

    def _artifact_json(self, a: _Artifact) -> dict:
        r = self._repo(a.repo)
        run = self._runs[a.run_id]
        api = f"{self.base_url}/repos/{r.full_name}"
        return {"id": a.id, "node_id": f"MDg6QXJ0aWZhY3Q{a.id}", "name": a.name, "size_in_bytes": len(a.data),
                "url": f"{api}/actions/artifacts/{a.id}", "archive_download_url": f"{api}/actions/artifacts/{a.id}/zip",
                "expired": False, "digest": "sha256:" + hashlib.sha256(a.data).hexdigest(),
                "created_at": _iso(a.created_at), "updated_at": _iso(a.created_at),
                "expires_at": _iso(a.created_at + dt.timedelta(days=90)),
                "workflow_run": {"id": run.id, "repository_id": r.id, "head_repository_id": r.id,
                                 "head_branch": run.head_branch, "head_sha": run.head_sha}}

    # ========================================================================= handlers

    def _h_rate_limit(self, ctx: _Ctx) -> _Reply:
        t = ctx.token
        assert t is not None
        core = {"limit": t.limit, "remaining": t.remaining, "reset": t.reset,
                "used": t.limit - t.remaining, "resource": "core"}
        res = {"core": core,
               "search": {"limit": 30, "remaining": 30, "reset": t.reset, "used": 0, "resource": "search"},
               "graphql": {"limit": 5000, "remaining": 5000, "reset": t.reset, "used": 0, "resource": "graphql"}}
        return _Reply(payload={"resources": res, "rate": core})

    def _h_user(self, ctx: _Ctx) -> _Reply:
        return _Reply(payload=self._user(ctx.login))

    def _h_repo(self, ctx: _Ctx, owner: str, name: str) -> _Reply:
        return _Reply(payload=self._repo_json(self._repo_for(owner, name), ctx.token, full=True))

    # -- pull requests
    def _h_pulls(self, ctx: _Ctx, owner: str, name: str) -> _Reply:
        r = self._repo_for(owner, name)
        state = ctx.args.get("state", "open")
        head, base = ctx.args.get("head"), ctx.args.get("base")
        items = [i for i in r.items.values() if i.pull is not None
                 and (state == "all" or i.state == state)
                 and (head is None or i.pull.head_label == head or (":" not in head and i.pull.head_ref == head))
                 and (base is None or i.pull.base_ref == base)]
        sort = ctx.args.get("sort", "created")
        key = {"updated": lambda i: (i.updated_at, i.number)}.get(sort, lambda i: (i.created_at, i.number))
        items.sort(key=key, reverse=ctx.args.get("direction", "desc") != "asc")
        page, headers = self._paginate(ctx, items)
        return _Reply(payload=[self._pull_json(r, i, ctx.token, listing=True) for i in page], headers=headers)

    def _pull_item(self, owner: str, name: str, n: str) -> tuple[_Repo, _Item]:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        if item.pull is None:
            raise _not_found()
        return r, item

    def _h_pull(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r, item = self._pull_item(owner, name, n)
        p = item.pull
        assert p is not None
        media = self._diff_media(ctx)
        if media:
            if r.git_dir is None:
                raise _HTTPError(406, "diff requested but the emulator repository has no linked git")
            base = self._merge_base(r, p.base_sha, p.head_sha) or p.base_sha
            return _Reply(payload=self._raw_diff(r, base, p.head_sha, media),
                          content_type=f"application/vnd.github.{media}; charset=utf-8")
        return _Reply(payload=self._pull_json(r, item, ctx.token), last_modified=item.updated_at)

    def _h_pull_files(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r, item = self._pull_item(owner, name, n)
        assert item.pull is not None
        files = [self._file_json(r, f, item.pull.head_sha) for f in self._pr_files(r, item.pull)][:3000]
        page, headers = self._paginate(ctx, files)
        return _Reply(payload=page, headers=headers)

    def _h_pull_commits(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r, item = self._pull_item(owner, name, n)
        assert item.pull is not None
        commits = [self._commit_json(r, c) for c in self._pr_commits(r, item.pull)]
        page, headers = self._paginate(ctx, commits)
        return _Reply(payload=page, headers=headers)

    # -- commits, compare, checks
    def _needs_git(self, r: _Repo, what: str) -> Path:
        if r.git_dir is None:
            self.errors.append(f"{what} on {r.full_name} needs fake.link_git({r.full_name!r}, path)")
            raise _not_found()
        return r.git_dir

    def _h_compare(self, ctx: _Ctx, owner: str, name: str, basehead: str) -> _Reply:
        r = self._repo_for(owner, name)
        git_dir = self._needs_git(r, "compare")
        if "..." not in basehead:
            raise _not_found()
        base_spec, head_spec = basehead.split("...", 1)
        base, head = self._resolve_spec(r, base_spec), self._resolve_spec(r, head_spec)
        if base is None or head is None:
            raise _not_found()
        env = self._git_env()

        def compute() -> dict:
            mb = self._merge_base(r, base, head)
            if mb is None:
                return {}
            ahead = int(_git(git_dir, "rev-list", "--count", f"{base}..{head}", env=env).stdout)
            behind = int(_git(git_dir, "rev-list", "--count", f"{head}..{base}", env=env).stdout)
            return {"mb": mb, "ahead": ahead, "behind": behind}
        info = self._cached(("compare", str(git_dir), base, head), compute)
        if not info:
            raise _HTTPError(404, f"No common ancestor between {base_spec} and {head_spec}.")
        media = self._diff_media(ctx)
        if media:
            return _Reply(payload=self._raw_diff(r, info["mb"], head, media),
                          content_type=f"application/vnd.github.{media}; charset=utf-8")
        ahead, behind = info["ahead"], info["behind"]
        status = ("identical" if ahead == behind == 0 else "ahead" if behind == 0
                  else "behind" if ahead == 0 else "diverged")
        commits = self._cached(("compare-commits", str(git_dir), base, head),
                               lambda: commits_from_git(git_dir, base, head, env=env))
        page, headers = self._paginate(ctx, commits, default=250, maximum=1000)
        files = self._cached(("files", str(git_dir), base, head),
                             lambda: files_from_git(git_dir, info["mb"], head, env=env))
        api = f"{self.base_url}/repos/{r.full_name}"
        html = f"{self.html_base}/{r.full_name}/compare/{base_spec}...{head_spec}"
        return _Reply(payload={
            "url": f"{api}/compare/{basehead}", "html_url": html,
            "permalink_url": f"{self.html_base}/{r.full_name}/compare/{base}...{head}",
            "diff_url": html + ".diff", "patch_url": html + ".patch",
            "base_commit": self._commit_json(r, self._commit_info(r, base) or self._synthetic_commit(base)),
            "merge_base_commit": self._commit_json(r, self._commit_info(r, info["mb"]) or self._synthetic_commit(info["mb"])),
            "status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
            "commits": [self._commit_json(r, c) for c in page],
            "files": [self._file_json(r, f, head) for f in files[:300]],
        }, headers=headers)

    def _h_commit(self, ctx: _Ctx, owner: str, name: str, ref: str) -> _Reply:
        r = self._repo_for(owner, name)
        self._needs_git(r, "GET commit")
        c = self._commit_info(r, ref)
        if c is None:
            raise _HTTPError(422, f"No commit found for SHA: {ref}")
        d = self._commit_json(r, c)
        parent = c["parents"][0] if c["parents"] else _git(
            r.git_dir, "hash-object", "-t", "tree", "/dev/null").stdout.decode().strip()  # type: ignore[arg-type]
        files = self._cached(("files", str(r.git_dir), parent, c["sha"]),
                             lambda: files_from_git(r.git_dir, parent, c["sha"], env=self._git_env()))  # type: ignore[arg-type]
        d["files"] = [self._file_json(r, f, c["sha"]) for f in files]
        adds, dels = sum(f["additions"] for f in files), sum(f["deletions"] for f in files)
        d["stats"] = {"total": adds + dels, "additions": adds, "deletions": dels}
        return _Reply(payload=d)

    def _checks_sha(self, r: _Repo, ref: str) -> str:
        if r.git_dir is None:
            return ref
        sha = self._try_resolve(r, ref)
        if sha is None:
            raise _HTTPError(422, f"No commit found for SHA: {ref}")
        return sha

    def _h_check_runs(self, ctx: _Ctx, owner: str, name: str, ref: str) -> _Reply:
        r = self._repo_for(owner, name)
        sha = self._checks_sha(r, ref)
        runs = r.check_runs.get(sha, [])
        if "check_name" in ctx.args:
            runs = [x for x in runs if x["name"] == ctx.args["check_name"]]
        if "status" in ctx.args:
            runs = [x for x in runs if x["status"] == ctx.args["status"]]
        page, headers = self._paginate(ctx, runs)
        out = [self._check_run_json(r, sha, x) for x in page]
        return _Reply(payload={"total_count": len(runs), "check_runs": out}, headers=headers)

    def _check_run_json(self, r: _Repo, sha: str, x: Mapping[str, Any]) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        app = {"id": 15368, "slug": "github-actions", "node_id": "MDM6QXBwMTUzNjg=", "name": "GitHub Actions",
               "owner": self._user("github"), "description": "", "external_url": f"{self.html_base}/features/actions",
               "html_url": f"{self.html_base}/apps/github-actions", "created_at": "2018-07-30T09:30:17Z",
               "updated_at": "2024-04-10T20:33:16Z", "permissions": {}, "events": []}
        html = f"{self.html_base}/{r.full_name}/runs/{x['id']}"
        return {"id": x["id"], "node_id": f"CR_{x['id']}", "head_sha": sha, "external_id": "",
                "url": f"{api}/check-runs/{x['id']}", "html_url": html, "details_url": x["details_url"] or html,
                "status": x["status"], "conclusion": x["conclusion"], "started_at": _iso(x["started_at"]),
                "completed_at": _iso(x["completed_at"]), "name": x["name"],
                "output": {"title": x["output"].get("title"), "summary": x["output"].get("summary"),
                           "text": x["output"].get("text"), "annotations_count": 0,
                           "annotations_url": f"{api}/check-runs/{x['id']}/annotations"},
                "check_suite": {"id": x["id"] + 1}, "app": app, "pull_requests": []}

    def _h_check_run(self, ctx: _Ctx, owner: str, name: str, cid: str) -> _Reply:
        r = self._repo_for(owner, name)
        for sha, runs in r.check_runs.items():
            for x in runs:
                if x["id"] == int(cid):
                    return _Reply(payload=self._check_run_json(r, sha, x))
        raise _not_found()

    def _h_status(self, ctx: _Ctx, owner: str, name: str, ref: str) -> _Reply:
        r = self._repo_for(owner, name)
        sha = self._checks_sha(r, ref)
        statuses = r.statuses.get(sha, [])
        states = {s["state"] for s in statuses}
        combined = ("failure" if states & {"failure", "error"} else
                    "pending" if not statuses or "pending" in states else "success")
        api = f"{self.base_url}/repos/{r.full_name}"
        page, headers = self._paginate(ctx, statuses, default=100)
        return _Reply(payload={
            "state": combined, "sha": sha, "total_count": len(statuses),
            "statuses": [{"url": f"{api}/statuses/{sha}", "avatar_url": None, "id": s["id"],
                          "node_id": f"SC_{s['id']}", "state": s["state"], "description": s["description"],
                          "target_url": s["target_url"], "context": s["context"],
                          "created_at": _iso(s["created_at"]), "updated_at": _iso(s["created_at"]),
                          "creator": self._user("porttrack-bot")} for s in page],
            "repository": self._repo_json(r, ctx.token), "commit_url": f"{api}/commits/{sha}",
            "url": f"{api}/commits/{sha}/status"}, headers=headers)

    # -- issues
    def _h_issues(self, ctx: _Ctx, owner: str, name: str) -> _Reply:
        r = self._repo_for(owner, name)
        state = ctx.args.get("state", "open")
        labels = [x.strip() for x in ctx.args.get("labels", "").split(",") if x.strip()]
        creator = ctx.args.get("creator")
        since = _parse_time(ctx.args["since"]) if "since" in ctx.args else None
        items = [i for i in r.items.values()
                 if (state == "all" or i.state == state) and all(x in i.labels for x in labels)
                 and (creator is None or i.user == creator) and (since is None or i.updated_at >= since)]
        sort = ctx.args.get("sort", "created")
        key = {"updated": lambda i: (i.updated_at, i.number),
               "comments": lambda i: (len(i.comments), i.number)}.get(sort, lambda i: (i.created_at, i.number))
        items.sort(key=key, reverse=ctx.args.get("direction", "desc") != "asc")
        page, headers = self._paginate(ctx, items)
        return _Reply(payload=[self._issue_json(r, i) for i in page], headers=headers)

    def _h_create_issue(self, ctx: _Ctx, owner: str, name: str) -> _Reply:
        r = self._repo_for(owner, name)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("title"), (str, int)) or str(body.get("title")).strip() == "":
            raise _validation("Issue", "title")
        now = self.now()
        item = _Item(next(self._ids), self._next_number(r), str(body["title"]), body.get("body"),
                     ctx.login or "", now, now, labels=self._ensure_labels(r, body.get("labels") or []))
        r.items[item.number] = item
        d = self._issue_json(r, item, full=True)
        return _Reply(201, d, headers={"Location": d["url"]})

    def _h_issue(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        return _Reply(payload=self._issue_json(r, item, full=True), last_modified=item.updated_at)

    def _h_edit_issue(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if "title" in body:
            if not body["title"]:
                raise _validation("Issue", "title")
            item.title = str(body["title"])
        if "body" in body:
            item.body = body["body"]
        if "labels" in body:
            item.labels = self._ensure_labels(r, body["labels"] or [])
        reason = body.get("state_reason")
        if reason is not None and reason not in ("completed", "not_planned", "reopened", "duplicate"):
            raise _validation("Issue", "state_reason", "invalid")
        if "state" in body:
            if body["state"] not in ("open", "closed"):
                raise _validation("Issue", "state", "invalid")
            if body["state"] == "closed" and item.state != "closed":
                item.state, item.closed_at, item.closed_by = "closed", self.now(), ctx.login
                item.state_reason = reason or "completed"
            elif body["state"] == "open" and item.state != "open":
                if item.pull is not None and item.pull.merged:
                    raise _HTTPError(422, "Validation Failed", errors=[
                        {"resource": "Issue", "code": "custom", "message": "merged pull requests cannot be reopened"}])
                item.state, item.closed_at, item.closed_by = "open", None, None
                item.state_reason = "reopened"
            elif reason is not None:
                item.state_reason = reason
        item.updated_at = self._bump(item.updated_at)
        return _Reply(payload=self._issue_json(r, item, full=True))

    def _h_comments(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        since = _parse_time(ctx.args["since"]) if "since" in ctx.args else None
        comments = [c for c in item.comments if since is None or c.updated_at >= since]
        page, headers = self._paginate(ctx, comments)
        return _Reply(payload=[self._comment_json(r, item, c) for c in page], headers=headers)

    def _h_create_comment(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("body"), str) or not body["body"]:
            raise _validation("IssueComment", "body")
        now = self.now()
        c = _Comment(next(self._ids), body["body"], ctx.login or "", now, now)
        item.comments.append(c)
        item.updated_at = self._bump(item.updated_at)
        d = self._comment_json(r, item, c)
        return _Reply(201, d, headers={"Location": d["url"]})

    def _find_comment(self, r: _Repo, cid: str) -> tuple[_Item, _Comment]:
        for item in r.items.values():
            for c in item.comments:
                if c.id == int(cid):
                    return item, c
        raise _not_found()

    def _h_comment(self, ctx: _Ctx, owner: str, name: str, cid: str) -> _Reply:
        r = self._repo_for(owner, name)
        item, c = self._find_comment(r, cid)
        return _Reply(payload=self._comment_json(r, item, c), last_modified=c.updated_at)

    def _h_edit_comment(self, ctx: _Ctx, owner: str, name: str, cid: str) -> _Reply:
        r = self._repo_for(owner, name)
        item, c = self._find_comment(r, cid)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if not isinstance(body.get("body"), str) or not body["body"]:
            raise _validation("IssueComment", "body")
        c.body, c.updated_at = body["body"], self._bump(c.updated_at)
        return _Reply(payload=self._comment_json(r, item, c))

    def _h_add_labels(self, ctx: _Ctx, owner: str, name: str, n: str) -> _Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        self._require_push(ctx)
        body = ctx.body
        labels = body.get("labels", []) if isinstance(body, dict) else (body or [])
        item.labels = self._ensure_labels(r, [*item.labels, *labels])
        item.updated_at = self._bump(item.updated_at)
        return _Reply(payload=[self._label_json(r, x) for x in item.labels])

    def _h_remove_label(self, ctx: _Ctx, owner: str, name: str, n: str, label: str) -> _Reply:
        r = self._repo_for(owner, name)
        item = self._item(r, n)
        self._require_push(ctx)
        if label not in item.labels:
            raise _HTTPError(404, "Label does not exist")
        item.labels.remove(label)
        item.updated_at = self._bump(item.updated_at)
        return _Reply(payload=[self._label_json(r, x) for x in item.labels])

    # -- actions
    def _workflow(self, r: _Repo, wf: str) -> _Workflow:
        for w in r.workflows.values():
            if w.file == wf or str(w.id) == wf:
                return w
        raise _not_found()

    def _h_workflows(self, ctx: _Ctx, owner: str, name: str) -> _Reply:
        r = self._repo_for(owner, name)
        wfs = list(r.workflows.values())
        page, headers = self._paginate(ctx, wfs)
        return _Reply(payload={"total_count": len(wfs), "workflows": [self._workflow_json(r, w) for w in page]},
                      headers=headers)

    def _h_workflow(self, ctx: _Ctx, owner: str, name: str, wf: str) -> _Reply:
        r = self._repo_for(owner, name)
        return _Reply(payload=self._workflow_json(r, self._workflow(r, wf)))

    def _h_dispatch(self, ctx: _Ctx, owner: str, name: str, wf: str) -> _Reply:
        r = self._repo_for(owner, name)
        workflow = self._workflow(r, wf)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        ref = body.get("ref")
        if not isinstance(ref, str) or not ref:
            raise _HTTPError(422, "Invalid request.\n\n\"ref\" wasn't supplied.")
        inputs = body.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise _HTTPError(422, "Invalid request.\n\nFor 'properties/inputs', it is not an object.")
        if len(inputs) > 25:
            raise _HTTPError(422, "you may only define up to 25 `inputs` for a `workflow_dispatch` event")
        if workflow.inputs is not None:
            unexpected = sorted(set(inputs) - set(workflow.inputs))
            if unexpected:
                raise _HTTPError(422, f"Unexpected inputs provided: {json.dumps(unexpected)}")
            for k, spec in workflow.inputs.items():
                if spec.get("required") and k not in inputs:
                    raise _HTTPError(422, f"Required input '{k}' not provided")
        branch = ref.removeprefix("refs/heads/")
        if r.git_dir is not None:
            head_sha = self._try_resolve(r, f"refs/heads/{branch}") or self._try_resolve(r, f"refs/tags/{branch}")
            if head_sha is None:
                raise _HTTPError(422, f"No ref found for: {ref}")
        else:
            head_sha = _fake_sha(r.full_name, ref)
        outcome = dict(self.on_dispatch(r.full_name, workflow.file, ref, dict(inputs)) or {}) \
            if self.on_dispatch else {}
        unknown = set(outcome) - {"conclusion", "artifacts", "polls", "display_title"}
        if unknown:
            raise ValueError(f"on_dispatch returned unknown keys {sorted(unknown)}")
        artifacts = {k: (make_zip(v) if isinstance(v, Mapping) else v)
                     for k, v in (outcome.get("artifacts") or {}).items()}
        title = outcome.get("display_title") or self._run_title(workflow, inputs)
        number = 1 + sum(1 for x in self._runs.values() if x.workflow is workflow)
        now = self.now()
        run = _Run(next(self._ids), r.full_name, workflow, number, ref, branch, head_sha, dict(inputs),
                   ctx.login or "", title, now, now, tuple(outcome.get("polls", self.run_schedule)),  # type: ignore[arg-type]
                   outcome.get("conclusion", "success"), artifacts)
        self._runs[run.id] = run
        self.dispatches.append({"repo": r.full_name, "workflow": workflow.file, "ref": ref,
                                "inputs": dict(inputs), "run_id": run.id, "actor": ctx.login})
        if body.get("return_run_details"):
            api = f"{self.base_url}/repos/{r.full_name}"
            return _Reply(200, {"workflow_run_id": run.id, "run_url": f"{api}/actions/runs/{run.id}",
                                "html_url": f"{self.html_base}/{r.full_name}/actions/runs/{run.id}"})
        return _Reply(204)

    @staticmethod
    def _run_title(wf: _Workflow, inputs: Mapping[str, Any]) -> str:
        if not wf.run_name:
            return wf.name
        return re.sub(r"\$\{\{\s*(?:github\.event\.)?inputs\.([A-Za-z0-9_-]+)\s*\}\}",
                      lambda m: str(inputs.get(m.group(1), "")), wf.run_name)

    def _observe(self, run: _Run) -> None:
        run.seen += 1
        self._settle_run(run)

    def _settle_run(self, run: _Run) -> None:
        queued, in_progress = run.polls
        status = ("queued" if run.seen <= queued else
                  "in_progress" if run.seen <= queued + in_progress else "completed")
        if status == run.status:
            return
        now = self.now()
        run.updated_at = self._bump(run.updated_at)
        if status in ("in_progress", "completed") and run.run_started_at is None:
            run.run_started_at = now
        run.status = status
        if status == "completed":
            run.conclusion = run.planned_conclusion
            for art_name, data in run.planned_artifacts.items():
                a = _Artifact(next(self._ids), run.id, run.repo, art_name, data, now)
                self._artifacts[a.id] = a
                run.artifacts.append(a.id)

    def _created_filter(self, spec: str) -> Callable[[dt.datetime], bool]:
        if ".." in spec:
            lo, hi = spec.split("..", 1)
            a = _parse_time(lo) if lo not in ("", "*") else None
            b = _parse_time(hi) if hi not in ("", "*") else None
            return lambda t: (a is None or t >= a) and (b is None or t <= b)
        for op, fn in ((">=", lambda t, x: t >= x), ("<=", lambda t, x: t <= x),
                       (">", lambda t, x: t > x), ("<", lambda t, x: t < x)):
            if spec.startswith(op):
                x = _parse_time(spec[len(op):])
                return lambda t, x=x, fn=fn: fn(t, x)
        x = _parse_time(spec)
        if len(spec.strip()) == 10:   # a bare date means that whole day
            assert x is not None
            return lambda t: x <= t < x + dt.timedelta(days=1)
        return lambda t: t == x

    def _h_runs(self, ctx: _Ctx, owner: str, name: str, wf: str | None = None) -> _Reply:
        r = self._repo_for(owner, name)
        workflow = self._workflow(r, wf) if wf is not None else None
        runs = [x for x in self._runs.values() if x.repo == r.full_name
                and (workflow is None or x.workflow is workflow)]
        for x in runs:
            self._observe(x)
        a = ctx.args
        created = self._created_filter(a["created"]) if "created" in a else None
        runs = [x for x in runs
                if ("event" not in a or x.event == a["event"]) and ("branch" not in a or x.head_branch == a["branch"])
                and ("actor" not in a or x.actor == a["actor"]) and ("head_sha" not in a or x.head_sha == a["head_sha"])
                and ("status" not in a or a["status"] in (x.status, x.conclusion))
                and (created is None or created(x.created_at))]
        runs.sort(key=lambda x: (x.created_at, x.id), reverse=True)
        page, headers = self._paginate(ctx, runs)
        return _Reply(payload={"total_count": len(runs), "workflow_runs": [self._run_json(r, x) for x in page]},
                      headers=headers)

    def _run_for(self, r: _Repo, run_id: str) -> _Run:
        run = self._runs.get(int(run_id))
        if run is None or run.repo != r.full_name:
            raise _not_found()
        return run

    def _h_run(self, ctx: _Ctx, owner: str, name: str, run: str) -> _Reply:
        r = self._repo_for(owner, name)
        x = self._run_for(r, run)
        self._observe(x)
        return _Reply(payload=self._run_json(r, x), last_modified=x.updated_at)

    def _h_run_artifacts(self, ctx: _Ctx, owner: str, name: str, run: str) -> _Reply:
        r = self._repo_for(owner, name)
        x = self._run_for(r, run)
        arts = [self._artifacts[i] for i in x.artifacts
                if "name" not in ctx.args or self._artifacts[i].name == ctx.args["name"]]
        page, headers = self._paginate(ctx, arts)
        return _Reply(payload={"total_count": len(arts), "artifacts": [self._artifact_json(a) for a in page]},
                      headers=headers)

    def _h_repo_artifacts(self, ctx: _Ctx, owner: str, name: str) -> _Reply:
        r = self._repo_for(owner, name)
        arts = sorted((a for a in self._artifacts.values() if a.repo == r.full_name
                       and ("name" not in ctx.args or a.name == ctx.args["name"])),
                      key=lambda a: a.id, reverse=True)
        page, headers = self._paginate(ctx, arts)
        return _Reply(payload={"total_count": len(arts), "artifacts": [self._artifact_json(a) for a in page]},
                      headers=headers)

    def _artifact_for(self, r: _Repo, aid: str) -> _Artifact:
        a = self._artifacts.get(int(aid))
        if a is None or a.repo != r.full_name:
            raise _not_found()
        return a

    def _h_artifact(self, ctx: _Ctx, owner: str, name: str, aid: str) -> _Reply:
        r = self._repo_for(owner, name)
        return _Reply(payload=self._artifact_json(self._artifact_for(r, aid)))

    def _h_artifact_zip(self, ctx: _Ctx, owner: str, name: str, aid: str) -> _Reply:
        r = self._repo_for(owner, name)
        a = self._artifact_for(r, aid)
        sig = hashlib.sha1(f"artifact:{a.id}:{a.repo}".encode()).hexdigest()[:20]
        return _Reply(302, None, headers={"Location": f"{self.base_url}/_blobs/artifacts/{a.id}/{sig}.zip"})

    def _h_blob(self, ctx: _Ctx, aid: str, sig: str) -> _Reply:
        a = self._artifacts.get(int(aid))
        if a is None or hashlib.sha1(f"artifact:{a.id}:{a.repo}".encode()).hexdigest()[:20] != sig:
            raise _HTTPError(403, "Server failed to authenticate the request.")
        return _Reply(payload=a.data, content_type="application/zip")


def _reason(status: int) -> str:
    from http import HTTPStatus
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


# --------------------------------------------------------------------------- standalone


@contextlib.contextmanager
def running_emulator(latency_s: float = 0.0, *, host: str = "127.0.0.1", port: int = 0,
                     seed_tokens: bool = True) -> Iterator[FakeGitHub]:
    """Start a threaded loopback server answering as a fresh FakeGitHub; stop it on exit.

    For benchmarks and scripts. Emulator problems are raised as AssertionError on a clean exit.
    """
    from pytest_httpserver import HTTPServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = HTTPServer(host, port, threaded=True)
    server.start()
    try:
        fake = FakeGitHub(server.url_for("/").rstrip("/"), latency_s=latency_s, seed_tokens=seed_tokens)
        fake.install(server)
        yield fake
        fake.check()
    finally:
        server.clear()
        server.stop()

