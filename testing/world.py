"""An upstream git repository and the GitHub emulator, changed together.

`World` is what a porttrack end-to-end test stands on: PRs opened, updated, force-pushed and
merged in real git (with `refs/pull/N/head`) are reflected in the emulator's pull request objects
(head/base SHAs, state, merge commit, files and commits computed from the real diff), and a fork
clone is ready for porttrack to work in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testing.gitfixtures import FileValue, Upstream, clone_fork, fork_commit, git
from testing.github_emulator import DEFAULT_TOKEN, FakeGitHub, commits_from_git, files_from_git

UPSTREAM_REPO = "vllm-project/vllm"
FORK_REPO = "randomvariable/vllm"

__all__ = ["FORK_REPO", "UPSTREAM_REPO", "World"]


class World:
    """Upstream repo + emulator + fork clone, kept consistent.

    Attributes: fake, upstream (testing.gitfixtures.Upstream), fork (Path of the clone),
    upstream_repo / fork_repo (owner/name), token (a push-capable token the emulator knows).
    """

    def __init__(self, tmp_path: Path, fake: FakeGitHub, *, upstream_repo: str = UPSTREAM_REPO,
                 fork_repo: str = FORK_REPO, contributor: str = "contributor",
                 maintainer: str = "maintainer") -> None:
        self.fake = fake
        self.upstream_repo, self.fork_repo = upstream_repo, fork_repo
        self.contributor, self.maintainer = contributor, maintainer
        self.token = DEFAULT_TOKEN
        root = Path(tmp_path) / "world"
        self.upstream = Upstream(root / "upstream")
        self.fork = clone_fork(self.upstream, root / "fork")
        if not fake.has_repo(upstream_repo):
            fake.add_repo(upstream_repo, default_branch="main")
        if not fake.has_repo(fork_repo):
            fake.add_repo(fork_repo, default_branch="main", fork_of=upstream_repo)
        fake.link_git(upstream_repo, self.upstream.path)
        fake.link_git(fork_repo, self.fork)
        self.stacked_on: dict[int, int] = {}   # PR -> the PR it was branched from

    # ------------------------------------------------------------------- environment
    def cli_env(self) -> dict[str, str]:
        """Variables that point a porttrack subprocess at the emulator."""
        return {"GITHUB_TOKEN": self.token, "GITHUB_API_URL": self.fake.base_url}

    # ------------------------------------------------------------------------ PRs
    def open_pr(self, number: int, files: Mapping[str, FileValue], title: str, body: str = "",
                base: str = "main", stacked_on: int | None = None, *, draft: bool = False,
                labels: list[str] | None = None, message: str | None = None) -> str:
        """Open PR `number` against `base`. stacked_on=M branches from PR M's head instead (the
        PR then also shows M's changes, as on GitHub) and adds "Depends on #M" to the body
        unless it already mentions #M. Returns the head SHA."""
        start = None
        if stacked_on is not None:
            start = self.upstream.head(stacked_on)
            self.stacked_on[number] = stacked_on
            if f"#{stacked_on}" not in body:
                body = (body + "\n\n" if body else "") + f"Depends on #{stacked_on}"
        head = self.upstream.open_pr(number, files, title=title, base=base, message=message, start=start)
        fields: dict[str, Any] = {"title": title, "body": body, "state": "open", "draft": draft,
                                  "user": self.contributor, "base_ref": base}
        if labels is not None:
            fields["labels"] = labels
        self._sync(number, **fields)
        return head

    def append(self, number: int, files: Mapping[str, FileValue], message: str | None = None) -> str:
        sha = self.upstream.append(number, files, message)
        self._sync(number)
        return sha

    def force_push(self, number: int, files: Mapping[str, FileValue], message: str | None = None,
                   *, rebase: bool = False, keep: bool = True) -> str:
        sha = self.upstream.force_push(number, files, message, rebase=rebase, keep=keep)
        self._sync(number)
        return sha

    def squash_merge(self, number: int, message: str | None = None) -> str:
        sha = self.upstream.squash_merge(number, message)
        self.fake.put_pull(self.upstream_repo, number, merged=True, merge_commit_sha=sha,
                           merged_by=self.maintainer)
        return sha

    def rebase_merge(self, number: int) -> str:
        sha = self.upstream.rebase_merge(number)
        self.fake.put_pull(self.upstream_repo, number, merged=True, merge_commit_sha=sha,
                           merged_by=self.maintainer)
        return sha

    def merge(self, number: int, message: str | None = None) -> str:
        sha = self.upstream.merge(number, message)
        self.fake.put_pull(self.upstream_repo, number, merged=True, merge_commit_sha=sha,
                           merged_by=self.maintainer)
        return sha

    def close(self, number: int) -> None:
        self.upstream.close(number)
        self.fake.put_pull(self.upstream_repo, number, state="closed", merged=False)

    def head(self, number: int) -> str:
        return self.upstream.head(number)

    def pr_files(self, number: int) -> list[dict]:
        """The files endpoint's items for the PR, from the real diff (merge base..head)."""
        base_sha, head = self._base_sha(number), self.head(number)
        mb = git(self.upstream.path, "merge-base", base_sha, head)
        return files_from_git(self.upstream.path, mb, head)

    def pr_commits(self, number: int) -> list[str]:
        """SHAs of the PR's commits (head not in base), oldest first."""
        return [c["sha"] for c in commits_from_git(self.upstream.path, self._base_sha(number), self.head(number))]

    # ----------------------------------------------------------------------- fork
    def fork_commit(self, files: Mapping[str, FileValue], message: str) -> str:
        return fork_commit(self.fork, files, message)

    def rebase_fork(self) -> str:
        """Fetch upstream and rebase the fork's current branch onto upstream/main."""
        git(self.fork, "fetch", "-q", "upstream")
        git(self.fork, "rebase", "-q", "upstream/main")
        return git(self.fork, "rev-parse", "HEAD")

    # -------------------------------------------------------------------- internal
    def _base_sha(self, number: int) -> str:
        pr = self.fake.pull(self.upstream_repo, number)
        return pr["base"]["sha"]

    def _sync(self, number: int, **fields: Any) -> None:
        # base.sha is the target branch tip as of this push, like GitHub records it; files and
        # commits are computed here once so the emulator answers them without running git
        rec = self.upstream.pr(number)
        base_sha, head = self.upstream.tip(rec.base), rec.head
        mb = git(self.upstream.path, "merge-base", base_sha, head)
        self.fake.put_pull(
            self.upstream_repo, number, head_sha=head, head_ref=rec.branch, base_sha=base_sha,
            files=files_from_git(self.upstream.path, mb, head),
            commits=commits_from_git(self.upstream.path, base_sha, head), **fields)
