"""Forks built from real vLLM history, for tests, benchmarks and proofs of `verify-converged`.

Two sources of real upstream history:

- the slice bundle `../shared/data/vllm-slice.bundle` (beside a clone of this repository; real
  commits of the 30 paths the tracked PRs touch, ids rewritten: its README maps the merges), for
  CI tests;
- the full vLLM repository (upstream main to 2026-08-17, 20,050 commits), a bare git directory
  whose path is given to the benchmark or proof (never committed), for speed and the proof.

    up = upstream_from_bundle(bundle, tmp / "upstream.git")      # or upstream_from_repo(path, ...)
    fork = make_fork(up, tmp / "fork", main=up_tip)               # a work tree sharing up's objects
    ws = make_workspace(..., fork=fork)                           # testing.workspace
    record_merges(ws.root, {46076: sha, ...})                     # state/upstream.json as status leaves it

The fork is a non-bare repository whose objects come from the upstream one by `alternates` (no
copy of a 300 MB pack); its `refs/remotes/upstream/main` is upstream's main and its branches are
whatever the caller makes (`branch`, `commit_on`). Nothing here checks out files: `verify-converged`
reads commits and blobs only.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Mapping

REPO_ROOT = Path(__file__).resolve().parents[1]
SLICE_BUNDLE = REPO_ROOT.parent / "shared" / "data" / "vllm-slice.bundle"

# The squash merges in the slice bundle (its README), and on the full history (DESIGN.md).
SLICE_MERGES = {
    46076: "c15608c86857b4a91affcd45381570ff2be7df60",
    46849: "8a3064361a90deee69dcd8100b427a7bd1b594e6",
    48407: "aadab92253eec07de8560da322fdfede049bacd5",
}
SLICE_TIP = "ff6f5d1ca088b3a58a98941013bd833402926776"
FULL_MERGES = {46076: "c5200d3565", 46849: "a311916a29", 48407: "ba702e978e"}
TITLES = {
    46076: "[Attention][DSA] support dcp for FLASHINFER_MLA_SPARSE",
    46849: "[MRV2][Spec] Fuse AR speculator multi-step decodes back into one CUDA graph",
    48407: "[Attention] Skip sparse indexer scoring for dense short prefills",
    46514: "[Attention][MLA] FlashMLA sparse: DCP on the fp8_ds_mla mixed-batch path + MTP",
}
_IDENTITY = {"GIT_AUTHOR_NAME": "fork dev", "GIT_AUTHOR_EMAIL": "dev@fork.invalid",
             "GIT_COMMITTER_NAME": "fork dev", "GIT_COMMITTER_EMAIL": "dev@fork.invalid",
             "GIT_AUTHOR_DATE": "2026-08-20T00:00:00Z", "GIT_COMMITTER_DATE": "2026-08-20T00:00:00Z"}


def git(repo: Path, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env={**os.environ, **_IDENTITY, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} (in {repo}): exit {proc.returncode}: {proc.stderr.decode()[-800:]}")
    return proc.stdout.decode("utf-8", "surrogateescape").rstrip("\n")


def slice_bundle() -> Path:
    """The slice bundle; a clear failure (never a skip) when it is not beside this checkout."""
    if not SLICE_BUNDLE.is_file():
        raise FileNotFoundError(f"the real-history slice {SLICE_BUNDLE} is missing: CI keeps ../shared/data beside the clone "
                                f"(see ../shared/data/README.md)")
    return SLICE_BUNDLE


def upstream_from_bundle(bundle: Path, dest: Path) -> Path:
    """A bare clone of the bundle with HEAD = refs/heads/main."""
    subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(dest)], check=True, capture_output=True)
    git(dest, "symbolic-ref", "HEAD", "refs/heads/main")
    return dest


def make_fork(upstream: Path, dest: Path, main: str, *, upstream_main: str | None = None) -> Path:
    """A fork checkout (a work tree, nothing checked out) sharing `upstream`'s objects: branch
    `main` at `main` (a name upstream resolves), `refs/remotes/upstream/main` at `upstream_main` (default: upstream's main)."""
    up_git = Path(git(upstream, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    subprocess.run(["git", "init", "-q", "-b", "main", str(dest)], check=True, capture_output=True)
    (dest / ".git" / "objects" / "info" / "alternates").write_text(str(up_git / "objects") + "\n")
    git(dest, "remote", "add", "upstream", str(up_git))
    tip = upstream_main or git(upstream, "rev-parse", "refs/heads/main")
    git(dest, "update-ref", "refs/remotes/upstream/main", git(upstream, "rev-parse", tip))
    git(dest, "update-ref", "refs/heads/main", git(upstream, "rev-parse", main))
    return dest


def commit_tree(fork: Path, parent: str, tree: str, message: str) -> str:
    return git(fork, "commit-tree", tree, "-p", parent, "-m", message)


def cherry_pick(fork: Path, onto: str, commit: str, message: str | None = None) -> str:
    """`commit`'s change (against its first parent) as a new commit on `onto`, made with a scratch
    index (`git apply --cached --3way`); no work tree is touched."""
    index = fork / ".git" / f"pick-{os.getpid()}.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(fork, "read-tree", onto, env=env)
        patch = subprocess.run(["git", "-C", str(fork), "diff", "--binary", "--full-index", f"{commit}^", commit],
                               capture_output=True, check=True).stdout
        git(fork, "apply", "--cached", "--3way", "-", input=patch, env=env)
        tree = git(fork, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)
    return commit_tree(fork, onto, tree, message or git(fork, "log", "-1", "--format=%B", commit))


def apply_change(fork: Path, onto: str, patch: bytes, message: str, edit=None, parents: tuple[str, ...] = ()) -> str:
    """A commit on `onto` (and `parents` after it, for a merge) whose tree is `onto`'s with `patch`
    applied (`git apply --cached --3way`), then `edit(path, bytes) -> bytes | None` run on every
    file the patch touched (a changed result is written back: a change made "by hand")."""
    from porttrack.diff import hunks as hunks_mod

    index = fork / ".git" / f"change-{os.getpid()}.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(fork, "read-tree", onto, env=env)
        if patch:
            git(fork, "apply", "--cached", "--3way", "-", input=patch, env=env)
        if edit is not None:
            for fd in hunks_mod.parse_diff(patch):
                if fd.status == "deleted":
                    continue
                listed = git(fork, "ls-files", "-s", "--", fd.path, env=env)
                if not listed:
                    continue
                mode, blob = listed.split()[:2]
                data = subprocess.run(["git", "-C", str(fork), "cat-file", "blob", blob], capture_output=True, check=True).stdout
                changed = edit(fd.path, data)
                if changed is not None and changed != data:
                    new = git(fork, "hash-object", "-w", "--stdin", input=changed)
                    git(fork, "update-index", "--cacheinfo", f"{mode},{new},{fd.path}", env=env)
        tree = git(fork, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)
    args = ["commit-tree", tree, "-p", onto]
    for p in parents:
        args += ["-p", p]
    return git(fork, *args, "-m", message)


def diff(fork: Path, old: str, new: str, *paths: str) -> bytes:
    return subprocess.run(["git", "-C", str(fork), "diff", "--binary", "--full-index", old, new, "--", *paths],
                          capture_output=True, check=True).stdout


def hand_port(fork: Path, onto: str, commit: str, keep, message: str) -> str:
    """Part of `commit`'s change as a new commit on `onto`: the hunks for which `keep(path, index)`
    is true (index: the hunk's position in its file), applied in a scratch index."""
    from porttrack.diff import hunks as hunks_mod

    diff = subprocess.run(["git", "-C", str(fork), "diff", "--binary", "--full-index", f"{commit}^", commit],
                          capture_output=True, check=True).stdout
    selection = []
    for fd in hunks_mod.parse_diff(diff):
        picked = [h for i, h in enumerate(fd.hunks) if keep(fd.path, i)]
        if picked:
            selection.append((fd, picked))
    index = fork / ".git" / f"port-{os.getpid()}.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(fork, "read-tree", onto, env=env)
        if selection:
            git(fork, "apply", "--cached", "-", input=hunks_mod.build_patch(selection), env=env)
        tree = git(fork, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)
    return commit_tree(fork, onto, tree, message)


def record_merges(ws_root: Path, merges: Mapping[int, str], titles: Mapping[int, str] | None = None) -> Path:
    """state/upstream.json as a live `status` leaves it once these PRs merged (merges are final, so
    verify-converged reads them from here and asks GitHub nothing)."""
    now = "2026-08-25T00:00:00Z"
    prs = {}
    for pr, merge in merges.items():
        prs[str(pr)] = {
            "number": pr, "title": (titles or TITLES).get(pr, f"PR {pr}"), "author": "upstream", "state": "merged",
            "html_url": "", "created_at": None, "updated_at": None, "merged_at": "2026-07-28T16:17:22Z",
            "closed_at": None, "merge_commit_sha": merge, "head_sha": None, "head_ref": None, "base_ref": "main",
            "base_sha": None, "default_branch": "main", "observed_at": now,
        }
    path = ws_root / "state" / "upstream.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": "porttrack/upstream-state/v1", "upstream": "vllm-project/vllm",
                                "observed_at": now, "source": "real history", "prs": prs}))
    return path
