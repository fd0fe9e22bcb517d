"""Repository routes: the repository itself (default branch, fork parent, the token's
permissions) and compare, answered from the linked git repository."""

from __future__ import annotations

from pathlib import Path

from testing.github_emulator.gitdata import commits_from_git, files_from_git, run_git
from testing.github_emulator.state import Repo
from testing.github_emulator.transport import REPO, Ctx, HTTPError, Reply, not_found

ROUTES = [
    ("GET", REPO, "_h_repo"),
    ("GET", REPO + r"/compare/(?P<basehead>.+)", "_h_compare"),
]


class ReposHandlers:
    base_url: str
    html_base: str
    errors: list[str]

    def _h_repo(self, ctx: Ctx, owner: str, name: str) -> Reply:
        return Reply(payload=self._repo_json(self._repo_for(owner, name), ctx.token, full=True))

    def _needs_git(self, r: Repo, what: str) -> Path:
        if r.git_dir is None:
            self.errors.append(f"{what} on {r.full_name} needs fake.link_git({r.full_name!r}, path)")
            raise not_found()
        return r.git_dir

    def _h_compare(self, ctx: Ctx, owner: str, name: str, basehead: str) -> Reply:
        r = self._repo_for(owner, name)
        git_dir = self._needs_git(r, "compare")
        if "..." not in basehead:
            raise not_found()
        base_spec, head_spec = basehead.split("...", 1)
        base, head = self._resolve_spec(r, base_spec), self._resolve_spec(r, head_spec)
        if base is None or head is None:
            raise not_found()
        info = self._cached(("compare", str(git_dir), base, head), lambda: self._counts(r, git_dir, base, head))
        if not info:
            raise HTTPError(404, f"No common ancestor between {base_spec} and {head_spec}.")
        ahead, behind = info["ahead"], info["behind"]
        status = ("identical" if ahead == behind == 0 else "ahead" if behind == 0
                  else "behind" if ahead == 0 else "diverged")
        env = self._git_env()
        commits = self._cached(("compare-commits", str(git_dir), base, head),
                               lambda: commits_from_git(git_dir, base, head, env=env))
        page, headers = self._paginate(ctx, commits, default=250, maximum=1000)
        files = self._cached(("files", str(git_dir), base, head),
                             lambda: files_from_git(git_dir, info["mb"], head, env=env))
        api = f"{self.base_url}/repos/{r.full_name}"
        html = f"{self.html_base}/{r.full_name}/compare/{base_spec}...{head_spec}"
        return Reply(payload={
            "url": f"{api}/compare/{basehead}", "html_url": html,
            "permalink_url": f"{self.html_base}/{r.full_name}/compare/{base}...{head}",
            "diff_url": html + ".diff", "patch_url": html + ".patch",
            "base_commit": self._commit_json(r, self._commit_info(r, base) or self._synthetic_commit(base)),
            "merge_base_commit": self._commit_json(r, self._commit_info(r, info["mb"]) or self._synthetic_commit(info["mb"])),
            "status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
            "commits": [self._commit_json(r, c) for c in page],
            "files": [self._file_json(r, f, head) for f in files[:300]],
        }, headers=headers)

    def _counts(self, r: Repo, git_dir: Path, base: str, head: str) -> dict:
        """Merge base and commits ahead/behind; {} when the two share no history."""
        mb = self._merge_base(r, base, head)
        if mb is None:
            return {}
        env = self._git_env()
        ahead = int(run_git(git_dir, "rev-list", "--count", f"{base}..{head}", env=env).stdout)
        behind = int(run_git(git_dir, "rev-list", "--count", f"{head}..{base}", env=env).stdout)
        return {"mb": mb, "ahead": ahead, "behind": behind}
