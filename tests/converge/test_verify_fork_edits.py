"""Verdicts that survive the fork's own edits (issue 21, classes 1-4 and 9): one small real
history per class, decided by `porttrack.converge.decide`. Each test failed on the code before
issue 21 (main at 9ae2063): it said present, present-after-churn or converged where the change is
not at the fork ref, or "the pre-image is back" where it is not.

The random counterpart of these, with an independent oracle, is tests/properties/test_converge_differential.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from porttrack.converge.verify import MergedPR, decide
from porttrack.git.repo import GitRepo
from testing.gitfixtures import Upstream, clone_fork, fork_commit, git

PR = 2101


def lines(n: int, tag: str) -> list[str]:
    return [f"{tag}_{i} = {i}\n" for i in range(n)]


def text(ls: list[str]) -> str:
    return "".join(ls)


def world(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> tuple[Upstream, str]:
    up = Upstream(tmp_path / "up", initial_files=before)
    up.open_pr(PR, after, title="the change")
    return up, up.squash_merge(PR)


def verdict(fork: Path, merge: str, ref: str = "HEAD", base: str = "upstream/main"):
    return decide(GitRepo.open(fork), MergedPR(PR, "the change", merge, None, "recorded"), fork_ref=ref, upstream_base=base)


def states(v) -> list[str]:
    return [h.state for h in v.hunks]


def twin_file(value: str) -> str:
    """Two identical blocks, longer than a hunk with its context: the PR's two hunks are the
    same bytes, told apart only by where they are."""
    block = ["def helper():\n", "    a = 0\n", "    b = 1\n", "    c = 2\n", f"    value = {value}\n",
             "    d = 3\n", "    e = 4\n", "    f = 5\n", "    return value\n"]
    return text(lines(10, "a") + block + lines(20, "b") + block + lines(10, "c"))


# -- class 1: the same text in two places


@pytest.mark.parametrize("how", ["ancestry", "cherry-pick"])
def test_same_block_twice_undone_in_the_second_place_is_missing_there(tmp_path, how):
    up, merge = world(tmp_path, {"m.py": twin_file("1")}, {"m.py": twin_file("2")})
    fork = clone_fork(up, tmp_path / "fork")
    if how == "cherry-pick":
        git(fork, "reset", "-q", "--hard", f"{merge}^")
        git(fork, "cherry-pick", merge)
    undone = twin_file("2").splitlines(keepends=True)
    second = max(i for i, line in enumerate(undone) if line == "    value = 2\n")
    undone[second] = "    value = 1\n"
    fork_commit(fork, {"m.py": text(undone)}, "fork: back to 1 in the second helper")

    v = verdict(fork, merge)

    assert states(v) == ["present", "missing"]
    assert v.verdict == "partially-converged"


# -- class 2: whitespace is content


@pytest.mark.parametrize("kind", ["trailing", "crlf"])
def test_a_whitespace_only_hunk_taken_then_reverted_is_missing(tmp_path, kind):
    body = lines(30, "w")
    dirty = list(body)
    dirty[12] = body[12][:-1] + ("   \n" if kind == "trailing" else "\r\n")
    up, merge = world(tmp_path, {"w.py": text(dirty), "x.py": text(lines(5, "x"))},
                      {"w.py": text(body), "x.py": text(lines(5, "x") + ["x_new = 1\n"])})
    fork = clone_fork(up, tmp_path / "fork")  # has the merge
    fork_commit(fork, {"w.py": text(dirty)}, "fork: put the old line ending back")

    v = verdict(fork, merge)

    by_path = {h.path: h.state for h in v.hunks}
    assert by_path == {"w.py": "missing", "x.py": "present"}
    assert v.verdict == "partially-converged"


# -- class 3: ancestry and patch-id say the change arrived, not that it is still there


@pytest.mark.parametrize("how", ["ancestry", "cherry-pick"])
def test_a_fork_edit_of_a_taken_line_is_not_churn(tmp_path, how):
    before = lines(30, "e")
    after = list(before)
    after[15] = "e_15 = 'the PR'\n"
    up, merge = world(tmp_path, {"e.py": text(before)}, {"e.py": text(after)})
    fork = clone_fork(up, tmp_path / "fork")
    if how == "cherry-pick":
        git(fork, "reset", "-q", "--hard", f"{merge}^")
        git(fork, "cherry-pick", merge)
    edited = list(after)
    edited[15] = "e_15 = 'the fork's own'\n"
    fork_commit(fork, {"e.py": text(edited)}, "fork: our own value")

    v = verdict(fork, merge)

    (h,) = v.hunks
    assert h.state == "unknown", h
    assert v.verdict == "not-converged"


def test_a_fork_commit_undoing_the_pr_is_never_upstream_churn(tmp_path):
    before = lines(30, "u")
    after = list(before)
    after[10:12] = ["u_new_a = 1\n", "u_new_b = 2\n"]
    up, merge = world(tmp_path, {"u.py": text(before)}, {"u.py": text(after)})
    fork = clone_fork(up, tmp_path / "fork")
    undone = list(after)
    undone[10:12] = ["u_10 = 'fork'\n", "u_11 = 'fork'\n"]  # neither image: only churn could explain it
    fork_commit(fork, {"u.py": text(undone)}, "fork: undo the PR our way")

    v = verdict(fork, merge)

    assert states(v) == ["unknown"]
    assert v.verdict == "not-converged"


# -- class 4 and 9: the revert check looks at the hunk's location


def common_file(tag: str, middle: list[str]) -> str:
    return text(["# ---\n"] + lines(8, f"{tag}a") + ["}\n", "# ---\n"] + lines(8, f"{tag}b") + middle
                + lines(8, f"{tag}c") + ["}\n", "# ---\n"] + lines(8, f"{tag}d"))


def test_lines_like_a_brace_elsewhere_do_not_make_a_churned_hunk_reverted(tmp_path):
    """The PR replaces a `}` / `# ---` pair; upstream later rewrites the PR's line. The same two
    lines occur elsewhere in the file: that is not the pre-image coming back."""
    up, merge = world(tmp_path, {"c.py": common_file("k", ["}\n", "# ---\n"])},
                      {"c.py": common_file("k", ["k_new = 1\n"])})
    churn = up.commit({"c.py": common_file("k", ["k_new = 2  # upstream's later rewrite\n"])}, "later upstream PR")
    fork = clone_fork(up, tmp_path / "fork")  # upstream main itself

    v = verdict(fork, merge)

    (h,) = v.hunks
    assert (h.state, h.changed_by and h.changed_by.commit) == ("present-after-churn", churn)
    assert v.verdict == "converged"


@pytest.mark.parametrize("order", ["revert-between", "revert-last"])
def test_merged_pr_changed_later_with_an_unrelated_revert_is_converged_on_upstream_main(tmp_path, order):
    """Issue 21, class 9 (#46076 on upstream main): the merge is an ancestor, an unrelated commit
    and its revert touch the same file, and a later PR rewrites the merged lines. Upstream main
    has the change as upstream changed it: converged, present after churn."""
    pr_lines = ["k_new = 1\n"]
    up, merge = world(tmp_path, {"c.py": common_file("k", ["}\n", "# ---\n"])}, {"c.py": common_file("k", pr_lines)})
    unrelated = common_file("k", pr_lines).replace("kd_3 = 3\n", "kd_3 = 'tried'\n")

    def unrelated_and_revert() -> None:
        current = git(up.path, "show", "main:c.py") + "\n"
        up.commit({"c.py": current.replace("kd_3 = 3\n", "kd_3 = 'tried'\n")}, "unrelated change")
        up.commit({"c.py": current}, 'Revert "unrelated change"')

    assert unrelated != common_file("k", pr_lines)
    if order == "revert-between":
        unrelated_and_revert()
    churn = up.commit({"c.py": common_file("k", ["k_new = 2  # a later PR\n"])}, "a later PR rewrites it")
    if order == "revert-last":
        unrelated_and_revert()
    fork = clone_fork(up, tmp_path / "fork")

    v = verdict(fork, merge, ref="upstream/main")

    assert (v.verdict, v.method) == ("converged", "ancestry")
    (h,) = v.hunks
    assert (h.state, h.changed_by and h.changed_by.commit, h.changed_by and h.changed_by.upstream) == ("present-after-churn", churn, True)


# -- class 10: the smaller ones


def test_an_added_file_absent_from_the_fork_is_missing_even_after_upstream_changed_it(tmp_path):
    """The README: missing means the pre-image is at the fork ref; an added file's pre-image is
    its absence. Upstream rewrote the file later; the fork has neither: missing, not unknown."""
    up, merge = world(tmp_path, {"a.py": text(lines(5, "a"))}, {"a.py": text(lines(5, "a")), "new.py": text(lines(6, "n"))})
    up.commit({"new.py": text(lines(6, "n")).replace("n_2 = 2\n", "n_2 = 'later'\n")}, "later upstream change")
    fork = clone_fork(up, tmp_path / "fork")
    git(fork, "reset", "-q", "--hard", f"{merge}^")  # never took the PR; upstream/main has it

    v = verdict(fork, merge)

    assert [(h.path, h.state) for h in v.hunks] == [("new.py", "missing")]


def test_an_orphaned_pr_says_the_fork_carries_only_commits_it_has():
    from porttrack.report.status import Knowledge, next_action
    from porttrack.workspace.state import RecordedPR

    pr = RecordedPR(
        number=7, title="t", author="a", state="closed", html_url="", created_at=None, updated_at=None,
        merged_at=None, closed_at="2026-11-01T00:00:00Z", merge_commit_sha=None, head_sha="b" * 40, head_ref="x",
        base_ref="main", base_sha=None, default_branch="main", observed_at="2026-11-30T00:00:00Z",
    )
    listed = ("1" * 40, "2" * 40)
    unchecked = next_action(pr, {7: pr}, listed, Knowledge())
    assert "the fork carries" not in unchecked.text and "not checked" in unchecked.text
    checked = next_action(pr, {7: pr}, listed, Knowledge(coverage={7: "coverage 1/1"}, fork_commits_missing={7: (listed[1],)}))
    assert f"the fork carries {listed[0]}" in checked.text
    assert f"the fork carries {listed[0]}, {listed[1]}" not in checked.text and "does not have" in checked.text


def test_history_reads_a_pr_path_literally_never_as_a_glob(tmp_path):
    """PR paths are untrusted: `LITERAL` must make git read them as names. It was spelled
    GITLITERAL_PATHSPECS, which git ignores, so `a[1].py` matched `a1.py` as a glob."""
    from porttrack.converge.history import LITERAL

    up, _ = world(tmp_path, {"a1.py": "one\n", "a[1].py": "bracket\n"}, {"a1.py": "one, changed\n"})
    repo = GitRepo.open(clone_fork(up, tmp_path / "fork"))
    assert repo.text("log", "--format=%s", "--", "a1.py", env=LITERAL).strip()  # the changed file has history
    assert len(repo.text("log", "--format=%H", "--", "a[1].py", env=LITERAL).split()) == 1  # only its own first commit
