"""Issue 30, item 12: a project that merges its main into a stable branch. A PR merged on stable;
later main changes one of its lines and reverts another, and "Merge main into stable" brings both.
On stable's first-parent line that merge is what touched the lines, but the churn is blamed on
main's commit that changed them (`trail.real_commit`: `git log -L` over what the merge brought), and
the reverted hunk is undone upstream -- never present."""

from __future__ import annotations

from porttrack.converge.decide import MergedPR, decide
from porttrack.git.repo import GitRepo
from testing.gitfixtures import Upstream, clone_fork, git

BASE = "".join(f"v{i} = {i}\n" for i in range(40))


def _lines(text: str, changes: dict[int, str]) -> str:
    out = text.splitlines(keepends=True)
    for i, line in changes.items():
        out[i] = line
    return "".join(out)


def _history(tmp_path):
    up = Upstream(tmp_path / "up", initial_files={"m.py": BASE, "other.py": "o = 0\n"})
    up.commit({"other.py": "o = 1\n"}, "start stable", branch="stable")
    pr_text = _lines(BASE, {5: "v5 = 'pr'\n", 25: "v25 = 'pr'\n"})
    up.open_pr(7, {"m.py": pr_text}, "Two hunks", base="stable")
    merge = up.squash_merge(7)
    # main takes stable, then changes the PR's first line and reverts its second, in two commits
    up._checkout("main")
    git(up.work, "merge", "-q", "--no-ff", "-m", "Merge stable into main", "stable")
    up._publish("main", git(up.work, "rev-parse", "HEAD"))
    churn = up.commit({"m.py": _lines(pr_text, {5: "v5 = 'main'\n"})}, "Rework v5 on main")
    revert = up.commit({"m.py": _lines(pr_text, {5: "v5 = 'main'\n", 25: "v25 = 25\n"})}, "Revert the v25 part on main")
    up.commit({"other.py": "o = 2\n"}, "unrelated main commit")
    up._checkout("stable")
    git(up.work, "merge", "-q", "--no-ff", "-m", "Merge main into stable", "main")
    stable_merge = up._publish("stable", git(up.work, "rev-parse", "HEAD"))
    up.commit({"other.py": "o = 3\n"}, "a stable commit after", branch="stable")
    fork = clone_fork(up, tmp_path / "fork")
    git(fork, "fetch", "-q", "upstream", "+refs/heads/stable:refs/remotes/upstream/stable")
    return fork, merge, churn, revert, stable_merge


def _verdict(fork, merge, ref):
    return decide(GitRepo.open(fork), MergedPR(7, "Two hunks", merge, None, "recorded"), fork_ref=ref,
                  upstream_base="refs/remotes/upstream/stable")


def test_churn_is_blamed_on_the_commit_main_made_not_the_merge_into_stable(tmp_path):
    fork, merge, churn, revert, stable_merge = _history(tmp_path)
    v = _verdict(fork, merge, "refs/remotes/upstream/stable")
    by_line = {h.header.split("@@")[1].strip(): h for h in v.hunks}
    assert len(v.hunks) == 2, v.hunks
    first, second = (by_line[k] for k in sorted(by_line, key=lambda k: int(k.split(",")[0][1:])))
    assert first.state == "present-after-churn", first
    assert first.changed_by.commit == churn != stable_merge
    assert second.state == "undone-upstream", second
    assert second.changed_by.commit == revert
    assert v.verdict != "converged"  # the undone hunk never counts


def test_a_fork_with_the_pr_but_not_mains_revert_is_not_converged(tmp_path):
    """The fork cut on stable right after the PR, then the merge of main applied by hand as a
    cherry-pick of its change: the reverted hunk is undone upstream whatever the fork holds."""
    fork, merge, churn, revert, stable_merge = _history(tmp_path)
    git(fork, "checkout", "-q", "-b", "fork", merge)
    git(fork, "cherry-pick", "-m", "1", stable_merge)
    v = _verdict(fork, merge, "refs/heads/fork")
    states = sorted(h.state for h in v.hunks)
    assert states == ["present-after-churn", "undone-upstream"], v.hunks
    assert {h.changed_by.commit for h in v.hunks if h.changed_by} == {churn, revert}
