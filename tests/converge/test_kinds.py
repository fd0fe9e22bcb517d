"""Every kind of change judged by its bytes and mode (issue 30): renames against copies,
symlinks, empty files, gitlinks (submodule bumps), end-of-file newlines, byte-identical files.
One small real history per kind, decided by `porttrack.converge.decide`. On main before
`porttrack.converge.kinds` (c8c0733) 12 of these 15 cases fail (every kind has at least one); the
3 that pass there are the empty-file answers it already got right.

Their random counterpart, with an independent oracle, is the "kinds" family of
`testing/convergence_scenarios.py` (tests/properties/test_converge_differential.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from porttrack.converge.verify import MergedPR, decide
from porttrack.git.repo import GitRepo
from testing.gitfixtures import Executable, Gitlink, Symlink, Upstream, clone_fork, fork_commit, git

PR = 3001


def lines(n: int, tag: str) -> str:
    return "".join(f"{tag}_{i} = {i}\n" for i in range(n))


def merged(tmp_path: Path, before: dict, after: dict, *, how: str = "squash") -> tuple[Upstream, str]:
    up = Upstream(tmp_path / "up", initial_files=before)
    up.open_pr(PR, after, title="the change")
    return up, (up.squash_merge(PR) if how == "squash" else up.merge(PR))


def fork_before(up: Upstream, merge: str, tmp_path: Path) -> Path:
    """A fork cut at the merge's first parent: it lacks the change until it takes it by hand."""
    fork = clone_fork(up, tmp_path / "fork")
    git(fork, "reset", "-q", "--hard", f"{merge}^")
    return fork


def verdict(fork: Path, merge: str, ref: str = "HEAD", base: str = "upstream/main"):
    return decide(GitRepo.open(fork), MergedPR(PR, "the change", merge, None, "recorded"), fork_ref=ref, upstream_base=base)


def states(v) -> list[tuple[str, str]]:
    return [(h.path, h.state) for h in v.hunks]


# -- 1. a copy taken for a rename


def test_a_copy_taken_for_a_rename_is_not_converged_and_a_true_rename_is(tmp_path):
    body = lines(30, "a")
    up, merge = merged(tmp_path, {"a.py": body}, {"a.py": None, "sub/a.py": body.replace("a_7 = 7\n", "a_7 = 70\n")})
    fork = fork_before(up, merge, tmp_path)
    fork_commit(fork, {"sub/a.py": body.replace("a_7 = 7\n", "a_7 = 70\n")}, "copy, keep the old file")
    v = verdict(fork, merge)
    assert v.verdict != "converged", states(v)
    assert ("sub/a.py", "missing") in states(v)
    git(fork, "rm", "-q", "a.py")
    git(fork, "commit", "-q", "-m", "now a rename")
    assert verdict(fork, merge).verdict == "converged"


# -- 4. a symlink replaced by a regular file holding the target's name


def test_a_regular_file_holding_a_symlinks_target_is_not_the_symlink(tmp_path):
    up, merge = merged(tmp_path, {"t.py": lines(5, "t")}, {"link.py": Symlink("t.py")})
    fork = fork_before(up, merge, tmp_path)
    fork_commit(fork, {"link.py": "t.py"}, "a regular file with the target's name")
    v = verdict(fork, merge)
    assert v.verdict == "not-converged", states(v)
    fork_commit(fork, {"link.py": Symlink("t.py")}, "the symlink")
    assert verdict(fork, merge).verdict == "converged"


def test_a_symlink_turned_into_a_file_with_its_target_as_text(tmp_path):
    up, merge = merged(tmp_path, {"t.py": lines(5, "t"), "link.py": Symlink("t.py")}, {"link.py": "t.py"})
    fork = fork_before(up, merge, tmp_path)
    v = verdict(fork, merge)
    assert v.verdict == "not-converged" and {s for _, s in states(v)} == {"missing"}, states(v)
    git(fork, "update-ref", "refs/remotes/upstream/base", f"{merge}^")
    fork_commit(fork, {"link.py": "t.py"}, "take it")
    assert verdict(fork, merge).verdict == "converged"
    assert verdict(fork, merge, base="upstream/base").verdict == "converged"  # by its entries alone


# -- 5. an empty added file


@pytest.mark.parametrize("fork_has, expected", [
    ("", "converged"), ("x = 1\n", "not-converged"), (None, "not-converged"), (Executable(""), "not-converged"),
])
def test_an_empty_added_file_is_present_only_when_empty_with_its_mode(tmp_path, fork_has, expected):
    up, merge = merged(tmp_path, {"t.py": lines(5, "t")}, {"pkg/__init__.py": ""})
    fork = fork_before(up, merge, tmp_path)
    if fork_has is not None:
        fork_commit(fork, {"pkg/__init__.py": fork_has}, "the fork's file")
    v = verdict(fork, merge)
    assert v.verdict == expected, states(v)


# -- 7. an added file the fork took, then moved with upstream's rename


@pytest.mark.parametrize("edit", [False, True])
def test_an_added_file_taken_and_moved_with_upstreams_rename_is_present(tmp_path, edit):
    new = lines(20, "n")
    up, merge = merged(tmp_path, {"t.py": lines(5, "t")}, {"new.py": new})
    moved = new.replace("n_3 = 3\n", "n_3 = 33\n") if edit else new
    rename = up.commit({"new.py": None, "pkg/new.py": moved}, "move new.py")
    fork = fork_before(up, merge, tmp_path)
    git(fork, "cherry-pick", merge)
    git(fork, "cherry-pick", rename)
    v = verdict(fork, merge)
    assert v.verdict == "converged", states(v)
    # an upstream base that predates the merge shows no upstream history: the fork's own move is
    # followed by git's rename detection, never "missing"
    git(fork, "update-ref", "refs/remotes/upstream/base", f"{merge}^")
    v = verdict(fork, merge, base="upstream/base")
    assert states(v) == [("new.py", "unknown" if edit else "present")], [h.detail for h in v.hunks]
    assert "moved to pkg/new.py" in v.hunks[0].detail


# -- 9. a submodule bump


@pytest.mark.parametrize("bumped_later", [False, True])
def test_a_submodule_bump_converges_at_the_prs_commit(tmp_path, bumped_later):
    old, new, other, later = (f"{c}" * 40 for c in "abcd")
    up, merge = merged(tmp_path, {"t.py": lines(5, "t"), "third/lib": Gitlink(old)}, {"third/lib": Gitlink(new)})
    if bumped_later:
        up.commit({"third/lib": Gitlink(later)}, "bump lib again")
    fork = clone_fork(up, tmp_path / "fork")
    v = verdict(fork, merge)  # upstream main itself
    assert v.verdict == "converged", [(h.state, h.detail) for h in v.hunks]
    assert states(v) == [("third/lib", "present-after-churn" if bumped_later else "present")]
    git(fork, "reset", "-q", "--hard", f"{merge}^")
    v = verdict(fork, merge)
    assert v.verdict == "not-converged" and states(v) == [("third/lib", "missing")], [(h.state, h.detail) for h in v.hunks]
    fork_commit(fork, {"third/lib": Gitlink(new)}, "the fork bumps lib the same way")
    assert verdict(fork, merge).verdict == "converged"
    fork_commit(fork, {"third/lib": Gitlink(other)}, "the fork bumps lib elsewhere")
    v = verdict(fork, merge)
    assert v.verdict == "not-converged" and "not #3001's" in v.hunks[0].detail, [(h.state, h.detail) for h in v.hunks]


# -- 10. a hunk that only adds the final newline


@pytest.mark.parametrize("other_edit", [False, True])
def test_a_hunk_that_only_adds_the_final_newline_is_decided(tmp_path, other_edit):
    body = lines(20, "e")
    before = body[:-1]  # no newline at the end
    up, merge = merged(tmp_path, {"e.py": before}, {"e.py": body})
    fork = fork_before(up, merge, tmp_path)
    if other_edit:  # the fork's file differs elsewhere: not decided by its blob
        fork_commit(fork, {"e.py": "fork = 1\n" + before}, "the fork's own first line")
    v = verdict(fork, merge)
    assert states(v) == [("e.py", "missing")], v.hunks
    fork_commit(fork, {"e.py": ("fork = 1\n" if other_edit else "") + body}, "take the newline")
    v = verdict(fork, merge)
    assert states(v) == [("e.py", "present")], v.hunks


def test_a_hunk_that_only_removes_the_final_newline_is_decided(tmp_path):
    body = lines(20, "e")
    up, merge = merged(tmp_path, {"e.py": body}, {"e.py": body[:-1]})
    fork = fork_before(up, merge, tmp_path)
    fork_commit(fork, {"e.py": "fork = 1\n" + body}, "the fork's own first line")
    assert states(verdict(fork, merge)) == [("e.py", "missing")]
    fork_commit(fork, {"e.py": "fork = 1\n" + body[:-1]}, "take it")
    assert states(verdict(fork, merge)) == [("e.py", "present")]


# -- 11. a byte-identical file after the merge


def repeated(n: int, changed: dict[int, str]) -> str:
    return "".join(f"def f():\n    {changed.get(i, 'pass')}\n\n" for i in range(n))


def test_a_file_byte_identical_to_the_merges_is_present_where_both_images_occur(tmp_path):
    up, merge = merged(tmp_path, {"r.py": repeated(12, {})}, {"r.py": repeated(12, {5: "return 1", 9: "return 2"})})
    fork = fork_before(up, merge, tmp_path)
    fork_commit(fork, {"r.py": repeated(12, {5: "return 1", 9: "return 2"}), "own.py": "x = 1\n"}, "the fork takes the file")
    git(fork, "update-ref", "refs/remotes/upstream/base", f"{merge}^")  # no later upstream state to lean on
    v = verdict(fork, merge, base="upstream/base")
    assert v.verdict == "converged", [(h.state, h.detail) for h in v.hunks]
    assert all("byte for byte" in h.detail for h in v.hunks)
    up.commit({"t.py": "t = 1\n"}, "upstream moves on elsewhere")
    fork2 = clone_fork(up, tmp_path / "fork2")
    fork_commit(fork2, {"own.py": "x = 1\n"}, "a fork commit")
    assert verdict(fork2, merge).verdict == "converged"  # by ancestry, the file as merged
    git(fork, "reset", "-q", "--hard", f"{merge}^")
    v = verdict(fork, merge, base="upstream/base")
    assert {s for _, s in states(v)} == {"missing"}, [(h.state, h.detail) for h in v.hunks]
