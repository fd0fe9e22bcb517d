"""A PR merged by GitHub's "Rebase and merge": each of its commits replayed onto the base, author
and message kept; `merge_commit_sha` is the last copy. The merge against its parent is then only
the PR's last commit. Measured before this was handled: a fork that carried only that last commit
(a.py still unchanged) was called *converged* by patch-id, exit 0, merge_kind "squash". Now the
change is taken from below the replayed commits (converge.history.rebase_merged)."""

from __future__ import annotations

import json

from porttrack.common.errors import ExitCode
from testing.gitfixtures import git
from testing.workspace import make_workspace, track


def _two_commit_pr(tmp_path, world, merge: str = "rebase"):
    world.upstream.commit({"a.py": "a = 1\n", "b.py": "b = 1\n", "c.py": "c = 1\n"}, "files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    world.open_pr(101, {"a.py": "a = 2\n"}, "Two steps")
    world.append(101, {"b.py": "b = 2\n"})
    ws = make_workspace(tmp_path / "ws", {"t": track([101])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status").returncode == 0  # records the head; the next poll records the merge
    sha = world.rebase_merge(101) if merge == "rebase" else world.squash_merge(101)
    git(world.fork, "fetch", "-q", "upstream")
    assert ws.run_in_process("status").returncode == 0
    return ws, sha


def _verify(ws, *argv):
    proc = ws.run_in_process("verify-converged", "101", "--json", *argv)
    return proc, json.loads(proc.stdout) if proc.stdout else None


def test_a_fork_with_only_the_last_replayed_commit_is_not_converged(tmp_path, world):
    ws, merge = _two_commit_pr(tmp_path, world)
    git(world.fork, "cherry-pick", merge)  # b.py only
    proc, v = _verify(ws)
    assert proc.returncode == ExitCode.CHECK_FAILED, proc.stderr
    assert (v["verdict"], v["commits"]["merge_kind"]) == ("partially-converged", "rebase")
    assert {h["path"]: h["state"] for h in v["hunks"]} == {"a.py": "missing", "b.py": "present"}
    assert v["commits"]["merge_parent"] == git(world.fork, "rev-parse", f"{merge}~2")


def test_a_fork_that_picked_every_replayed_commit_is_converged_by_patch_id(tmp_path, world):
    ws, merge = _two_commit_pr(tmp_path, world)
    git(world.fork, "cherry-pick", f"{merge}~1")
    git(world.fork, "cherry-pick", merge)
    proc, v = _verify(ws)
    assert (proc.returncode, v["verdict"], v["method"]) == (0, "converged", "patch-id"), proc.stderr
    assert sorted(m["matches"] for m in v["patch_id"]["matched"]) == sorted([git(world.fork, "rev-parse", f"{merge}~1"), merge])


def test_a_fork_rebased_onto_the_merge_is_converged_by_ancestry_with_the_whole_change(tmp_path, world):
    ws, merge = _two_commit_pr(tmp_path, world)
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    proc, v = _verify(ws)
    assert (proc.returncode, v["verdict"], v["method"]) == (0, "converged", "ancestry"), proc.stderr
    assert sorted(h["path"] for h in v["hunks"]) == ["a.py", "b.py"]


def test_a_squash_merge_of_the_same_pr_stays_a_squash(tmp_path, world):
    ws, merge = _two_commit_pr(tmp_path, world, merge="squash")
    git(world.fork, "cherry-pick", merge)
    proc, v = _verify(ws)
    assert (proc.returncode, v["verdict"], v["method"], v["commits"]["merge_kind"]) == (0, "converged", "patch-id", "squash")


def _reworded_chain(ws, world, merge: str, edit: bool) -> None:
    """Upstream rewritten as if the maintainer had reworded the first copy while rebasing (and,
    with `edit`, changed its code too): a fork-side stand-in, recorded as the merge commit."""
    first = git(world.fork, "rev-parse", f"{merge}~1")
    git(world.fork, "checkout", "-q", "-b", "reworded", f"{merge}~2")
    git(world.fork, "cherry-pick", first)
    if edit:
        (world.fork / "a.py").write_text("a = 3\n")
        git(world.fork, "add", "a.py")
    git(world.fork, "commit", "-q", "--amend", "-m", "Reworded while rebasing")
    git(world.fork, "cherry-pick", merge)
    state = json.loads((ws.root / "state" / "upstream.json").read_text())
    state["prs"]["101"]["merge_commit_sha"] = git(world.fork, "rev-parse", "HEAD")  # the reworded chain's last copy
    (ws.root / "state" / "upstream.json").write_text(json.dumps(state))


def test_a_copy_whose_message_was_reworded_is_found_by_patch_id(tmp_path, world):
    """The last copy matches the head, the one before it has another message but the same author
    and patch-id: a copy all the same, so the change starts below both."""
    ws, merge = _two_commit_pr(tmp_path, world)
    _reworded_chain(ws, world, merge, edit=False)
    proc, v = _verify(ws, "--fork-ref", "reworded")
    assert (proc.returncode, v["verdict"], v["commits"]["merge_kind"]) == (0, "converged", "rebase"), proc.stderr
    assert sorted(h["path"] for h in v["hunks"]) == ["a.py", "b.py"]
    assert v["commits"]["merge_parent"] == git(world.fork, "rev-parse", "reworded~2")


def test_replayed_commits_that_are_not_copies_of_the_pr_are_not_guessed(tmp_path, world):
    """The copy before the last one has another message and other code (no patch-id match), and
    the PR commit's change is not upstream's below it: where the change starts cannot be told."""
    ws, merge = _two_commit_pr(tmp_path, world)
    _reworded_chain(ws, world, merge, edit=True)
    proc, _ = _verify(ws, "--fork-ref", "reworded")
    assert proc.returncode == ExitCode.CANNOT_EVALUATE, (proc.returncode, proc.stdout[-500:], proc.stderr)
    assert "rebase merge" in proc.stderr and "cannot be told" in proc.stderr


# -- issue 30, item 3: a head that ends in merges from main; a commit upstream's rebase dropped;
# item 8: a stacked PR as GitHub leaves it. Built with testing.convergence_rebase's rebase merge
# (`git rebase --force-rebase`, as GitHub replays) and decided in process.

def _files(n: int, tag: str) -> dict[str, str]:
    return {f"m{k}.py": "".join(f"{tag}{k}_{j} = {j}\n" for j in range(12)) for k in range(n)}


def _edited(k: int, tag: str = "pr") -> dict[str, str]:
    return {f"m{k}.py": "".join(f"{tag}{k}_{j} = {j}\n" if j != 5 else f"{tag}{k}_{j} = 'changed'\n" for j in range(12))}


def _decide(fork, merge, head, ref="fork", base=None):
    from porttrack.converge.decide import MergedPR, decide
    from porttrack.git.repo import GitRepo

    return decide(GitRepo.open(fork), MergedPR(101, "t", merge, None, "recorded", head_sha=head, base_sha=base),
                  fork_ref=ref, upstream_base="upstream/main")


def _fork_at(up, tmp_path, at: str, picks=()):
    from testing.gitfixtures import clone_fork

    fork = clone_fork(up, tmp_path / "fork")
    git(fork, "fetch", "-q", "upstream", "+refs/pull/*/head:refs/porttrack/pull/*/head")
    git(fork, "checkout", "-q", "-b", "fork", at)
    for c in picks:
        git(fork, "cherry-pick", c)
    return fork


def test_a_head_ending_in_merges_from_main_is_judged_on_every_replayed_commit(tmp_path):
    """#48630's shape: commits on three files, "Merge branch 'main'" between them and as the head
    (not replayed). Before: no copy of the head, so only the last commit was the change, and a fork
    carrying that one was converged, exit 0."""
    from testing.convergence_rebase import github_rebase_merge, merge_main_into
    from testing.gitfixtures import Upstream

    up = Upstream(tmp_path / "up", initial_files={**_files(3, "pr"), "other.py": "x = 1\n"})
    up.open_pr(101, _edited(0), "Three steps")
    up.commit({"other.py": "x = 2\n"}, "main moves on")
    merge_main_into(up, 101)
    up.append(101, _edited(1), "step 2")
    up.append(101, _edited(2), "step 3")
    up.commit({"other.py": "x = 3\n"}, "main moves on again")
    head = merge_main_into(up, 101)
    start = up.tip("main")
    merge = github_rebase_merge(up, 101)
    copies = git(up.path, "rev-list", "--reverse", f"{start}..{merge}").split()
    assert len(copies) == 3  # the merges were not replayed
    fork = _fork_at(up, tmp_path, start, picks=[merge])  # the last copy only: 1 of the 3 files
    v = _decide(fork, merge, head)
    assert (v.verdict, v.commits.merge_kind, v.commits.merge_parent) == ("partially-converged", "rebase", start)
    assert {h.path: h.state for h in v.hunks} == {"m0.py": "missing", "m1.py": "missing", "m2.py": "present"}
    git(fork, "cherry-pick", copies[0], copies[1])
    v = _decide(fork, merge, head)
    assert (v.verdict, v.method) == ("converged", "patch-id")
    assert sorted(m.matches for m in v.patch_id.matched) == sorted(copies)


def _dropped_pr(tmp_path, dropped: int):
    """PR commits on m0, m1, m2; commit `dropped`'s change lands on main first, so the rebase merge
    drops it."""
    from testing.convergence_rebase import github_rebase_merge
    from testing.gitfixtures import Upstream

    up = Upstream(tmp_path / "up", initial_files=_files(3, "pr"))
    up.open_pr(101, _edited(0), "Three steps")
    up.append(101, _edited(1), "step 2")
    up.append(101, _edited(2), "step 3")
    up.commit(_edited(dropped), "the same change, landed on its own")
    start = up.tip("main")
    head = up.head(101)
    merge = github_rebase_merge(up, 101)
    return up, start, head, merge


def test_a_pr_commit_the_rebase_dropped_as_applied_leaves_the_rest_judged(tmp_path):
    """The PR's last commit was already upstream, so the merge commit is the copy of the one before
    it (its message is not the head's). Before: read as a squash of that one copy, and a fork
    carrying it was converged, exit 0."""
    up, start, head, merge = _dropped_pr(tmp_path, dropped=2)
    copies = git(up.path, "rev-list", "--reverse", f"{start}..{merge}").split()
    assert len(copies) == 2
    fork = _fork_at(up, tmp_path, start, picks=[merge])
    v = _decide(fork, merge, head)
    assert (v.verdict, v.commits.merge_kind, v.commits.merge_parent) == ("partially-converged", "rebase", start)
    assert {h.path: h.state for h in v.hunks} == {"m0.py": "missing", "m1.py": "present"}  # m2.py: upstream's own commit


def test_a_dropped_commit_in_the_middle(tmp_path):
    up, start, head, merge = _dropped_pr(tmp_path, dropped=1)
    fork = _fork_at(up, tmp_path, start, picks=[merge])
    v = _decide(fork, merge, head)
    assert (v.verdict, v.commits.merge_parent) == ("partially-converged", start)
    assert {h.path: h.state for h in v.hunks} == {"m0.py": "missing", "m2.py": "present"}
    v = _decide(fork, merge, head, ref="upstream/main")
    assert (v.verdict, v.method) == ("converged", "ancestry")


def _stacked(tmp_path, between: bool):
    """PR #100 (m0), PR #101 on top of it (m1, m2); #100 rebase-merged, then #101 (its recorded head
    still the stacked branch, its base #100's head)."""
    from testing.convergence_rebase import github_rebase_merge
    from testing.gitfixtures import Upstream

    up = Upstream(tmp_path / "up", initial_files={**_files(3, "pr"), "other.py": "x = 1\n"})
    below = up.open_pr(100, _edited(0), "The PR below")
    up.open_pr(101, _edited(1), "Stacked", start=below)
    head = up.append(101, _edited(2), "Stacked, step 2")
    github_rebase_merge(up, 100)
    if between:
        up.commit({"other.py": "x = 2\n"}, "main moves on")
    start = up.tip("main")
    merge = github_rebase_merge(up, 101)
    return up, start, head, below, merge


def test_a_stacked_pr_at_upstream_tip_is_converged_not_exit_7(tmp_path):
    """Before: "where its change starts cannot be told", exit 7, also at upstream's tip."""
    for between in (False, True):
        up, start, head, below, merge = _stacked(tmp_path / str(between), between)
        fork = _fork_at(up, tmp_path / str(between), up.tip("main"))
        for base in (below, None):  # with the recorded base, and without it
            v = _decide(fork, merge, head, base=base)
            assert (v.verdict, v.commits.merge_kind) == ("converged", "rebase"), (between, base)
            assert {"m1.py", "m2.py"} <= {h.path for h in v.hunks}


def test_a_stacked_pr_is_judged_on_its_own_commits(tmp_path):
    """With the recorded base (the PR below's head), the change is the stacked PR's own two
    commits, found by patch-id: a fork carrying their copies is converged, one carrying one copy
    is not."""
    up, start, head, below, merge = _stacked(tmp_path, between=False)
    fork = _fork_at(up, tmp_path, f"{start}~1", picks=[merge])  # below #100's copy too
    v = _decide(fork, merge, head, base=below)
    assert v.commits.merge_parent == start
    assert {h.path: h.state for h in v.hunks} == {"m1.py": "missing", "m2.py": "present"}
    git(fork, "cherry-pick", f"{merge}~1")
    v = _decide(fork, merge, head, base=below)
    assert (v.verdict, v.method) == ("converged", "patch-id")
