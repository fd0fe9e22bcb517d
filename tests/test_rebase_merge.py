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
    assert ws.run("status").returncode == 0  # records the head; the next poll records the merge
    sha = world.rebase_merge(101) if merge == "rebase" else world.squash_merge(101)
    git(world.fork, "fetch", "-q", "upstream")
    assert ws.run("status").returncode == 0
    return ws, sha


def _verify(ws, *argv):
    proc = ws.run("verify-converged", "101", "--json", *argv)
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


def test_replayed_commits_that_are_not_copies_of_the_pr_are_not_guessed(tmp_path, world):
    """The last copy matches the head, the one before it is something else (the maintainer
    reworded it while rebasing): where the change starts cannot be told, so no verdict."""
    ws, merge = _two_commit_pr(tmp_path, world)
    first = git(world.fork, "rev-parse", f"{merge}~1")
    # upstream rewritten here as if the first copy had been reworded: a fork-side stand-in for it
    git(world.fork, "checkout", "-q", "-b", "reworded", f"{merge}~2")
    git(world.fork, "cherry-pick", first)
    git(world.fork, "commit", "-q", "--amend", "-m", "Reworded while rebasing")
    git(world.fork, "cherry-pick", merge)
    reworded_tip = git(world.fork, "rev-parse", "HEAD")
    state = json.loads((ws.root / "state" / "upstream.json").read_text())
    state["prs"]["101"]["merge_commit_sha"] = reworded_tip  # the recorded merge commit: the reworded chain's last copy
    (ws.root / "state" / "upstream.json").write_text(json.dumps(state))
    proc, _ = _verify(ws, "--fork-ref", "reworded")
    assert proc.returncode == ExitCode.CANNOT_EVALUATE, (proc.returncode, proc.stdout[-500:], proc.stderr)
    assert "rebase merge" in proc.stderr and "cannot be told" in proc.stderr
