"""What tests call directly: the emulator's clock, seeding state (tokens, repositories, linked
git, pull requests, issues, workflows), and reading back what was stored, logged and found
wrong (`problems()`, `check()`). Whatever reads or changes state holds the emulator's lock.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from testing.github_emulator.gitdata import run_git
from testing.github_emulator.state import Item, Pull, Repo, Run, Token, Workflow, fake_sha, parse_time, utcnow
from testing.github_emulator.transport import LoggedRequest


class SeedingMixin:
    """The test-facing methods of FakeGitHub."""

    strict: bool
    log: list[LoggedRequest]
    errors: list[str]
    unrouted: list[str]
    _lock: threading.RLock
    _ids: Iterator[int]
    _repos: dict[str, Repo]
    _tokens: dict[str, Token]
    _runs: dict[int, Run]
    _offset: dt.timedelta
    _frozen: dt.datetime | None

    # ---------------------------------------------------------------------------- clock

    def now(self) -> dt.datetime:
        if self._frozen is not None:
            return self._frozen
        return utcnow() + self._offset

    def freeze_time(self, when: dt.datetime | str | None = None) -> None:
        """Stop the emulator clock (at `when`, or now); timestamps it writes then stay put."""
        self._frozen = parse_time(when) if when is not None else self.now()

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

    # ---------------------------------------------------------------------------- seeding

    def add_token(self, token: str, *, push: bool = True, admin: bool = False,
                  login: str = "porttrack-bot", limit: int = 5000) -> None:
        with self._lock:
            self._tokens[token] = Token(login, push, admin, limit, limit, int(time.time()) + 3600)

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
            self._repos[full_name.lower()] = Repo(next(self._ids), owner, name, default_branch,
                                                  private, fork_of, self.now())

    def has_repo(self, full_name: str) -> bool:
        return full_name.lower() in self._repos

    def link_git(self, full_name: str, git_dir: Path) -> None:
        """Answer compare / commits / PR files and diffs for `full_name` from this repository."""
        git_dir = Path(git_dir)
        absolute = run_git(git_dir, "rev-parse", "--absolute-git-dir").stdout.decode().strip()
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
                item.created_at = parse_time(fields["created_at"])  # type: ignore[assignment]
            if "state" in fields:
                if fields["state"] not in ("open", "closed"):
                    raise ValueError("state is open or closed")
                item.state = fields["state"]
                if item.state == "open":
                    item.closed_at, p.merged, p.merged_at = None, False, None
            if fields.get("merged"):
                p.merged, item.state = True, "closed"
                p.merged_at = parse_time(fields.get("merged_at")) or p.merged_at or self.now()
            elif "merged" in fields:
                p.merged, p.merged_at = False, None
            elif "merged_at" in fields:
                p.merged_at = parse_time(fields["merged_at"])
                p.merged = p.merged_at is not None
            if "closed_at" in fields:
                item.closed_at = parse_time(fields["closed_at"])
            elif item.state == "closed" and item.closed_at is None:
                item.closed_at = p.merged_at or self.now()
            item.updated_at = (parse_time(fields["updated_at"]) if "updated_at" in fields  # type: ignore[assignment]
                               else self._bump(item.updated_at))
            return self._pull_json(r, item, None)

    def _new_pull(self, r: Repo, number: int, fields: Mapping[str, Any]) -> Item:
        head_ref = fields.get("head_ref", f"pr/{number}")
        head_repo = fields.get("head_repo", r.full_name)
        base_ref = fields.get("base_ref", r.default_branch)
        head_sha = fields.get("head_sha") or self._try_resolve(r, f"refs/pull/{number}/head") \
            or fake_sha(r.full_name, "pull", number)
        base_sha = fields.get("base_sha") or self._try_resolve(r, f"refs/heads/{base_ref}") \
            or fake_sha(r.full_name, "base", base_ref)
        now = self.now()
        item = Item(next(self._ids), number, f"PR {number}", "", "contributor",
                    parse_time(fields.get("created_at")) or now, now,
                     pull=Pull(head_sha, head_ref, f"{head_repo.split('/')[0]}:{head_ref}",
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
                item = Item(next(self._ids), number, f"Issue {number}", "", "porttrack-bot",
                            parse_time(fields.get("created_at")) or now, now)
                r.items[number] = item
            elif item.pull is not None:
                raise ValueError(f"#{number} is a pull request")
            for key in ("title", "body", "user", "state_reason", "closed_by"):
                if key in fields:
                    setattr(item, key, fields[key])
            if "labels" in fields:
                item.labels = self._ensure_labels(r, fields["labels"])
            if "created_at" in fields:
                item.created_at = parse_time(fields["created_at"])  # type: ignore[assignment]
            if "state" in fields:
                item.state = fields["state"]
                if item.state == "closed":
                    item.closed_at = parse_time(fields.get("closed_at")) or item.closed_at or self.now()
                    item.state_reason = fields.get("state_reason", item.state_reason or "completed")
                else:
                    item.closed_at = item.closed_by = None
            item.updated_at = (parse_time(fields["updated_at"]) if "updated_at" in fields  # type: ignore[assignment]
                               else self._bump(item.updated_at))
            return self._issue_json(r, item, full=True)

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
            wf = Workflow(next(self._ids), file, name or file.rsplit(".", 1)[0], decl, run_name,
                          self.now())
            r.workflows[file] = wf
            return wf.id

    # ---------------------------------------------------------------------------- inspection

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

    # ---------------------------------------------------------------------------- lookups

    def _repo(self, full_name: str) -> Repo:
        r = self._repos.get(full_name.lower())
        if r is None:
            raise KeyError(f"no repository {full_name} in the emulator (add_repo first)")
        return r

    def _next_number(self, r: Repo) -> int:
        return max(r.items, default=0) + 1

    def _ensure_labels(self, r: Repo, labels: Sequence[Any]) -> list[str]:
        names = []
        for lab in labels:
            name = lab["name"] if isinstance(lab, Mapping) else str(lab)
            r.label_colors.setdefault(name, hashlib.sha1(name.encode()).hexdigest()[:6])
            if name not in names:
                names.append(name)
        return names

