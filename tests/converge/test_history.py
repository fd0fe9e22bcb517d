"""`history.fork_since` (issue 34: the merge base and the fork's candidate commits read from the
objects, in place of `git merge-base` and `git log <base>..<fork> -- <paths>`) says what git says,
or nothing."""

from __future__ import annotations

from porttrack.converge.history import fork_since
from porttrack.git.repo import GitRepo
from testing.gitfixtures import fork_commit, git


def _git_answer(repo, merge, fork, paths):
    base = git(repo, "merge-base", merge, fork)
    log = git(repo, "log", "--no-merges", "--format=%H %s", f"{base}..{fork}", "--", *paths)
    return base, [tuple(line.split(" ", 1)) for line in log.splitlines() if line]


def test_a_fork_near_the_merge_reads_as_git_says(tmp_path):
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    fork_commit(repo, {"a.py": "a = 0\n", "b.py": "b = 0\n", "c.py": "c = 0\n"}, "base")
    parent = fork_commit(repo, {"c.py": "c = 1\n"}, "upstream before the merge")
    merge = fork_commit(repo, {"a.py": "a = 1\n", "b.py": "b = 1\n"}, "The change (#1)")
    git(repo, "checkout", "-q", "-b", "fork", parent)
    fork_commit(repo, {"c.py": "c = 2\n"}, "fork: elsewhere")
    fork_commit(repo, {"a.py": "a = 1\n"}, "fork: part of it,\nwrapped subject\n\nbody")
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    fork_commit(repo, {"b.py": "b = 1\n"}, "side: the other part")
    git(repo, "checkout", "-q", "fork")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    fork_commit(repo, {"b.py": "b = 2\n", "c.py": "c = 3\n"}, "fork: more")
    fork = git(repo, "rev-parse", "fork")
    paths = ["a.py", "b.py"]
    got = fork_since(GitRepo.open(repo), merge, parent, fork, paths)
    assert got is not None
    base, commits = _git_answer(repo, merge, fork, paths)
    assert got[0] == base == parent
    assert got[1] == commits and len(commits) == 3

    git(repo, "checkout", "-q", "-b", "later", merge)
    later = fork_commit(repo, {"c.py": "c = 9\n"}, "after the merge")
    assert fork_since(GitRepo.open(repo), merge, parent, later, paths) == (merge, [])
    assert fork_since(GitRepo.open(repo), merge, parent, fork, paths, limit=2) is None  # too far: git is asked


def test_a_fork_from_before_the_merges_parent_is_left_to_git(tmp_path):
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    first = fork_commit(repo, {"a.py": "a = 0\n"}, "base")
    parent = fork_commit(repo, {"a.py": "a = 1\n"}, "before the merge")
    merge = fork_commit(repo, {"a.py": "a = 2\n"}, "The change (#1)")
    git(repo, "checkout", "-q", "-b", "fork", first)
    fork = fork_commit(repo, {"a.py": "a = 5\n"}, "fork")
    assert fork_since(GitRepo.open(repo), merge, parent, fork, ["a.py"]) is None  # reaches the root, never the parent
    assert merge
