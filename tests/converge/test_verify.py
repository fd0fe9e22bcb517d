"""`porttrack verify-converged` against real git repositories and the GitHub emulator over HTTP.

Each test builds an upstream where PR #48407 (modelled on the real one: two hunks in the MLA
attention module, one in `vllm/models/deepseek_v32/nvidia/attention.py` -- the file upstream
deleted two days after the merge -- and a new test file) is merged one way or another, and a fork
that has it by ancestry, by cherry-pick, by a hand port, or not at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porttrack.common.errors import ExitCode
from porttrack.converge import record as converge_record
from porttrack.git.repo import GitRepo
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Patch
from porttrack.workspace.files import Workspace
from porttrack.workspace.state import RecordedPR, UpstreamState
from porttrack.workspace.state import save as save_state
from testing.gitfixtures import git, git_bytes
from testing.queueing import queue_mail
from testing.workspace import TestWorkspace as WorkspaceHandle  # (renamed: pytest would collect Test*)
from testing.workspace import make_workspace, track

PR = 48407
TRACK = "sparse-indexer-skip"
MLA = "vllm/model_executor/layers/attention/mla_attention.py"
GONE = "vllm/models/deepseek_v32/nvidia/attention.py"  # deleted upstream after the merge
TEST = "tests/model_executor/layers/test_mla_short_prefill_indexer.py"
TITLE = "[Attention] Skip sparse indexer scoring for dense short prefills"


def module(name: str, edits: dict[int, str] | None = None) -> str:
    """40 two-line functions; `edits` replaces function i's body line."""
    lines = [f"def {name}_{i}(x):\n    return x + {i}\n" for i in range(40)]
    for i, body in (edits or {}).items():
        lines[i] = f"def {name}_{i}(x):\n    {body}\n"
    return "".join(lines)


BASE = {MLA: module("mla"), GONE: module("attn")}
MLA_EDITS = {3: "return x  # dense short prefill: skip the indexer", 30: "return x * 2  # indexer topk"}
GONE_EDITS = {10: "return x - 1  # sparse path"}
CHANGE = {MLA: module("mla", MLA_EDITS), GONE: module("attn", GONE_EDITS),
          TEST: "".join(f"def test_case_{i}():\n    assert True\n" for i in range(10))}


@pytest.fixture
def world(world):
    """The shared `world`, with the MLA modules on upstream main and the fork rebased onto it."""
    world.upstream.commit(BASE, "Add the MLA attention modules")
    world.rebase_fork()
    return world


def workspace(tmp_path: Path, world, **track_kw) -> WorkspaceHandle:
    ws = make_workspace(tmp_path / "ws", {TRACK: track([PR], **track_kw)},
                        api_url=world.fake.base_url, fork=world.fork, token=world.token)
    text = ws.tracks_file.read_text()
    for sha in track_kw.get("fork_commits", ()):  # tracks.yaml wants SHAs quoted; safe_dump does not quote
        text = text.replace(f"- {sha}\n", f"- '{sha}'\n")
    ws.tracks_file.write_text(text)
    return ws


def verify(ws: WorkspaceHandle, *args: str, **env: str | None):
    """In-process, through the same entry point and error boundary as the console script."""
    return ws.run_in_process("verify-converged", str(PR), *args, env=ws.env(**env))


def verify_json(ws: WorkspaceHandle, *args: str, **env: str | None) -> tuple[int, dict, str]:
    out = verify(ws, "--json", *args, **env)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout), out.stderr


def hunks_by(data: dict) -> dict[tuple[str, str], dict]:
    """(path, header line's first 14 chars) -> hunk: enough to name each of the 4 hunks."""
    return {(h["path"], h["header"][:14]): h for h in data["hunks"]}


def states(data: dict) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for h in data["hunks"]:
        out.setdefault(h["path"], []).append((h["state"], h["method"]))
    return out


def merge_pr(world, how: str = "squash") -> str:
    world.open_pr(PR, CHANGE, title=TITLE)
    return world.squash_merge(PR) if how == "squash" else world.merge(PR)


# ------------------------------------------------------------------------------ ancestry


def test_true_merge_commit_in_the_fork_is_converged_by_ancestry(tmp_path, world):
    merge = merge_pr(world, "merge")
    fork_sha = world.rebase_fork()
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 0, err
    assert data["schema"] == "porttrack/convergence/v2"
    assert (data["verdict"], data["method"]) == ("converged", "ancestry")
    assert data["commits"]["merge_commit"] == merge
    assert data["commits"]["merge_kind"] == "merge"
    assert data["commits"]["fork_sha"] == fork_sha
    assert data["ancestry"] == {"fork_ref": True, "upstream_base": None}
    assert data["source"]["pr_state"] == "github"
    assert {(h["state"], h["method"]) for h in data["hunks"]} == {("present", "ancestry")}
    assert data["summary"] == {"hunks": 4, "present": 4, "present_after_churn": 0, "missing": 0, "unknown": 0, "undone_upstream": 0}
    # one GET for the PR, nothing else
    assert [r.path for r in world.fake.requests()] == [f"/repos/vllm-project/vllm/pulls/{PR}"]


def test_squash_merge_in_the_fork_is_converged_by_ancestry_as_a_subprocess(tmp_path, world):
    squash = merge_pr(world, "squash")
    world.rebase_fork()
    ws = workspace(tmp_path, world)

    proc = ws.run("verify-converged", str(PR), "--json")  # `python -m porttrack`, a separate process

    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["verdict"], data["method"], data["commits"]["merge_kind"]) == ("converged", "ancestry", "squash")
    assert data["commits"]["merge_commit"] == squash
    human = ws.run("verify-converged", str(PR))
    assert human.returncode == 0, human.stderr
    assert "verdict: converged (decided by ancestry)" in human.stdout
    assert "present (ancestry)" in human.stdout


def test_every_run_is_appended_to_the_record_and_latest_verdicts_reads_it(tmp_path, world):
    merge_pr(world)
    ws = workspace(tmp_path, world)
    assert verify(ws).returncode == 1  # the fork has not rebased yet: not converged
    world.rebase_fork()
    assert verify(ws).returncode == 0

    record = json.loads((ws.root / "state" / "convergence" / f"{PR}.json").read_text())
    assert record["schema"] == "porttrack/convergence-record/v1"
    assert [h["verdict"] for h in record["history"]] == ["not-converged", "converged"]
    first, second = record["history"]
    assert first["commits"]["fork_sha"] != second["commits"]["fork_sha"]
    assert all(h["computed_at"].endswith("Z") and h["commits"]["upstream_base_sha"] for h in record["history"])
    assert second["recorded"] == f"state/convergence/{PR}.json"
    [latest] = converge_record.latest_verdicts(Workspace(ws.root), "main", GitRepo.open(world.fork)).values()
    assert (latest.pr, latest.verdict, latest.standing) == (PR, "converged", "current")
    assert (latest.fork_ref, latest.fork_sha, latest.evidence) == ("refs/heads/main", second["commits"]["fork_sha"], f"state/convergence/{PR}.json#1")


def test_a_verdict_that_finds_the_same_is_not_appended_again(tmp_path, world):
    merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world)
    path = ws.root / "state" / "convergence" / f"{PR}.json"
    first = json.loads(verify(ws, "--json").stdout)
    assert first["unchanged_since"] is None
    recorded = path.read_bytes()

    again = verify(ws, "--json")
    assert again.returncode == 0
    data = json.loads(again.stdout)
    assert data["unchanged_since"] == first["computed_at"] and data["recorded"] == f"state/convergence/{PR}.json"
    assert path.read_bytes() == recorded  # not written at all
    assert f"unchanged since {first['computed_at']}" in verify(ws).stdout
    dry = verify(ws, "--dry-run")
    assert f"dry run: unchanged since {first['computed_at']}; nothing would be appended" in dry.stderr

    git(world.fork, "commit", "-q", "--allow-empty", "-m", "the fork moves on")  # new commits: a new finding
    moved = json.loads(verify(ws, "--json").stdout)
    assert moved["unchanged_since"] is None
    history = json.loads(path.read_text())["history"]
    assert [h["commits"]["fork_sha"] for h in history] == [first["commits"]["fork_sha"], moved["commits"]["fork_sha"]]


# ------------------------------------------------------------------------------ patch-id


def test_cherry_picked_squash_is_converged_by_patch_id(tmp_path, world):
    squash = merge_pr(world, "squash")
    git(world.fork, "fetch", "-q", "upstream")  # upstream/main now has the merge; the fork's branch does not
    git(world.fork, "cherry-pick", squash)
    picked = git(world.fork, "rev-parse", "HEAD")
    ws = workspace(tmp_path, world, fork_commits=[picked[:12]])

    code, data, err = verify_json(ws)

    assert code == 0, err
    assert (data["verdict"], data["method"]) == ("converged", "patch-id")
    assert picked != squash
    assert data["ancestry"] == {"fork_ref": False, "upstream_base": True}
    assert [m["commit"] for m in data["patch_id"]["matched"]] == [picked]
    assert data["patch_id"]["matched"][0]["matches"] == "change"
    assert data["patch_id"]["candidates"] == 1  # only fork commits touching the PR's files
    assert {(h["state"], h["method"]) for h in data["hunks"]} == {("present", "patch-id")}
    [drop] = data["drops"]
    assert (drop["kind"], drop["ref"], drop["commit"]) == ("fork-commit", picked[:12], picked)
    assert drop["duplicate"] and drop["droppable"] and not drop["retired"]
    assert "same patch-id" in drop["reason"]


def test_cherry_picked_commits_of_a_true_merge_are_converged_by_patch_id(tmp_path, world):
    world.open_pr(PR, {MLA: CHANGE[MLA]}, title=TITLE)
    world.append(PR, {GONE: CHANGE[GONE], TEST: CHANGE[TEST]})
    world.merge(PR)
    git(world.fork, "fetch", "-q", "upstream")
    pr_commits = world.pr_commits(PR)
    git(world.fork, "cherry-pick", *pr_commits)
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 0, err
    assert (data["verdict"], data["method"]) == ("converged", "patch-id")
    assert sorted(m["matches"] for m in data["patch_id"]["matched"]) == sorted(pr_commits)


# ------------------------------------------------------------------------------ content


def test_hand_port_with_edits_is_partially_converged_per_hunk(tmp_path, world):
    merge_pr(world)
    # The fork ported #48407 by hand before it merged: one MLA hunk differs, no test file.
    world.fork_commit({MLA: module("mla", {**MLA_EDITS, 30: "return x * 3  # our own topk"}),
                       GONE: CHANGE[GONE]}, "Port #48407 (skip the sparse indexer)")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1
    assert "partially-converged" in err
    assert (data["verdict"], data["method"]) == ("partially-converged", "content")
    assert data["patch_id"]["matched"] == [] and data["patch_id"]["candidates"] == 1
    # The edited hunk has neither image at the fork ref (the fork's own version, upstream still has
    # the merged one): unknown, never counted. The test file is absent and upstream never deleted
    # it: missing.
    assert states(data) == {
        MLA: [("present", "content"), ("unknown", "content")],
        GONE: [("present", "content")],
        TEST: [("missing", "content")],
    }
    assert data["summary"] == {"hunks": 4, "present": 2, "present_after_churn": 0, "missing": 1, "unknown": 1, "undone_upstream": 0}
    assert "2 present, 0 present after churn, 1 missing, 1 unknown of 4 hunk(s)" in err
    human = verify(ws)
    assert human.returncode == 1
    assert "MISSING (content)" in human.stdout and "present (content)" in human.stdout and "UNKNOWN (content)" in human.stdout


def test_fork_based_before_the_merge_is_not_converged(tmp_path, world):
    merge = merge_pr(world)
    tracking = git(world.fork, "rev-parse", "upstream/main")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1
    assert data["verdict"] == "not-converged"
    assert data["ancestry"] == {"fork_ref": False, "upstream_base": False}
    assert any("predates the merge" in r for r in data["reasons"])
    assert {h["state"] for h in data["hunks"]} == {"missing"}
    # The merge commit was fetched into porttrack's namespace; the user's upstream/main did not move.
    assert git(world.fork, "rev-parse", "refs/porttrack/upstream/main") == world.upstream.tip()
    assert git(world.fork, "rev-parse", "upstream/main") == tracking
    assert git(world.fork, "cat-file", "-t", merge) == "commit"


# ------------------------------------------------------------------------------ churn


def test_file_deleted_upstream_after_the_merge_is_converged_by_ancestry_with_churn(tmp_path, world):
    merge_pr(world)
    deletion = world.upstream.commit({GONE: None}, "Remove the DeepSeek V3.2 NVIDIA attention module")
    world.rebase_fork()
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 0, err
    assert (data["verdict"], data["method"]) == ("converged", "ancestry")
    [gone] = [h for h in data["hunks"] if h["path"] == GONE]
    assert (gone["state"], gone["method"]) == ("present-after-churn", "ancestry")
    assert gone["changed_by"] == {"commit": deletion, "subject": "Remove the DeepSeek V3.2 NVIDIA attention module", "upstream": True}
    assert {h["state"] for h in data["hunks"] if h["path"] != GONE} == {"present"}
    assert data["summary"] == {"hunks": 4, "present": 3, "present_after_churn": 1, "missing": 0, "unknown": 0, "undone_upstream": 0}
    human = verify(ws)
    assert f"present after churn: changed upstream by {deletion[:12]}" in human.stdout


def test_without_ancestry_a_hunk_whose_pre_image_is_still_there_is_missing_whatever_upstream_did(tmp_path, world):
    """The old defect: upstream's later deletion of the module was taken as "changed since" for a
    fork that still has the module exactly as before the PR (it never ported that part)."""
    merge_pr(world)
    deletion = world.upstream.commit({GONE: None}, "Remove the DeepSeek V3.2 NVIDIA attention module")
    git(world.fork, "fetch", "-q", "upstream")  # the upstream base has the merge and the deletion
    # A hand port of everything except the module upstream has since deleted.
    world.fork_commit({MLA: CHANGE[MLA], TEST: CHANGE[TEST]}, "Port #48407 without the removed module")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    assert (data["verdict"], data["method"]) == ("partially-converged", "content")
    assert data["ancestry"] == {"fork_ref": False, "upstream_base": True}
    assert states(data) == {
        MLA: [("present", "content"), ("present", "content")],
        GONE: [("missing", "content")],
        TEST: [("present", "content")],
    }
    [gone] = [h for h in data["hunks"] if h["path"] == GONE]
    assert gone["changed_by"] is None and "pre-image still at the fork ref" in gone["detail"]

    # The fork then takes upstream's deletion too (by hand: a new commit, not upstream's): the
    # module's absence alone does not show the fork ever had #48407's version of it.
    world.fork_commit({GONE: None}, "Remove the module as upstream did")
    code, data, err = verify_json(ws)
    assert code == 1, err
    [gone] = [h for h in data["hunks"] if h["path"] == GONE]
    assert (gone["state"], gone["method"]) == ("unknown", "churn")
    assert gone["changed_by"]["commit"] == deletion and "absence alone" in gone["detail"]


def test_churn_does_not_excuse_a_hunk_upstream_still_has(tmp_path, world):
    merge_pr(world)
    world.upstream.commit({MLA: module("mla", {**MLA_EDITS, 20: "return 0"})}, "Touch the MLA module elsewhere")
    git(world.fork, "fetch", "-q", "upstream")
    world.fork_commit({GONE: CHANGE[GONE], TEST: CHANGE[TEST]}, "Port only part of #48407")
    ws = workspace(tmp_path, world)

    code, data, _ = verify_json(ws)

    assert code == 1
    assert states(data)[MLA] == [("missing", "content"), ("missing", "content")]
    assert all("upstream still has it" in h["detail"] for h in data["hunks"] if h["path"] == MLA)


# ------------------------------------------------------------------------------ preconditions


def test_open_pr_is_refused_with_exit_6(tmp_path, world):
    world.open_pr(PR, CHANGE, title=TITLE)
    ws = workspace(tmp_path, world)

    out = verify(ws)

    assert out.returncode == 6
    assert f"#{PR} is open (on GitHub), not merged" in out.stderr
    assert not (ws.root / "state" / "convergence").exists()


def test_pr_closed_without_merging_is_refused_with_exit_6(tmp_path, world):
    world.open_pr(PR, CHANGE, title=TITLE)
    world.close(PR)
    out = verify(workspace(tmp_path, world))
    assert out.returncode == 6
    assert "closed without merging" in out.stderr


def test_a_malformed_merge_commit_sha_never_reaches_git(tmp_path, world):
    world.open_pr(PR, CHANGE, title=TITLE)
    world.fake.put_pull(world.upstream_repo, PR, merged=True, merge_commit_sha="--upload-pack=touch pwned")
    ws = workspace(tmp_path, world)

    out = verify(ws)

    # refused where the answer comes in (github.records checks every field it relies on), as
    # GitHub failing (5), before verify's own check of the SHA (6) is reached
    assert out.returncode == 5
    assert "merge_commit_sha is '--upload-pack=touch pwned', not a commit id" in out.stderr
    assert not (world.fork / "pwned").exists() and not (ws.root / "pwned").exists()


def test_an_option_as_fork_ref_is_refused(tmp_path, world):
    merge_pr(world)
    out = verify(workspace(tmp_path, world), "--fork-ref", "--all")
    assert out.returncode == 2
    assert "fork ref '--all' does not exist" in out.stderr


def record_pr(ws: WorkspaceHandle, state: str, merge_commit: str | None = None) -> str:
    """state/upstream.json as `status` leaves it, with #PR in `state`; returns when it was observed."""
    now = "2026-08-25T00:00:00Z"
    recorded = RecordedPR(number=PR, title=TITLE, author="qianlihuang", state=state, html_url="",
                          created_at=None, updated_at=None, merged_at="2026-07-28T16:17:22Z" if merge_commit else None,
                          closed_at=None, merge_commit_sha=merge_commit, head_sha=None, head_ref=None, base_ref="main",
                          base_sha=None, default_branch="main", observed_at=now)
    save_state(Workspace(ws.root).upstream_state_file, UpstreamState("vllm-project/vllm", now, "a test", {PR: recorded}))
    return now


@pytest.mark.parametrize("token", [True, False], ids=["with-token", "without-token"])
def test_a_recorded_merge_is_final_and_github_is_not_asked_again(tmp_path, world, token):
    squash = merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world)
    now = record_pr(ws, "merged", squash)

    code, data, err = verify_json(ws, **({} if token else {"GITHUB_TOKEN": None}))

    assert code == 0, err
    assert (data["verdict"], data["commits"]["merge_commit"]) == ("converged", squash)
    assert data["source"]["pr_state"] == "recorded"
    assert "merges are final" in data["source"]["note"] and now in data["source"]["note"]
    assert world.fake.requests() == []
    assert "from the recorded state" in verify(ws).stdout


def test_a_pr_recorded_before_it_merged_is_asked_about(tmp_path, world):
    squash = merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world)
    record_pr(ws, "open")  # `status` last ran before the merge

    code, data, err = verify_json(ws)

    assert code == 0, err
    assert (data["source"]["pr_state"], data["commits"]["merge_commit"]) == ("github", squash)
    assert [r.path for r in world.fake.requests()] == [f"/repos/vllm-project/vllm/pulls/{PR}"]


def test_without_a_token_the_public_upstream_is_asked_unauthenticated(tmp_path, world):
    squash = merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws, GITHUB_TOKEN=None)  # nothing recorded yet

    assert code == 0, err
    assert (data["source"]["pr_state"], data["commits"]["merge_commit"]) == ("github", squash)
    assert [(r.path, r.auth_present) for r in world.fake.requests()] == [(f"/repos/vllm-project/vllm/pulls/{PR}", False)]


def test_without_github_the_recorded_state_says_what_it_last_saw(tmp_path, world):
    merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world)
    down = {"GITHUB_TOKEN": None, "GITHUB_API_URL": "http://127.0.0.1:9", "PORTTRACK_HTTP_ATTEMPTS": "1"}

    unknown = verify(ws, **down)  # nothing recorded yet
    assert unknown.returncode == ExitCode.UNREACHABLE
    assert "127.0.0.1:9" in unknown.stderr and "not in the recorded state" in unknown.stderr

    now = record_pr(ws, "open")
    stale = verify(ws, **down)
    assert stale.returncode == ExitCode.UNREACHABLE
    assert f"open (as recorded at {now})" in stale.stderr
    assert world.fake.requests() == []


# ------------------------------------------------------------------------------ drops


def queue_patch(ws: WorkspaceHandle, world, squash: str) -> Patch:
    """A queued copy of the PR, as `porttrack import` would have left it."""
    data = git_bytes(world.upstream.path, "format-patch", "-1", "--stdout", squash)
    return queue_mail(ws.root, data, name=f"0001-pr{PR}-skip-sparse-indexer", track=TRACK, pr=PR, title=TITLE,
                      head=world.head(PR), base=f"{squash}~1")


def test_apply_drops_retires_the_queued_patch_and_keeps_evidence(tmp_path, world):
    squash = merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world)
    patch = queue_patch(ws, world, squash)
    w = Workspace(ws.root)

    code, data, err = verify_json(ws, "--apply-drops", "--dry-run")  # shows, changes nothing
    assert code == 0, err
    assert data["drops"][0]["droppable"] and not data["drops"][0]["retired"]
    assert data["recorded"] is None and "dry run" in err
    assert queue_mod.load(w).get(patch.name).state == "queued"
    assert not (ws.root / "state" / "convergence").exists()

    code, data, err = verify_json(ws)  # lists, does not retire
    assert code == 0, err
    assert [(d["kind"], d["ref"], d["droppable"], d["retired"]) for d in data["drops"]] == [("queued-patch", patch.name, True, False)]
    assert "4 of its 4 hunk(s)" in data["drops"][0]["reason"]
    assert queue_mod.load(w).get(patch.name).state == "queued"

    code, data, err = verify_json(ws, "--apply-drops")
    assert code == 0, err
    assert data["drops"][0]["retired"] is True
    retired = queue_mod.load(w).get(patch.name)
    assert retired.state == "converged" and not retired.live
    step = retired.history[-1]
    assert (step.from_, step.to) == ("queued", "converged")
    assert step.evidence == (f"state/convergence/{PR}.json#1",)
    assert squash[:12] in step.why and "ancestry" in step.why
    assert (w.patches_dir / "retired" / patch.file).is_file()
    assert not (w.patches_dir / patch.file).exists()
    assert patch.file not in (w.patches_dir / "series").read_text()


def test_a_queued_patch_is_kept_while_the_fork_lacks_the_change(tmp_path, world):
    squash = merge_pr(world)
    ws = workspace(tmp_path, world)
    patch = queue_patch(ws, world, squash)

    code, data, _ = verify_json(ws, "--apply-drops")

    assert code == 1
    [drop] = data["drops"]
    assert drop["duplicate"] and not drop["droppable"] and not drop["retired"]
    assert queue_mod.load(Workspace(ws.root)).get(patch.name).state == "queued"


@pytest.mark.parametrize("message", ["cherry-pick -x", "through SHA only"])
def test_apply_drops_retires_a_patch_the_fork_carries_through_its_own_port(tmp_path, world, message):
    """Issue 21, class 6: the fork branch carries #PR through its own port (a cherry-pick -x of
    the squash, as `status` finds ports in history) while its upstream base predates the merge.
    The queued copy duplicates that port: --apply-drops retires it. A port that says "through
    SHA only" carries part of the PR: the queued copy stays."""
    squash = merge_pr(world)
    base = git(world.fork, "rev-parse", "upstream/main")
    git(world.fork, "fetch", "-q", "upstream")
    git(world.fork, "update-ref", "refs/remotes/upstream/main", base)  # the base predates the merge
    if message == "cherry-pick -x":
        git(world.fork, "cherry-pick", "-x", squash)
    else:
        git(world.fork, "cherry-pick", "--no-commit", squash)
        git(world.fork, "commit", "-q", "-m", f"Port: upstream #{PR} through {squash[:12]} only")
    ws = workspace(tmp_path, world)
    patch = queue_patch(ws, world, squash)

    code, data, err = verify_json(ws, "--apply-drops")

    assert code == 0, err
    assert (data["verdict"], data["method"], data["ancestry"]["upstream_base"]) == ("converged", "patch-id", False)
    [drop] = data["drops"]
    state = queue_mod.load(Workspace(ws.root)).get(patch.name).state
    if message == "cherry-pick -x":
        assert (drop["droppable"], drop["retired"], state) == (True, True, "converged"), drop
        assert "the fork carries" in drop["reason"]
    else:
        assert (drop["droppable"], drop["retired"], state) == (False, False, "queued"), drop
        assert "only in part" in drop["reason"]


# ------------------------------------------------------------------------------ regression


def test_run_regression_passing(tmp_path, world):
    merge_pr(world)
    fork_sha = world.rebase_fork()
    ws = workspace(tmp_path, world, regression={"command": f"sh -c 'grep -q \"skip the indexer\" \"$1\" && echo ok \"$2\"' sh {MLA} {{ref}}"})

    code, data, err = verify_json(ws, "--run-regression")

    assert code == 0, err
    reg = data["regression"]
    assert reg["passed"] is True and reg["exit_code"] == 0 and reg["workdir"] == "checkout"
    assert reg["output_tail"] == f"ok {fork_sha}"


def test_run_regression_failing_fails_the_check_and_keeps_the_output_tail(tmp_path, world):
    merge_pr(world)
    world.rebase_fork()
    ws = workspace(tmp_path, world, regression={"command": "sh -c 'for i in $(seq 1 100); do echo line $i; done; echo boom >&2; exit 3'"})

    code, data, err = verify_json(ws, "--run-regression")

    assert code == 1
    assert "regression command failed (exit 3)" in err
    assert data["verdict"] == "converged"
    reg = data["regression"]
    assert (reg["passed"], reg["exit_code"]) == (False, 3)
    assert reg["output_tail"].endswith("boom") and "line 100" in reg["output_tail"] and "line 1\n" not in reg["output_tail"]
    human = verify(ws, "--run-regression")
    assert human.returncode == 1 and "regression: FAIL (exit 3" in human.stdout


def test_run_regression_on_another_ref_uses_a_temporary_worktree(tmp_path, world):
    merge_pr(world)
    world.rebase_fork()
    git(world.fork, "branch", "candidate")
    world.fork_commit({"FORK_ONLY.md": "fork\n"}, "A fork-only change on main")
    candidate = git(world.fork, "rev-parse", "candidate")
    ws = workspace(tmp_path, world, regression={"command": "sh -c 'test ! -e FORK_ONLY.md && git rev-parse HEAD'"})

    code, data, err = verify_json(ws, "--run-regression", "--fork-ref", "candidate")

    assert code == 0, err
    assert data["regression"]["workdir"] == "temporary worktree"
    assert data["regression"]["output_tail"] == candidate
    assert git(world.fork, "worktree", "list", "--porcelain").count("worktree ") == 1  # removed again


def test_run_regression_without_a_regression_job_is_a_usage_error(tmp_path, world):
    merge_pr(world)
    out = verify(workspace(tmp_path, world), "--run-regression")
    assert out.returncode == 2
    assert "has no regression job" in out.stderr


# ------------------------------------------------------------------------------ shape


def test_json_shape_is_stable(tmp_path, world):
    merge_pr(world)
    world.rebase_fork()
    _, data, _ = verify_json(workspace(tmp_path, world, regression={"command": "true"}), "--run-regression")
    assert sorted(data) == ["ancestry", "commits", "computed_at", "drops", "hunks", "method", "patch_id", "pr", "reasons",
                            "recorded", "regression", "schema", "source", "summary", "title", "track", "unchanged_since", "verdict"]
    assert sorted(data["commits"]) == ["fork_ref", "fork_sha", "merge_base", "merge_commit", "merge_kind", "merge_parent",
                                       "upstream_base", "upstream_base_sha"]
    assert sorted(data["hunks"][0]) == ["changed_by", "detail", "header", "id", "kind", "method", "path", "state"]
    assert sorted(data["regression"]) == ["command", "duration_s", "exit_code", "output_tail", "passed", "workdir"]
    assert (data["pr"], data["title"], data["track"]) == (PR, TITLE, TRACK)


def test_a_fork_lacking_what_the_pr_builds_on_is_not_called_the_forks_own_version(tmp_path, world):
    """An older fork: upstream changed a function (a prerequisite), then #48407 changed it again.
    The fork has neither image there because it lacks the prerequisite, not because it made its own
    version: the words say what is known (the PR is not in the fork; its pre-image is not there)."""
    world.upstream.commit({MLA: module("mla", {3: "return x + 3  # prerequisite"})}, "A change #48407 builds on")
    world.open_pr(PR, {MLA: module("mla", MLA_EDITS)}, title=TITLE)
    world.squash_merge(PR)
    git(world.fork, "fetch", "-q", "upstream")  # upstream/main has the merge; the fork's branch is older
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1 and data["ancestry"] == {"fork_ref": False, "upstream_base": True}, err
    [h] = [h for h in data["hunks"] if h["state"] == "unknown"]
    assert "fork's own version" not in h["detail"]
    assert "#48407 is not in the fork" in h["detail"] and "its pre-image is not there either" in h["detail"]
    assert {x["state"] for x in data["hunks"]} == {"unknown", "missing"}
