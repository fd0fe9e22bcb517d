"""`history.patch_ids_of` (git's `patch-id --stable` computed in process, issue 34) against the
real `git patch-id --stable`, bit for bit: on every commit of the real vLLM slice and on made
diffs of the kinds whose handling git special-cases (binary files, one-line hunks, a missing final
newline, mode changes, added and deleted files, renames as plain diffs show them)."""

from __future__ import annotations

import subprocess

from porttrack.converge.history import patch_ids_of
from testing.gitfixtures import Executable, fork_commit, git
from testing.realhistory import slice_bundle, upstream_from_bundle


def _git_patch_ids(repo, stream: bytes) -> list[tuple[str, str]]:
    out = subprocess.run(["git", "-C", str(repo), "patch-id", "--stable"], input=stream, capture_output=True, check=True).stdout
    return [tuple(line.split()) for line in out.decode().splitlines() if line.strip()]


def _diffs(repo, items: list[str]) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "diff-tree", "--stdin", "-p", "--root", "--binary", "--full-index"],
                          input=("\n".join(items) + "\n").encode(), capture_output=True, check=True).stdout


def test_every_commit_of_the_real_slice(tmp_path):
    up = upstream_from_bundle(slice_bundle(), tmp_path / "up.git")
    shas = git(up, "rev-list", "--no-merges", "--all").split()
    pairs = [f"{a} {b}" for a, b in zip(shas[5::40], shas[6::40])]  # "<new> <old>" items too
    stream = _diffs(up, shas + pairs)
    want = _git_patch_ids(up, stream)
    assert len(want) > 700
    assert patch_ids_of(stream) == want


def test_the_kinds_git_special_cases(tmp_path):
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    lines = "".join(f"line {i}\n" for i in range(30))
    commits = [fork_commit(repo, {"a.txt": lines, "b.bin": b"\x00\x01" * 300, "c.sh": "echo\n", "d.txt": "x\n"}, "base")]
    commits.append(fork_commit(repo, {"a.txt": lines.replace("line 3\n", "LINE 3\n")}, "one-line hunk"))
    commits.append(fork_commit(repo, {"a.txt": lines.replace("line 3\n", "LINE 3\n").rstrip("\n")}, "no final newline"))
    commits.append(fork_commit(repo, {"b.bin": b"\x00\x02" * 310}, "binary"))
    commits.append(fork_commit(repo, {"c.sh": Executable("echo\n")}, "mode only"))
    commits.append(fork_commit(repo, {"e.txt": "", "f.txt": "new\n"}, "added, one empty"))
    git(repo, "rm", "-q", "d.txt")
    git(repo, "mv", "f.txt", "g.txt")
    git(repo, "commit", "-q", "-m", "deleted and renamed")
    commits.append(git(repo, "rev-parse", "HEAD"))
    commits.append(fork_commit(repo, {"a.txt": "line 0\n" + lines, "b.bin": b"\x00\x03" * 5, "h.txt": "h\n"}, "text, binary and new"))
    stream = _diffs(repo, commits + [f"{commits[-1]} {commits[0]}"])
    want = _git_patch_ids(repo, stream)
    assert len(want) == len(commits) + 1
    assert patch_ids_of(stream) == want
