"""A partial (blobless) fork checkout -- what `porttrack init` clones by default: file contents come
on demand from the promisor remote (upstream, GitHub in real life).

Measured before this was handled, on such a clone: `status --offline` and `report weekly --offline`
fetched missing contents from the upstream remote (a network request from a command that promised
none; with no network, one failed fetch after another). Offline, no git process may reach a remote
now. Contents git cannot give stop the verdict: a partial clone's reader dies (named so now), and a
blob a tree names but the object store lacks was read as an absent file (test below)."""

from __future__ import annotations

import json

from porttrack.common.errors import ExitCode
from testing.gitfixtures import git
from testing.workspace import make_workspace, track

LINES = [f"line {j}\n" for j in range(30)]


def _blobless_fork(tmp_path, world):
    """PR 101 (line 5 of m.py) squash-merged, then upstream changes line 20 of m.py; the fork a
    blobless clone of upstream's main without a checkout (no contents at all yet)."""
    world.upstream.commit({"m.py": "".join(LINES)}, "project file")
    world.open_pr(101, {"m.py": "".join(LINES).replace("line 5\n", "line 5 changed\n")}, "Change line 5")
    world.squash_merge(101)
    later = "".join(LINES).replace("line 5\n", "line 5 changed\n").replace("line 20\n", "line 20 later\n")
    world.upstream.commit({"m.py": later}, "Change line 20")
    git(world.upstream.path, "config", "uploadpack.allowFilter", "true")
    fork = tmp_path / "blobless"
    git(tmp_path, "clone", "-q", "--no-checkout", "--filter=blob:none", "--origin", "upstream", f"file://{world.upstream.path}", str(fork))
    assert git(fork, "config", "--get", "remote.upstream.promisor") == "true"
    ws = make_workspace(tmp_path / "ws", {"t": track([101])}, api_url=world.fake.base_url, fork=fork, token=world.token)
    return ws, fork


def _fetches(trace_file) -> list[str]:
    """The transports git started (a partial clone's on-demand fetch runs `git fetch`, which runs
    upload-pack for a file:// remote, a remote helper for https): what reaches a remote. The fetch
    itself still starts offline, and stops at once: protocol.allow=never."""
    return [line for line in trace_file.read_text().splitlines()
            if "run_command:" in line and ("upload-pack" in line or "git-remote-" in line or "remote-" in line.split("run_command:")[1][:40])]


def test_status_offline_fetches_nothing_in_a_partial_clone(tmp_path, world):
    ws, fork = _blobless_fork(tmp_path, world)
    assert ws.run("status").returncode == 0  # online: records #101 merged (contents come on demand)
    trace = tmp_path / "git-trace"
    offline = ws.run("status", "--offline", "--json", env={**ws.env(), "GIT_TRACE": str(trace)})
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["mode"] == "offline"
    assert _fetches(trace) == [], "an --offline command made git fetch from a remote"
    weekly = ws.run("report", "weekly", "--offline", "--dry-run", env={**ws.env(), "GIT_TRACE": str(trace)})
    assert weekly.returncode == 0, weekly.stderr
    assert _fetches(trace) == []


def test_contents_that_cannot_be_fetched_stop_the_verdict(tmp_path, world):
    ws, fork = _blobless_fork(tmp_path, world)
    merge = git(fork, "log", "-1", "--format=%H", "--grep=Change line 5", "upstream/main")
    git(fork, "diff", f"{merge}^", merge)  # the PR's own contents fetched; the fork tip's m.py not
    git(fork, "remote", "set-url", "upstream", f"file://{tmp_path}/no-such-promisor")  # no more fetching
    proc = ws.run("verify-converged", "101", "--json")
    assert proc.returncode != 0 and proc.stdout == "", (proc.returncode, proc.stdout[-800:], proc.stderr)
    assert "partial clone" in proc.stderr, proc.stderr
    assert not (ws.root / "state" / "convergence" / "101.json").exists(), "nothing was recorded"

    git(fork, "remote", "set-url", "upstream", f"file://{world.upstream.path}")  # the network is back
    again = ws.run("verify-converged", "101", "--json")
    verdict = json.loads(again.stdout)
    assert (again.returncode, verdict["verdict"], verdict["method"]) == (0, "converged", "ancestry"), again.stderr


def test_a_blob_the_tree_names_but_that_cannot_be_read_is_not_an_absent_file(tmp_path, world):
    """A damaged object store (a loose blob gone): git's reader answers "missing" for it. That file
    exists at the fork ref -- its tree says so -- so the verdict stops; before, the file was read
    as absent and #101 came out not converged ("m.py does not exist at the fork ref")."""
    world.upstream.commit({"m.py": "".join(LINES)}, "project file")
    world.open_pr(101, {"m.py": "".join(LINES).replace("line 5\n", "line 5 changed\n")}, "Change line 5")
    world.squash_merge(101)
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    (world.fork / "m.py").write_text("".join(LINES).replace("line 5\n", "line 5 changed\n").replace("line 25\n", "line 25 fork\n"))
    git(world.fork, "commit", "-q", "-am", "The fork's own edit")
    blob = git(world.fork, "rev-parse", "HEAD:m.py")
    loose = world.fork / ".git" / "objects" / blob[:2] / blob[2:]
    assert loose.is_file()
    ws = make_workspace(tmp_path / "ws", {"t": track([101])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run("verify-converged", "101", "--dry-run").returncode == 0  # converged while the blob is there
    loose.unlink()
    proc = ws.run("verify-converged", "101", "--json")
    assert proc.returncode == ExitCode.CANNOT_EVALUATE, (proc.returncode, proc.stdout[-800:], proc.stderr)
    assert "m.py" in proc.stderr and "contents are not in" in proc.stderr, proc.stderr
    assert "does not exist" not in proc.stdout + proc.stderr
