"""A shallow fork checkout (`git clone --depth`, common for a repository of vLLM's size): its
history stops at a cut, so "merge commit X is not in the fork" may only mean the cut hides it.

Measured before this was handled: on a shallow clone of upstream's own main (which holds the
merge), verify-converged said "merge commit ... is not an ancestor of main" and "upstream/main does
not contain it either: the fork's upstream base predates the merge" -- both false -- and recorded
them. Now a "not found" in a shallow clone is refused with the command that deepens it, while a
merge found in the history it has is still decided (a path found there is real)."""

from __future__ import annotations

import json

import pytest

from porttrack.common.errors import ExitCode
from testing.gitfixtures import git
from testing.workspace import make_workspace, track


def _shallow_fork(tmp_path, world, depth: int):
    """8 commits, PR 101 squash-merged, then 6 more upstream commits; the fork checkout a --depth
    clone of upstream's main (remote `upstream`): the merge is cut off when depth < 7, and the
    clone is shallow below 17."""
    for n in range(8):
        world.upstream.commit({"old.py": f"x = {n}\n"}, f"earlier {n}")
    world.upstream.commit({"m.py": "".join(f"line {j}\n" for j in range(20))}, "project file")
    world.open_pr(101, {"m.py": "".join(f"line {j}{' changed' if j == 5 else ''}\n" for j in range(20))}, "Change line 5")
    world.squash_merge(101)
    for n in range(6):
        world.upstream.commit({f"later{n}.py": f"x = {n}\n"}, f"later {n}")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", f"--depth={depth}", "--origin", "upstream", f"file://{world.upstream.path}", str(shallow))
    ws = make_workspace(tmp_path / "ws", {"t": track([101])}, api_url=world.fake.base_url, fork=shallow, token=world.token)
    return ws, shallow


@pytest.mark.parametrize("depth", [3, 7], ids=["merge-beyond-the-cut", "cut-right-below-the-merge"])
def test_a_merge_cut_off_by_a_shallow_clone_is_not_called_absent(tmp_path, world, depth):
    ws, shallow = _shallow_fork(tmp_path, world, depth=depth)
    assert (shallow / ".git" / "shallow").is_file()
    proc = ws.run("verify-converged", "101", "--json")
    assert proc.returncode == ExitCode.CANNOT_EVALUATE, (proc.returncode, proc.stdout, proc.stderr)
    assert "shallow clone" in proc.stderr and "fetch --unshallow" in proc.stderr, proc.stderr
    assert "not an ancestor" not in proc.stdout + proc.stderr
    assert not (ws.root / "state" / "convergence" / "101.json").exists(), "nothing false was recorded"

    doctor = ws.run("doctor", "--json")
    found = {f["check"]: f for f in json.loads(doctor.stdout)["checks"]}
    assert found["fork checkout"]["status"] == "warn" and "fetch --unshallow" in found["fork checkout"]["fix"]

    git(shallow, "fetch", "-q", "--unshallow", "upstream")
    again = ws.run("verify-converged", "101", "--json")
    verdict = json.loads(again.stdout)
    assert (again.returncode, verdict["verdict"], verdict["method"]) == (0, "converged", "ancestry"), again.stderr


def test_a_merge_inside_the_shallow_history_is_decided_as_usual(tmp_path, world):
    ws, shallow = _shallow_fork(tmp_path, world, depth=10)
    assert (shallow / ".git" / "shallow").is_file()
    proc = ws.run("verify-converged", "101", "--json")
    verdict = json.loads(proc.stdout)
    assert (proc.returncode, verdict["verdict"], verdict["method"]) == (0, "converged", "ancestry"), proc.stderr
