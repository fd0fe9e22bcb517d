"""The git fixtures build what GitHub would hold: PR refs, force-pushes, squash vs true merges."""

from __future__ import annotations

import os
import time
from pathlib import Path

from testing.gitfixtures import (
    AUTHOR_NAME,
    Executable,
    Symlink,
    Upstream,
    clone_fork,
    fork_commit,
    generate_history,
    git,
    is_ancestor,
    reset_clock,
)


def pull_ref(up: Upstream, number: int) -> str:
    out = git(up.path, "ls-remote", str(up.path), f"refs/pull/{number}/head")
    return out.split()[0] if out else ""


def show(repo: Path, rev: str, path: str) -> str:
    return git(repo, "show", f"{rev}:{path}")


def test_git_env_isolates_from_user_config(git_env: dict[str, str], tmp_path: Path) -> None:
    assert os.environ["HOME"] == git_env["HOME"] != str(Path.home().parent / "root")
    assert "GITHUB_TOKEN" not in os.environ and "GITHUB_API_URL" not in os.environ
    origin = git(tmp_path, "config", "--global", "--show-origin", "user.name")
    assert origin == f"file:{git_env['GIT_CONFIG_GLOBAL']}\t{AUTHOR_NAME}"
    git(tmp_path, "init", "-q", "r")
    assert git(tmp_path / "r", "symbolic-ref", "HEAD") == "refs/heads/main"


def test_pull_refs_follow_open_append_and_force_push(tmp_path: Path) -> None:
    up = Upstream(tmp_path)
    h1 = up.open_pr(1, {"kernels/warmup.py": "def warmup():\n    pass\n"}, title="warmup")
    assert pull_ref(up, 1) == h1 == up.head(1)
    assert git(up.path, "rev-parse", "refs/heads/pr/1") == h1

    h2 = up.append(1, {"kernels/warmup.py": "def warmup():\n    return 1\n"})
    assert pull_ref(up, 1) == h2 and is_ancestor(up.path, h1, h2)

    h3 = up.force_push(1, {"kernels/extra.py": "x = 1\n"})
    assert pull_ref(up, 1) == h3
    assert not is_ancestor(up.path, h2, h3) and not is_ancestor(up.path, h1, h3)
    # keep=True carries the earlier changes; the PR's fork point is unchanged
    assert show(up.path, h3, "kernels/warmup.py") == "def warmup():\n    return 1"
    assert git(up.path, "rev-parse", f"{h3}^") == up.tip("main")

    h4 = up.force_push(1, {"only.py": "y = 2\n"}, keep=False)
    assert git(up.path, "diff", "--name-only", f"{h4}^", h4) == "only.py"
    assert up.pr(1).heads == [h1, h2, h3, h4]


def test_force_push_with_rebase_starts_from_new_base(tmp_path: Path) -> None:
    up = Upstream(tmp_path)
    old = up.open_pr(7, {"a.py": "a = 1\n"})
    main_tip = up.commit({"b.py": "b = 1\n"}, "move main")
    new = up.force_push(7, {}, rebase=True)
    assert git(up.path, "rev-parse", f"{new}^") == main_tip
    assert not is_ancestor(up.path, old, new)
    assert show(up.path, new, "a.py") == "a = 1"


def test_squash_merge_is_one_commit_and_merge_keeps_history(tmp_path: Path) -> None:
    up = Upstream(tmp_path)
    up.open_pr(1, {"one.py": "1\n"}, title="one")
    h1 = up.append(1, {"one.py": "11\n"})
    s = up.squash_merge(1)
    assert len(git(up.path, "rev-list", "--parents", "-n1", s).split()) == 2     # one parent
    assert up.tip() == s and show(up.path, s, "one.py") == "11"
    assert git(up.path, "log", "-1", "--format=%s", s) == "one (#1)"
    assert not is_ancestor(up.path, h1, s)
    assert pull_ref(up, 1) == h1                      # GitHub keeps the PR ref after merging

    h2 = up.open_pr(2, {"two.py": "2\n"}, title="two")
    m = up.merge(2)
    assert len(git(up.path, "rev-list", "--parents", "-n1", m).split()) == 3     # two parents
    assert is_ancestor(up.path, h2, m) and up.tip() == m

    up.open_pr(3, {"three.py": "3\n"})
    up.close(3)
    assert up.pr(3).state == "closed" and pull_ref(up, 3) == up.head(3)


def test_modes_symlinks_and_deletions(tmp_path: Path) -> None:
    up = Upstream(tmp_path)
    sha = up.commit({"run.sh": Executable("#!/bin/sh\necho hi\n"), "link": Symlink("run.sh"),
                     "data.bin": b"\x00\x01\xff"}, "add files")
    modes = {line.split("\t")[1]: line.split()[0] for line in git(up.path, "ls-tree", sha).splitlines()}
    assert modes["run.sh"] == "100755" and modes["link"] == "120000" and modes["data.bin"] == "100644"
    sha2 = up.commit({"link": None, "run.sh": "plain\n"}, "drop link, plain file")
    modes = {line.split("\t")[1]: line.split()[0] for line in git(up.path, "ls-tree", sha2).splitlines()}
    assert "link" not in modes and modes["run.sh"] == "100644"


def test_fork_clone_tracks_upstream_and_has_its_own_history(tmp_path: Path) -> None:
    up = Upstream(tmp_path / "up")
    up.open_pr(5, {"f.py": "5\n"})
    fork = clone_fork(up, tmp_path / "fork")
    assert git(fork, "remote") == "upstream"
    assert git(fork, "remote", "get-url", "upstream") == str(up.path)
    assert git(fork, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    mine = fork_commit(fork, {"fork_only.py": "ours\n"}, "fork change")
    assert git(fork, "rev-parse", "HEAD") == mine and up.tip() != mine
    git(fork, "fetch", "-q", "upstream", "+refs/pull/*/head:refs/remotes/upstream/pull/*")
    assert git(fork, "rev-parse", "refs/remotes/upstream/pull/5") == up.head(5)


def test_same_steps_build_the_same_shas(tmp_path: Path) -> None:
    def build(root: Path) -> list[str]:
        reset_clock()
        up = Upstream(root)
        return [up.open_pr(1, {"a": "1\n"}), up.append(1, {"a": "2\n"}), up.squash_merge(1)]
    assert build(tmp_path / "one") == build(tmp_path / "two")


def test_generate_history_is_fast(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    tip = generate_history(tmp_path / "big", commits=2000, files=500)
    elapsed = time.perf_counter() - t0
    print(f"generate_history: 2000 commits over 500 files in {elapsed:.2f} s")
    repo = tmp_path / "big"
    assert git(repo, "rev-parse", "HEAD") == tip
    assert git(repo, "rev-list", "--count", tip) == "2000"
    assert len(git(repo, "ls-files").splitlines()) == 500
    assert git(repo, "status", "--porcelain") == ""
    assert elapsed < 10
    # extending an existing repository continues its history
    tip2 = generate_history(repo, commits=10, files=500)
    assert git(repo, "rev-list", "--count", tip2) == "2010" and is_ancestor(repo, tip, tip2)
