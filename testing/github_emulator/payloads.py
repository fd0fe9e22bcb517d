"""GitHub's JSON shapes, rendered from the state records per request: users, repositories,
labels, pull requests and their branches, issues, comments, commits, files, workflows, runs
and artifacts. Every `url` points at `base_url`, every `html_url` at `html_base` (PyGithub
asserts the host of URLs it follows). `make_zip` builds artifact archives.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import urllib.parse
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any

from testing.github_emulator.state import Artifact, Comment, Item, Repo, Run, Token, Workflow, fake_sha, iso, user_id


def make_zip(files: Mapping[str, bytes | str]) -> bytes:
    """A zip archive (deterministic timestamps) holding `files`, for artifacts."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            zf.writestr(info, data.encode() if isinstance(data, str) else data)
    return buf.getvalue()


class PayloadsMixin:
    """The renderers of FakeGitHub. Uses `_repo` (seeding.py) and `_pr_files`/`_pr_commits`
    (gitdata.py) for the PR's counts."""

    base_url: str
    html_base: str
    _repos: dict[str, Repo]
    _runs: dict[int, Run]

    def _user(self, login: str | None) -> dict | None:
        if not login:
            return None
        uid = user_id(login)
        return {"login": login, "id": uid, "node_id": f"U_{uid}",
                "avatar_url": f"{self.base_url}/_avatars/{uid}", "gravatar_id": "",
                "url": f"{self.base_url}/users/{login}", "html_url": f"{self.html_base}/{login}",
                "type": "Bot" if login.endswith("[bot]") else "User", "site_admin": False}

    def _repo_json(self, r: Repo, token: Token | None, *, full: bool = False) -> dict:
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
            "archived": False, "disabled": False, "created_at": iso(r.created_at),
            "updated_at": iso(r.created_at), "pushed_at": iso(r.created_at),
        }
        if token is not None:
            d["permissions"] = {"admin": token.admin, "maintain": token.admin, "push": token.push,
                                "triage": token.push, "pull": True}
        if full and r.fork_of and r.fork_of.lower() in self._repos:
            parent = self._repo_json(self._repos[r.fork_of.lower()], token)
            d["parent"] = d["source"] = parent
        return d

    def _label_json(self, r: Repo, name: str) -> dict:
        lid = zlib.crc32(f"{r.full_name}:{name}".encode())
        return {"id": lid, "node_id": f"LA_{lid}", "name": name, "color": r.label_colors.get(name, "ededed"),
                "default": False, "description": None,
                "url": f"{self.base_url}/repos/{r.full_name}/labels/{urllib.parse.quote(name)}"}

    def _branch_json(self, r: Repo, label: str, ref: str, sha: str, repo_name: str, token: Token | None) -> dict:
        other = self._repos.get(repo_name.lower())
        repo = self._repo_json(other, token) if other else {
            "name": repo_name.split("/")[-1], "full_name": repo_name, "url": f"{self.base_url}/repos/{repo_name}",
            "html_url": f"{self.html_base}/{repo_name}", "owner": self._user(repo_name.split("/")[0]),
            "fork": True, "private": False}
        return {"label": label, "ref": ref, "sha": sha, "user": self._user(label.split(":")[0]), "repo": repo}

    def _pull_json(self, r: Repo, item: Item, token: Token | None, *, listing: bool = False) -> dict:
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
            "active_lock_reason": None, "created_at": iso(item.created_at),
            "updated_at": iso(item.updated_at), "closed_at": iso(item.closed_at),
            "merged_at": iso(p.merged_at), "merge_commit_sha": p.merge_commit_sha,
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

    def _issue_json(self, r: Repo, item: Item, *, full: bool = False) -> dict:
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
            "milestone": None, "comments": len(item.comments), "created_at": iso(item.created_at),
            "updated_at": iso(item.updated_at), "closed_at": iso(item.closed_at),
            "author_association": "OWNER", "active_lock_reason": None, "body": item.body,
        }
        if full:
            d["closed_by"] = self._user(item.closed_by)
        if item.pull:
            d["draft"] = item.pull.draft
            d["pull_request"] = {"url": f"{api}/pulls/{item.number}", "html_url": html,
                                 "diff_url": html + ".diff", "patch_url": html + ".patch",
                                 "merged_at": iso(item.pull.merged_at)}
        return d

    def _comment_json(self, r: Repo, item: Item, c: Comment) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        return {"id": c.id, "node_id": f"IC_{c.id}", "url": f"{api}/issues/comments/{c.id}",
                "html_url": f"{self.html_base}/{r.full_name}/issues/{item.number}#issuecomment-{c.id}",
                "issue_url": f"{api}/issues/{item.number}", "body": c.body, "user": self._user(c.user),
                "created_at": iso(c.created_at), "updated_at": iso(c.updated_at),
                "author_association": "OWNER"}

    def _commit_json(self, r: Repo, c: Mapping[str, Any]) -> dict:
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

    def _file_json(self, r: Repo, f: Mapping[str, Any], ref: str) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        q = urllib.parse.quote(f["filename"])
        return {**f, "blob_url": f"{self.html_base}/{r.full_name}/blob/{ref}/{q}",
                "raw_url": f"{self.html_base}/{r.full_name}/raw/{ref}/{q}",
                "contents_url": f"{api}/contents/{q}?ref={ref}"}

    def _workflow_json(self, r: Repo, wf: Workflow) -> dict:
        api = f"{self.base_url}/repos/{r.full_name}"
        return {"id": wf.id, "node_id": f"W_{wf.id}", "name": wf.name, "path": f".github/workflows/{wf.file}",
                "state": "active", "created_at": iso(wf.created_at), "updated_at": iso(wf.created_at),
                "url": f"{api}/actions/workflows/{wf.id}",
                "html_url": f"{self.html_base}/{r.full_name}/blob/{r.default_branch}/.github/workflows/{wf.file}",
                "badge_url": f"{self.html_base}/{r.full_name}/workflows/{urllib.parse.quote(wf.name)}/badge.svg"}

    def _run_json(self, r: Repo, run: Run) -> dict:
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
            "pull_requests": [], "created_at": iso(run.created_at), "updated_at": iso(run.updated_at),
            "actor": self._user(run.actor), "triggering_actor": self._user(run.actor),
            "run_attempt": 1, "referenced_workflows": [], "run_started_at": iso(run.run_started_at),
            "jobs_url": url + "/jobs", "logs_url": url + "/logs", "check_suite_url": f"{api}/check-suites/{run.id + 1}",
            "artifacts_url": url + "/artifacts", "cancel_url": url + "/cancel", "rerun_url": url + "/rerun",
            "previous_attempt_url": None, "workflow_url": f"{api}/actions/workflows/{run.workflow.id}",
            "head_commit": {"id": run.head_sha, "tree_id": fake_sha("tree", run.head_sha), "message": "",
                            "timestamp": iso(run.created_at),
                            "author": {"name": "Porttrack Test", "email": "test@porttrack.invalid"},
                            "committer": {"name": "Porttrack Test", "email": "test@porttrack.invalid"}},
            "repository": simple, "head_repository": simple,
        }

    def _artifact_json(self, a: Artifact) -> dict:
        r = self._repo(a.repo)
        run = self._runs[a.run_id]
        api = f"{self.base_url}/repos/{r.full_name}"
        return {"id": a.id, "node_id": f"MDg6QXJ0aWZhY3Q{a.id}", "name": a.name, "size_in_bytes": len(a.data),
                "url": f"{api}/actions/artifacts/{a.id}", "archive_download_url": f"{api}/actions/artifacts/{a.id}/zip",
                "expired": False, "digest": "sha256:" + hashlib.sha256(a.data).hexdigest(),
                "created_at": iso(a.created_at), "updated_at": iso(a.created_at),
                "expires_at": iso(a.created_at + dt.timedelta(days=90)),
                "workflow_run": {"id": run.id, "repository_id": r.id, "head_repository_id": r.id,
                                 "head_branch": run.head_branch, "head_sha": run.head_sha}}
