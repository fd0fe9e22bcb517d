"""Verdicts are bound to what they were computed on, and drops are safe (issue 11, Build 2 and 3).

`status`, `report weekly` and `--apply-drops` may act on a convergence verdict only when it is for
the configured `fork.branch` at its current tip; a verdict for another ref, or one the branch has
moved past, is shown for what it is and the next action stays "verify convergence".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from porttrack.diff.hunks import parse_diff
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import HunkRef, Patch, Revision, patch_file_name
from porttrack.workspace.files import Workspace
from porttrack.workspace.state import RecordedPR, UpstreamState
from porttrack.workspace.state import save as save_state
from testing.gitfixtures import git, git_bytes
from testing.workspace import TestWorkspace as WorkspaceHandle  # (renamed: pytest would collect Test*)
from testing.workspace import make_workspace, track

PR = 48407
TRACK = "sparse-indexer-skip"
TITLE = "[Attention] Skip sparse indexer scoring for dense short prefills"
MLA = "vllm/model_executor/layers/attention/mla_attention.py"
VERIFIED = f"#{PR} is in the fork (verified)"


def module(edits: dict[int, str] | None = None) -> str:
    lines = [f"def mla_{i}(x):\n    return x + {i}\n" for i in range(40)]
    for i, body in (edits or {}).items():
        lines[i] = f"def mla_{i}(x):\n    {body}\n"
    return "".join(lines)


CHANGE = {MLA: module({3: "return x  # skip the indexer", 30: "return x * 2  # topk"})}


@pytest.fixture
def world(world):
    world.upstream.commit({MLA: module()}, "Add the MLA module")
    world.rebase_fork()
    return world


def workspace(tmp_path: Path, world) -> WorkspaceHandle:
    return make_workspace(tmp_path / "ws", {TRACK: track([PR])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)


def record_merged(ws: WorkspaceHandle, squash: str) -> None:
    """state/upstream.json as a live `status` leaves it once #PR merged."""
    now = "2026-08-25T00:00:00Z"
    recorded = RecordedPR(number=PR, title=TITLE, author="qianlihuang", state="merged", html_url="",
                          created_at=None, updated_at=None, merged_at="2026-07-28T16:17:22Z", closed_at=None,
                          merge_commit_sha=squash, head_sha=None, head_ref=None, base_ref="main",
                          base_sha=None, default_branch="main", observed_at=now)
    save_state(Workspace(ws.root).upstream_state_file, UpstreamState("vllm-project/vllm", now, "a test", {PR: recorded}))


def verify(ws: WorkspaceHandle, *args: str) -> tuple[int, dict]:
    out = ws.run_in_process("verify-converged", str(PR), "--json", *args, env=ws.env())
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def status(ws: WorkspaceHandle, **env: str | None) -> tuple[str, dict]:
    """`status --offline`, as text and as JSON: (text, the PR's next action)."""
    text = ws.run_in_process("status", "--offline", env=ws.env(**env))
    assert text.returncode == 0, text.stderr
    data = ws.run_in_process("status", "--offline", "--json", env=ws.env(**env))
    assert data.returncode == 0, data.stderr
    [pr] = [p for t in json.loads(data.stdout)["tracks"] for p in t["prs"] if p["number"] == PR]
    return text.stdout, pr["next_action"]


def weekly(ws: WorkspaceHandle) -> dict:
    out = ws.run_in_process("report", "weekly", "--offline", "--json", "--dry-run", env=ws.env())
    assert out.returncode == 0, out.stderr
    [pr] = [p for t in json.loads(out.stdout)["tracks"] for p in t["prs"] if p["number"] == PR]
    return pr


def test_a_verdict_is_used_only_for_fork_branch_at_its_current_tip(tmp_path, world):
    world.open_pr(PR, CHANGE, title=TITLE)
    squash = world.squash_merge(PR)
    git(world.fork, "fetch", "-q", "upstream")
    git(world.fork, "branch", "candidate", "upstream/main")  # has the merge; main does not
    ws = workspace(tmp_path, world)
    record_merged(ws, squash)

    # 1. converged -- on another ref: never "in the fork (verified)" for fork.branch.
    code, data = verify(ws, "--fork-ref", "candidate")
    assert (code, data["verdict"], data["commits"]["fork_ref"]) == (0, "converged", "refs/heads/candidate")
    text, action = status(ws)
    assert VERIFIED not in text
    assert action["kind"] == "convergence-check" and "for another ref, not the fork branch main" in action["text"]
    report = weekly(ws)
    assert report["next_action"]["kind"] == "convergence-check"
    assert report["convergence"].startswith("converged at refs/heads/candidate ") and "for another ref" in report["convergence"]

    # 2. a verdict for main (not converged there) is the one that counts, even though older.
    code, data = verify(ws)
    assert (code, data["verdict"]) == (1, "not-converged")
    code, _ = verify(ws, "--fork-ref", "candidate")  # a newer one for another ref changes nothing
    assert code == 0
    text, action = status(ws)
    main_sha = git(world.fork, "rev-parse", "main")
    assert VERIFIED not in text and f"last verdict: not-converged at refs/heads/main {main_sha[:12]}" in action["text"]
    # not only "run it again": what to do (issue 21, class 10)
    assert "rebase it onto an upstream base that contains the merge, or port the missing hunks" in action["text"]

    # 3. converged at main's tip: now, and only now, it is in the fork.
    tip = world.rebase_fork()
    code, data = verify(ws)
    assert (code, data["verdict"], data["commits"]["fork_sha"]) == (0, "converged", tip)
    text, action = status(ws)
    assert VERIFIED in text and action["kind"] == "converged"
    report = weekly(ws)
    assert report["convergence"] == f"converged at refs/heads/main {tip[:12]}" and report["next_action"]["kind"] == "converged"

    # 4. main moves on: the verdict is stale.
    moved = world.fork_commit({"FORK_ONLY.md": "fork\n"}, "A fork-only change")
    text, action = status(ws)
    assert VERIFIED not in text
    assert action["kind"] == "convergence-check" and f"stale: main is now {moved[:12]}" in action["text"]
    assert "stale" in weekly(ws)["convergence"]

    # 5. without a fork checkout the tip cannot be read: not confirmed, so not "in the fork".
    text, action = status(ws, PORTTRACK_FORK=None)
    assert VERIFIED not in text
    assert action["kind"] == "convergence-check" and "cannot be confirmed current" in action["text"]


# ------------------------------------------------------------------------------ drops


def queue_patch(ws: WorkspaceHandle, data: bytes, head: str, base: str, seq: int = 1) -> Patch:
    """A queued copy of the PR made from `data` (a diff of it), as `porttrack import` leaves it."""
    name = f"{seq:04d}-pr{PR}-skip-sparse-indexer"
    hunks = tuple(HunkRef(h.id, h.path, h.kind) for fd in parse_diff(data) for h in fd.hunks)
    patch = Patch(name=name, file=patch_file_name(name, data), sha256=hashlib.sha256(data).hexdigest(),
                  track=TRACK, pr=PR, upstream="vllm-project/vllm", title=TITLE,
                  revision=Revision(head=head, base=base), hunks_taken=hunks,
                  hunks_left_out=(), depends_on=(), state="queued", gate=None)
    w = Workspace(ws.root)
    queue_mod.save(w, queue_mod.load(w).add(patch), new_files={patch.file: data})
    return patch


def test_apply_drops_never_retires_on_a_verdict_for_another_ref(tmp_path, world):
    world.open_pr(PR, CHANGE, title=TITLE)
    squash = world.squash_merge(PR)
    git(world.fork, "fetch", "-q", "upstream")
    git(world.fork, "branch", "candidate", "upstream/main")
    ws = workspace(tmp_path, world)
    patch = queue_patch(ws, git_bytes(world.upstream.path, "format-patch", "-1", "--stdout", squash), world.head(PR), f"{squash}~1")

    code, data = verify(ws, "--fork-ref", "candidate", "--apply-drops")

    assert (code, data["verdict"]) == (0, "converged")
    [drop] = data["drops"]
    assert drop["duplicate"] and not drop["droppable"] and not drop["retired"]
    assert "this verdict is for refs/heads/candidate, not the fork branch main" in drop["reason"]
    assert queue_mod.load(Workspace(ws.root)).get(patch.name).state == "queued"


def test_apply_drops_keeps_a_patch_carrying_a_hunk_the_merge_does_not_prove(tmp_path, world):
    base = world.upstream.tip()
    first = world.open_pr(PR, {MLA: module({3: "return x  # skip the indexer", 30: "return x * 2  # topk", 20: "return 0  # dropped in review"})}, title=TITLE)
    imported = git_bytes(world.upstream.path, "diff", base, first)  # imported before review changed it
    world.force_push(PR, CHANGE)
    squash = world.squash_merge(PR)
    tip = world.rebase_fork()
    ws = workspace(tmp_path, world)
    patch = queue_patch(ws, imported, first, base)

    code, data = verify(ws, "--apply-drops")

    assert (code, data["verdict"]) == (0, "converged")  # every hunk of the merged change is there...
    [drop] = data["drops"]
    assert not drop["droppable"] and not drop["retired"]  # ...but not every hunk the patch carries
    assert "1 of its hunk(s) are not proven present" in drop["reason"] and "not in the merged change" in drop["reason"]
    assert queue_mod.load(Workspace(ws.root)).get(patch.name).state == "queued"

    # The patch as merged is retired, and the retirement names the verdict it relied on.
    w = Workspace(ws.root)
    queue_mod.save(w, queue_mod.load(w).replace_patch(queue_mod.load(w).get(patch.name).transition("dropped", "re-imported")))
    exact = queue_patch(ws, git_bytes(world.upstream.path, "format-patch", "-1", "--stdout", squash), world.head(PR), f"{squash}~1", seq=2)
    code, data = verify(ws, "--apply-drops")
    assert code == 0 and [d["retired"] for d in data["drops"] if d["ref"] == exact.name] == [True]
    step = queue_mod.load(w).get(exact.name).history[-1]
    index = len(json.loads((ws.root / "state" / "convergence" / f"{PR}.json").read_text())["history"]) - 1
    assert step.to == "converged" and step.evidence == (f"state/convergence/{PR}.json#{index}",)
    assert f"state/convergence/{PR}.json#{index}" in step.why and tip in step.why and "main" in step.why
