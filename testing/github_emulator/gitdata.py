"""Git queries behind the emulator's answers: commits and changed files read from real
repositories linked with `FakeGitHub.link_git`.

`commits_from_git` and `files_from_git` are public (testing.world uses them to seed PRs);
`GitMixin` resolves refs across the linked repositories (one shared object store, like a
GitHub fork network) and caches what it computed, since objects never change.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from testing.github_emulator.state import Pull, Repo, fake_sha, iso, parse_time

HEX40 = re.compile(r"[0-9a-f]{40}")


def run_git(git_dir: Path, *args: str, env: Mapping[str, str] | None = None,
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
    out = run_git(git_dir, *args, env=env).stdout.decode("utf-8", "replace")
    commits = []
    for rec in out.split("\x1e"):
        rec = rec.lstrip("\n")
        if not rec:
            continue
        sha, tree, parents, an, ae, at, cn, ce, ct, msg = rec.split("\x00", 9)
        commits.append({
            "sha": sha, "tree": tree, "parents": parents.split(),
            "author": {"name": an, "email": ae, "date": iso(parse_time(int(at)))},
            "committer": {"name": cn, "email": ce, "date": iso(parse_time(int(ct)))},
            "message": msg.rstrip("\n"),
        })
    return commits


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}


def files_from_git(git_dir: Path, base: str, head: str, *,
                   env: Mapping[str, str] | None = None) -> list[dict]:
    """The files endpoint's items for the diff `base`..`head` (use the merge base as `base`):
    filename, status, additions, deletions, changes, sha, patch (hunks only, as GitHub sends;
    absent for binary files), previous_filename for renames."""
    raw = run_git(git_dir, "diff", "--raw", "-z", "-M", "--no-abbrev", base, head, "--", env=env).stdout
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
    patch = run_git(git_dir, "-c", "core.quotePath=false", "diff", "-M", "--no-color", "--no-ext-diff",
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


class GitMixin:
    """Ref resolution and cached git answers for FakeGitHub (whose `__init__` sets these)."""

    _repos: dict[str, Repo]
    _git_cache: dict[tuple, Any]

    def _git_env(self) -> dict[str, str]:
        # every linked repository's objects are visible, like GitHub's shared fork network
        dirs = [r.objects_dir for r in self._repos.values() if r.objects_dir]
        return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(dirs)} if dirs else {}

    def _try_resolve(self, r: Repo, ref: str) -> str | None:
        if r.git_dir is None or ref.startswith("-"):
            return None
        if HEX40.fullmatch(ref) and ("known", ref) in self._git_cache:
            return ref          # objects never disappear: a SHA seen once stays valid
        p = run_git(r.git_dir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
                 env=self._git_env(), check=False)
        if p.returncode:
            return None
        sha = p.stdout.decode().strip()
        self._git_cache[("known", sha)] = True
        return sha or None

    def _resolve_spec(self, r: Repo, spec: str) -> str | None:
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

    def _merge_base(self, r: Repo, a: str, b: str) -> str | None:
        assert r.git_dir is not None
        p = run_git(r.git_dir, "merge-base", a, b, env=self._git_env(), check=False)
        return p.stdout.decode().strip() or None

    def _pr_files(self, r: Repo, p: Pull) -> list[dict]:
        if p.files is not None:
            return [{"status": "modified", "additions": 0, "deletions": 0, "changes": 0,
                     "sha": fake_sha(f.get("filename")), **f} for f in p.files]
        if r.git_dir is None or not self._try_resolve(r, p.head_sha):
            return []
        return self._cached(("files", str(r.git_dir), p.base_sha, p.head_sha), lambda: files_from_git(
            r.git_dir, self._merge_base(r, p.base_sha, p.head_sha) or p.base_sha, p.head_sha,  # type: ignore[arg-type]
            env=self._git_env()))

    def _pr_commits(self, r: Repo, p: Pull) -> list[dict]:
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

    def _commit_info(self, r: Repo, sha: str) -> dict | None:
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
        return {"sha": sha, "tree": fake_sha("tree", sha), "parents": [], "author": person,
                "committer": person, "message": f"commit {sha[:7]}"}
