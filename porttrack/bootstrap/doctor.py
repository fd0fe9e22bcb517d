"""`porttrack doctor`: every precondition of the other commands, one line each, with the exact
command that fixes a broken one.

Checks, in order; a check whose input is broken is reported as not run rather than guessed:
workspace (tracks.yaml found and valid) · fork checkout · `upstream` remote points at
`upstream.repo` (a git failure said as one, never "no remote") · the fork branch (`fork.branch`
read as every command reads it, `git.repo.qualify_branch`, and which ref that is: a warning for a
remote-tracking one) · the upstream base ref exists · the commit-graph (a warning when it is missing,
has no changed-path Bloom filters, or lacks the fork branch's or the upstream base's tip) · token (where from, scopes, rate limit left; or
unauthenticated mode, which is fine for reading a public upstream) · GitHub reachable · quilt (only
a warning: the queue is also applied with `git am` and `porttrack apply`) · runner labels for each
target that runs a workflow gate job (a warning for targets with local jobs only).

`ok` and `warn` pass; `fail` and `not-run` do not. The command exits 0 only when every check passes.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from porttrack.common import secrets
from porttrack.common.errors import PorttrackError, without_userinfo
from porttrack.git import repo as gitrepo
from porttrack.workspace.files import TRACKS_FILE, Workspace

PASSING = ("ok", "warn")


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # ok | warn | fail | not-run
    detail: str
    fix: str = ""  # the command (or edit) that fixes it

    @property
    def passed(self) -> bool:
        return self.status in PASSING


def to_json(findings: list[Finding]) -> dict[str, Any]:
    return {"schema": "porttrack/doctor/v1", "passed": all(f.passed for f in findings),
            "checks": [{"check": f.check, "status": f.status, "detail": f.detail, "fix": f.fix} for f in findings]}


def diagnose(workspace: Callable[[], Workspace], config: Callable[[], Any], github: Callable[[str], Any]) -> list[Finding]:
    """Run every check. The three arguments open the doors lazily (the CLI context's), so a broken
    door is a finding, not an exception."""
    findings: list[Finding] = []
    try:
        ws = workspace()
        conf = config()
    except PorttrackError as exc:
        findings.append(Finding("workspace", "fail", _first_line(exc), _workspace_fix(exc)))
        return findings + [Finding(name, "not-run", "needs a valid workspace") for name in _LATER]
    findings.append(Finding("workspace", "ok", f"{ws.tracks_file} is valid ({len(conf.tracks)} track(s))"))
    findings += _fork_checks(conf)
    findings += _github_checks(conf, github)
    findings.append(_quilt())
    findings.append(_runner_labels(conf))
    return findings


_LATER = ("fork checkout", "upstream remote", "fork branch", "upstream base", "commit-graph", "token", "github", "quilt", "runner labels")
_NEEDS_FORK = ("upstream remote", "fork branch", "upstream base", "commit-graph")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _workspace_fix(exc: BaseException) -> str:
    if f"no {TRACKS_FILE}" in str(exc) or "no such file" in str(exc):
        return "porttrack init --upstream OWNER/NAME --fork OWNER/NAME   (or cd into the workspace / pass --workspace DIR)"
    if "must be a regular file" in str(exc) or "which does not exist" in str(exc) or "not a regular file" in str(exc):
        return f"replace it with a regular file: move it away and run porttrack init, or restore {TRACKS_FILE} from git"
    return f"edit {TRACKS_FILE} at the line named above"


# -- the fork checkout ---------------------------------------------------------------------------

def _fork_checks(conf: Any) -> list[Finding]:
    path = conf.fork_checkout()
    clone = f"porttrack init --upstream {conf.upstream.repo} --fork {conf.fork.repo}   (clones it), or --fork DIR"
    if path is None:
        return [Finding("fork checkout", "fail", "fork.checkout is not set in tracks.yaml", clone),
                *(Finding(n, "not-run", "needs the fork checkout") for n in _NEEDS_FORK)]
    try:
        repo = gitrepo.GitRepo.open(path)
    except PorttrackError as exc:
        fix = (f"git clone --filter=blob:none https://github.com/{conf.fork.repo}.git {path}"
               if not Path(path).exists() else f"point fork.checkout (or --fork) at a clone of {conf.fork.repo}")
        return [Finding("fork checkout", "fail", _first_line(exc).split(";")[0], fix),
                *(Finding(n, "not-run", "needs the fork checkout") for n in _NEEDS_FORK)]
    if repo.resolve(["HEAD"])["HEAD"] is None:  # a clone interrupted half-way: a .git, no files
        return [Finding("fork checkout", "fail", f"{repo.path} has no commit checked out (an interrupted clone?)",
                        f"git -C {path} fetch origin && git -C {path} checkout -B {conf.fork.branch} --track origin/{conf.fork.branch}"
                        f"   (or remove {path} and run porttrack init again)"),
                *(Finding(n, "not-run", "needs the fork checkout") for n in _NEEDS_FORK)]
    if repo.shallow:  # a warning: every answer found in the history holds; only "not found" may be the cut
        found = [Finding("fork checkout", "warn", f"{repo.path} is a shallow clone: verify-converged refuses to call a merge "
                         f"absent from the fork, since the missing history may hold it",
                         f"git -C {repo.path} fetch --unshallow REMOTE   (the upstream remote and the fork's own)")]
    else:
        found = [Finding("fork checkout", "ok", f"{repo.path}")]
    found.append(_upstream_remote(repo, conf))
    fork_ref = gitrepo.qualify_branch(repo, conf.fork.branch)
    if fork_ref is None:
        found.append(Finding("fork branch", "fail", f"fork.branch {conf.fork.branch!r} is not a branch of {repo.path}"
                             f" (looked for refs/heads/{conf.fork.branch}, refs/remotes/{conf.fork.branch}, "
                             f"refs/remotes/{gitrepo.FORK_REMOTE}/{conf.fork.branch}; a tag is not the branch)",
                             f"git -C {repo.path} fetch {gitrepo.FORK_REMOTE} {conf.fork.branch}:refs/remotes/{gitrepo.FORK_REMOTE}/{conf.fork.branch}"
                             f"   (or set fork.branch in {TRACKS_FILE})"))
    elif fork_ref == f"refs/heads/{conf.fork.branch}":
        found.append(Finding("fork branch", "ok", f"fork.branch {conf.fork.branch} -> {fork_ref}"))
    else:  # it works (every command reads this same ref), but nothing local moves it
        found.append(Finding("fork branch", "warn", f"fork.branch {conf.fork.branch} -> {gitrepo.branch_words(fork_ref, conf.fork.branch)}",
                             f"git -C {repo.path} branch --track {conf.fork.branch} {fork_ref.removeprefix('refs/remotes/')}"
                             if fork_ref.startswith(f"refs/remotes/{gitrepo.FORK_REMOTE}/") and "/" not in conf.fork.branch else ""))
    remote, base = conf.upstream.remote, conf.fork.upstream_base
    tips = repo.resolve([base, *([fork_ref] if fork_ref else [])])
    if tips[base] is not None:
        found.append(Finding("upstream base", "ok", f"{base} exists"))
    else:
        branch = base.split("/", 1)[1] if base.startswith(f"{remote}/") else conf.upstream.default_branch
        found.append(Finding("upstream base", "fail", f"{base} does not exist in the fork checkout",
                             f"git -C {repo.path} fetch {remote} {branch}"))
    return found + [_commit_graph(repo, [sha for sha in tips.values() if sha])]


def _upstream_remote(repo: gitrepo.GitRepo, conf: Any) -> Finding:
    remote = conf.upstream.remote
    # a mirror: the one tracks.yaml names; its password (https://user:PASSWORD@host) is never printed
    want = without_userinfo(conf.upstream_url() or f"https://github.com/{conf.upstream.repo}.git")
    try:
        url = repo.remote_url(remote)
    except PorttrackError as exc:  # git itself failed (exit 128): said, never taken for "no remote"
        return Finding("upstream remote", "fail", _first_line(exc), f"git -C {repo.path} remote -v   (to see what git says)")
    if url is None:
        return Finding("upstream remote", "fail", f"no remote {remote!r} in {repo.path}", f"git -C {repo.path} remote add {remote} {want}")
    shown = _without_userinfo(url)
    if _names_repo(shown, conf.upstream.repo) or (conf.upstream.url and shown == _without_userinfo(conf.upstream_url())):
        return Finding("upstream remote", "ok", f"{remote} -> {shown}")
    return Finding("upstream remote", "fail", f"{remote} -> {shown}, not {conf.upstream.repo}",
                   f"git -C {repo.path} remote set-url {remote} {want}")


def _commit_graph(repo: gitrepo.GitRepo, tips: list[str]) -> Finding:
    """A warning, not a failure: everything works without one, the history walks only take longer."""
    graph = repo.commit_graph(tips)
    fix = f"git -C {repo.path} commit-graph write --reachable --changed-paths"
    if graph.state == "ok":
        return Finding("commit-graph", "ok", f"{graph.commits} commits, with changed-path Bloom filters")
    why = {"missing": "none: history walks (verify-converged, churn lookups) are several times slower without one",
           "no-bloom": f"{graph.commits} commits but no changed-path Bloom filters (path-limited walks stay slow)",
           "stale": f"stale: it lacks {len(graph.missing_tips)} of the tips of the fork branch and upstream base"}[graph.state]
    return Finding("commit-graph", "warn", why, fix)


def _names_repo(url: str, repo: str) -> bool:
    """Does a remote URL (https, ssh, scp-like, or a local path ending in the name) name `repo`?"""
    tail = re.sub(r"(\.git)?/*$", "", url)
    return tail.lower().endswith("/" + repo.lower()) or tail.lower().endswith(":" + repo.lower())


def _without_userinfo(url: str) -> str:
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.I)


# -- GitHub ---------------------------------------------------------------------------------------

def _token_source() -> str | None:
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        if (os.environ.get(name) or "").strip():
            return name
    return "gh auth token" if secrets.resolve_token() else None


def _github_checks(conf: Any, github: Callable[[str], Any]) -> list[Finding]:
    source = _token_source()
    try:
        limit = github(conf.upstream.repo).rate_limit()
    except PorttrackError as exc:
        token = Finding("token", "ok" if source else "warn",
                        f"from {source}" if source else "none: unauthenticated mode (public reads only; writes need GITHUB_TOKEN or GH_TOKEN)",
                        "" if source else "export GITHUB_TOKEN=…   (only for --post and gate workflows)")
        return [token, Finding("github", "fail", secrets.redact(_first_line(exc)),
                               "check the network, or GITHUB_API_URL / --api-url for GitHub Enterprise")]
    left = f"{limit.remaining}/{limit.limit} requests left this hour" if limit.remaining is not None else "rate limit not stated"
    if source:
        scopes = "scopes not stated (fine-grained or app token)" if not limit.scopes else "scopes " + ", ".join(limit.scopes)
        token = Finding("token", "ok", f"from {source}; {scopes}; {left}")
    else:
        token = Finding("token", "warn", f"none: unauthenticated mode, {left} (public reads only; 304 answers are free)",
                        "export GITHUB_TOKEN=…   (needed for --post, gate workflows, and a 5,000/hour budget)")
    exhausted = limit.remaining == 0
    return [token, Finding("github", "fail" if exhausted else "ok",
                           ("rate limit exhausted" if exhausted else f"reachable at {github(conf.upstream.repo).api_url}"),
                           "wait for the reset, or set a token" if exhausted else "")]


# -- tools and runners ------------------------------------------------------------------------------

def _quilt() -> Finding:
    if shutil.which("quilt"):
        return Finding("quilt", "ok", "quilt is installed (patches/ works with `quilt push -a`)")
    return Finding("quilt", "warn", "quilt is not installed: only needed to use patches/ with quilt",
                   "apt-get install quilt   (brew install quilt; dnf install quilt)")


def _runner_labels(conf: Any) -> Finding:
    """A target that a workflow gate job runs on needs runner labels (else the job cannot be
    placed on that machine); for local jobs they are optional."""
    needed = {target for tid in conf.tracks for target in conf.gate_targets(tid)
              if conf.tracks[tid].gate is not None and conf.tracks[tid].gate.job.workflow is not None}
    bare = [tid for tid, target in conf.targets.items() if not target.runner_labels]
    missing = [tid for tid in bare if tid in needed]
    if missing:
        return Finding("runner labels", "fail", f"targets {', '.join(missing)} run workflow gate jobs but have no runner_labels",
                       f"add `runner_labels: [self-hosted, …]` under targets.{missing[0]} in {TRACKS_FILE}")
    if bare:
        return Finding("runner labels", "warn", f"no runner_labels for {', '.join(bare)} (only local gate jobs there)",
                       f"add `runner_labels: [self-hosted, …]` under targets.{bare[0]} in {TRACKS_FILE}")
    return Finding("runner labels", "ok", f"every target has runner labels ({', '.join(conf.targets)})")
