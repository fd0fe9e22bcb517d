"""`porttrack.git.repo`'s scratch index and its one three-way probe, on a real repository."""

from __future__ import annotations

import os
from pathlib import Path

from porttrack.git.repo import GitRepo
from testing.gitfixtures import git, git_bytes, write_files

LINES = "".join(f"line {i}\n" for i in range(1, 21))


def _repo(tmp_path: Path) -> tuple[GitRepo, str, str, str]:
    """A repository with a base commit, a fork-side edit of line 10 and an upstream-side edit of
    line 10 (conflicting) and of line 2 (merging cleanly with the fork's)."""
    work = tmp_path / "repo"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    write_files(work, {"f.txt": LINES})
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base")
    base = git(work, "rev-parse", "HEAD")
    write_files(work, {"f.txt": LINES.replace("line 10\n", "line 10 (fork)\n")})
    git(work, "commit", "-q", "-am", "fork")
    fork = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "-q", base)
    write_files(work, {"f.txt": LINES.replace("line 10\n", "line 10 (upstream)\n")})
    git(work, "commit", "-q", "-am", "upstream conflicting")
    conflicting = git(work, "rev-parse", "HEAD")
    write_files(work, {"f.txt": LINES.replace("line 2\n", "line 2 (upstream)\n").replace("line 7\n", "line 7 (upstream)\n")})
    git(work, "commit", "-q", "-am", "upstream near")
    near = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "-q", "main")
    return GitRepo.open(work), base, fork, f"{conflicting} {near}"


def test_scratch_index_probes_without_touching_the_checkout_and_is_removed(tmp_path):
    repo, base, fork, shas = _repo(tmp_path)
    conflicting, near = shas.split()
    status_before = git(repo.path, "status", "--porcelain")
    with repo.scratch_index("probe-test") as scratch:
        folder = scratch.dir
        assert folder is not None and folder.parent.name == "probe-test" and folder.name.startswith(f"{os.getpid()}-")
        scratch.read_tree(fork)
        near_patch = git_bytes(repo.path, "diff", "--full-index", base, near)
        clash = git_bytes(repo.path, "diff", "--full-index", base, conflicting)

        # plainly the hunk at line 7 (its context reaches line 10) does not apply on the fork's line 10; by 3-way it merges
        assert scratch.apply(near_patch, "--check").returncode != 0
        merged = scratch.threeway(near_patch)
        assert merged.clean and merged.rc == 0 and merged.unmerged == ()

        clashed = scratch.threeway(clash)
        assert not clashed.clean and clashed.unmerged == ("f.txt",)
        # the probe merged into a copy: the index it started from is as it was
        assert scratch.unmerged() == ()
        tree = git(repo.path, "write-tree", env={"GIT_INDEX_FILE": str(scratch.path("index"))})
        assert tree == git(repo.path, "rev-parse", f"{fork}^{{tree}}")
    assert not folder.exists()
    assert git(repo.path, "status", "--porcelain") == status_before
    assert git(repo.path, "rev-parse", "HEAD") == fork


def test_the_object_reader_writes_a_small_batch_itself_and_a_large_one_from_a_thread(tmp_path, monkeypatch):
    """A batch of a few names (up to `_PIPE_SAFE` bytes: the pipe holds it whatever git does) is
    written without a thread, whose start and join cost more than the batch; a larger one still
    goes through a thread (else git, blocked writing answers nobody reads yet, and we, blocked
    writing names, would wait on each other). Both answer the same."""
    import threading

    from porttrack.git import repo as gitrepo

    repo, base, fork, _shas = _repo(tmp_path)
    started: list[int] = []
    real_thread = threading.Thread

    class CountingThread(real_thread):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            started.append(1)
            super().start()

    monkeypatch.setattr(gitrepo.threading, "Thread", CountingThread)
    small = repo.objects([base, fork, f"{base}:f.txt"])
    assert started == [] and small[f"{base}:f.txt"][2] == LINES.encode()
    names = [f"{base}:f.txt"] + [f"refs/heads/no-such-{n:05d}" for n in range(gitrepo._PIPE_SAFE // 20)]
    assert len("".join(f"{n}\n" for n in names)) > gitrepo._PIPE_SAFE
    large = repo.read_objects(names)
    assert started == [1] and large[f"{base}:f.txt"] == ("blob", LINES.encode())
    assert all(large[n] is None for n in names[1:])
