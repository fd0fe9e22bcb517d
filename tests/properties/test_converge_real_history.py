"""verify-converged on real vLLM history (issue 30): the slice bundle `../shared/data/vllm-slice.bundle`
(real upstream commits of the tracked PRs' files; its README maps the squash merges).

- the fork at upstream main is converged for every merged tracked PR (it was a false partial for
  #46076: "3 missing" that were there);
- a cherry-pick is converged by patch-id; a hand port of every other hunk is right hunk by hunk;
- upstream's own revert (#49768 reverts #48597) is "undone upstream", naming the revert: never
  converged, never "missing";
- on upstream histories made from the real one: a revert and a re-land with a change (the fork at
  the re-land is never "missing"), a revert resolved by hand next to an earlier edit of a
  neighbouring line (named: the revert, not the edit), and a merge on upstream's first-parent line
  that brought a revert (named: the commit it brought, not the merge);
- ref binding: `fork.branch: origin/X` is `refs/remotes/origin/X`, never HEAD; a missing branch is
  refused; a tag named like the branch never stands in for it.

A missing bundle fails these tests (never a skip): CI keeps ../shared beside the clone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from porttrack.diff import hunks as hunks_mod
from testing.realhistory import (
    SLICE_MERGES,
    SLICE_TIP,
    apply_change,
    cherry_pick,
    commit_tree,
    diff,
    git,
    hand_port,
    make_fork,
    record_merges,
    slice_bundle,
    upstream_from_bundle,
)
from testing.workspace import make_workspace, track

REVERTED = 48597  # "[Perf][GLM-5.2] Blackwell decode optimizations", reverted upstream by #49768
REVERTED_MERGE = "d5980ef56c2253d919d9f22d78a1ad9d0e9eaed1"
REVERT = "e511c63bff5afd3f56131223ad6f3e2a86a125cf"
MERGES = {**SLICE_MERGES, REVERTED: REVERTED_MERGE}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    return upstream_from_bundle(slice_bundle(), tmp_path_factory.mktemp("slice") / "upstream.git")


@pytest.fixture
def fork(upstream: Path, tmp_path: Path) -> Path:
    return make_fork(upstream, tmp_path / "fork", main=SLICE_TIP)


def workspace(tmp_path: Path, fork: Path, **fork_options):
    ws = make_workspace(tmp_path / "ws", {f"t{pr}": track([pr]) for pr in MERGES}, fork=fork, token=None,
                        fork_options=fork_options or None)
    record_merges(ws.root, MERGES)
    return ws


def verify(ws, pr: int, *args: str) -> tuple[int, dict, str]:
    out = ws.run_in_process("verify-converged", str(pr), "--json", "--dry-run", *args, env=ws.env())
    return out.returncode, (json.loads(out.stdout) if out.stdout.startswith("{") else {}), out.stderr


def hunks_of(fork: Path, merge: str):
    return hunks_mod.parse_diff(diff(fork, f"{merge}^", merge))


def test_the_slice_is_the_real_history_its_readme_describes(upstream):
    assert git(upstream, "rev-parse", "refs/heads/main") == SLICE_TIP
    assert int(git(upstream, "rev-list", "--count", "main")) == 768
    for pr, merge in MERGES.items():
        assert git(upstream, "log", "-1", "--format=%s", merge).endswith(f"(#{pr})")


def test_upstream_main_is_converged_for_every_merged_tracked_pr(tmp_path, fork):
    ws = workspace(tmp_path, fork)
    for pr in SLICE_MERGES:
        code, data, err = verify(ws, pr)
        s = data["summary"]
        assert (code, data["verdict"], data["method"]) == (0, "converged", "ancestry"), (pr, err)
        assert s["missing"] == s["unknown"] == s["undone_upstream"] == 0
        assert data["commits"]["fork_ref"] == "refs/heads/main"
        assert data["commits"]["upstream_base"] == "refs/remotes/upstream/main"
    # #46076 was the false partial (24 present, 32 after churn, 3 "missing" that are there)
    code, data, _ = verify(ws, 46076)
    assert data["summary"]["hunks"] == 59 and data["summary"]["present_after_churn"] > 0
    churned = [h for h in data["hunks"] if h["state"] == "present-after-churn"]
    # each names an upstream commit after the merge that touched those lines, not merely the file
    assert all(h["changed_by"]["upstream"] for h in churned)
    assert {h["changed_by"]["commit"] for h in churned} <= set(git(fork, "rev-list", f"{SLICE_MERGES[46076]}..main").split())


def test_upstreams_revert_is_undone_upstream_naming_the_revert_never_converged(tmp_path, fork):
    ws = workspace(tmp_path, fork)
    code, data, err = verify(ws, REVERTED)
    assert code == 1, err
    assert data["verdict"] == "undone-upstream"
    states = {h["state"] for h in data["hunks"]}
    assert "missing" not in states and "unknown" not in states and "undone-upstream" in states
    undone = [h for h in data["hunks"] if h["state"] == "undone-upstream"]
    assert {h["changed_by"]["commit"] for h in undone} == {REVERT}
    human = ws.run_in_process("verify-converged", str(REVERTED), "--dry-run", env=ws.env())
    assert human.returncode == 1 and "UNDONE UPSTREAM by e511c63bff5a" in human.stdout


def test_a_cherry_pick_is_converged_by_patch_id(tmp_path, fork):
    merge = SLICE_MERGES[46849]
    own = commit_tree(fork, f"{merge}^", git(fork, "rev-parse", f"{merge}^^{{tree}}"), "The fork's own commit")
    git(fork, "update-ref", "refs/heads/main", cherry_pick(fork, own, merge, "Take #46849"))
    ws = workspace(tmp_path, fork)
    code, data, err = verify(ws, 46849)
    assert (code, data["verdict"], data["method"]) == (0, "converged", "patch-id"), err
    assert {h["state"] for h in data["hunks"]} == {"present"}


def test_a_partial_hand_port_is_right_hunk_by_hunk(tmp_path, fork):
    merge = SLICE_MERGES[48407]
    files = hunks_of(fork, merge)
    keep = {(fd.path, i) for fd in files for i, h in enumerate(fd.hunks) if i % 2 == 0 and h.kind == "text"}
    git(fork, "update-ref", "refs/heads/main", hand_port(fork, f"{merge}^", merge, lambda p, i: (p, i) in keep, "Port part of #48407"))
    ws = workspace(tmp_path, fork)
    code, data, err = verify(ws, 48407)
    assert (code, data["verdict"], data["method"]) == (1, "partially-converged", "content"), err
    want = {h.id: "present" if (fd.path, i) in keep else "missing" for fd in files for i, h in enumerate(fd.hunks)}
    assert {h["id"]: h["state"] for h in data["hunks"]} == want
    assert 0 < sum(v == "present" for v in want.values()) < len(want)


def _upstream_line(fork: Path, *commits: str) -> None:
    """Make upstream's main (and the fork's main, at it) the last of `commits`."""
    git(fork, "update-ref", "refs/remotes/upstream/main", commits[-1])
    git(fork, "update-ref", "refs/heads/main", commits[-1])


def test_a_revert_and_a_reland_with_a_change_is_never_missing_at_the_reland(tmp_path, fork):
    merge = SLICE_MERGES[46849]
    change = diff(fork, f"{merge}^", merge)
    revert = apply_change(fork, merge, diff(fork, merge, f"{merge}^"), 'Revert "#46849"')
    edited = {}

    def edit(path: str, data: bytes) -> bytes | None:
        if path.endswith(".py") and not edited and b"    return " in data:
            edited[path] = True
            return data.replace(b"    return ", b"    return  ", 1)  # one line of the re-land differs
        return None

    reland = apply_change(fork, revert, change, "Reland #46849 (with a fix)", edit=edit)
    ws = workspace(tmp_path, fork)

    _upstream_line(fork, revert)
    code, data, err = verify(ws, 46849)
    assert (code, data["verdict"]) == (1, "undone-upstream"), err
    assert {h["changed_by"]["commit"] for h in data["hunks"] if h["state"] == "undone-upstream"} == {revert}
    assert not any(h["state"] in ("missing", "unknown") for h in data["hunks"])

    _upstream_line(fork, revert, reland)
    code, data, err = verify(ws, 46849)
    assert (code, data["verdict"]) == (0, "converged"), err
    churned = [h for h in data["hunks"] if h["state"] == "present-after-churn"]
    assert churned and {h["changed_by"]["commit"] for h in churned} == {reland}


def test_a_revert_resolved_by_hand_names_the_revert_not_an_earlier_edit_of_a_neighbour(tmp_path, fork):
    merge = SLICE_MERGES[48407]
    files = [fd for fd in hunks_of(fork, merge) if fd.status == "modified" and any(
        h.kind == "text" and h.removed_lines() and h.added_lines() for h in fd.hunks)]
    fd = files[0]
    h = next(h for h in fd.hunks if h.kind == "text" and h.removed_lines() and h.added_lines())
    added, removed = h.added_lines(), h.removed_lines()
    context = next(c for m, c in h._lines() if m == b" " and c.strip())

    def retype(path: str, data: bytes) -> bytes | None:  # a neighbouring (context) line, retyped
        return data.replace(context + b"\n", context.rstrip() + b"  # retyped\n", 1) if path == fd.path else None

    def revert_by_hand(path: str, data: bytes) -> bytes | None:  # the PR's lines back to the original, nothing else
        if path != fd.path:
            return None
        new = b"\n".join(added) + b"\n"
        assert new in data
        return data.replace(new, b"\n".join(removed) + b"\n", 1)

    edit = _edit_file(fork, merge, fd.path, retype, "Tidy a neighbouring line")
    revert = _edit_file(fork, edit, fd.path, revert_by_hand, f"Revert the change to {fd.path} (resolved by hand)")
    _upstream_line(fork, edit, revert)
    ws = workspace(tmp_path, fork)
    code, data, err = verify(ws, 48407)
    assert code == 1 and data["verdict"] != "converged", err
    [mine] = [r for r in data["hunks"] if r["id"] == h.id]
    assert (mine["state"], mine["changed_by"]["commit"]) == ("undone-upstream", revert)


def _edit_file(fork: Path, onto: str, path: str, edit, message: str) -> str:
    """A commit on `onto` changing only `path`, by `edit(path, bytes)`."""
    data = subprocess.run(["git", "-C", str(fork), "cat-file", "blob", f"{onto}:{path}"], capture_output=True, check=True).stdout
    index = fork / ".git" / "edit.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        git(fork, "read-tree", onto, env=env)
        mode = git(fork, "ls-files", "-s", "--", path, env=env).split()[0]
        blob = git(fork, "hash-object", "-w", "--stdin", input=edit(path, data))
        git(fork, "update-index", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = git(fork, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)
    return git(fork, "commit-tree", tree, "-p", onto, "-m", message)


def test_a_merge_on_upstreams_line_names_the_commit_it_brought(tmp_path, fork):
    """Merge-heavy history: upstream's first-parent line merges a side branch that reverted the
    PR's lines; the undoing is named after the side branch's commit, not the merge."""
    merge = SLICE_MERGES[46849]
    side = apply_change(fork, merge, diff(fork, merge, f"{merge}^"), 'Revert "#46849" on the stable line')
    own = commit_tree(fork, merge, git(fork, "rev-parse", f"{merge}^{{tree}}"), "Mainline commit")
    merged = git(fork, "commit-tree", git(fork, "rev-parse", f"{side}^{{tree}}"), "-p", own, "-p", side, "-m", "Merge stable into main")
    _upstream_line(fork, merged)
    ws = workspace(tmp_path, fork)
    code, data, err = verify(ws, 46849)
    assert (code, data["verdict"]) == (1, "undone-upstream"), err
    named = {h["changed_by"]["commit"] for h in data["hunks"] if h["state"] == "undone-upstream"}
    assert named == {side}


# ------------------------------------------------------------------------------------ binding


def test_fork_branch_origin_x_is_the_remote_tracking_branch_never_head(tmp_path, fork):
    merge = SLICE_MERGES[48407]
    git(fork, "update-ref", "refs/heads/main", f"{merge}^")  # HEAD lacks the merge
    git(fork, "update-ref", "refs/remotes/origin/release", SLICE_TIP)  # origin/release has it
    ws = workspace(tmp_path, fork, branch="origin/release")
    out = ws.run_in_process("verify-converged", "48407", "--json", "--dry-run", env=ws.env())
    data = json.loads(out.stdout)
    assert (out.returncode, data["verdict"], data["commits"]["fork_ref"]) == (0, "converged", "refs/remotes/origin/release")
    assert "fork ref refs/remotes/origin/release (fork.branch origin/release)" in out.stderr

    ws = workspace(tmp_path / "missing", fork, branch="nosuch")
    out = ws.run_in_process("verify-converged", "48407", "--json", "--dry-run", env=ws.env())
    assert out.returncode != 0 and not out.stdout
    assert "fork.branch 'nosuch' is not a branch of the fork checkout" in out.stderr


def test_a_tag_named_like_the_fork_branch_never_stands_in_for_it(tmp_path, fork):
    merge = SLICE_MERGES[48407]
    git(fork, "update-ref", "refs/heads/release", f"{merge}^")  # the branch lacks #48407
    git(fork, "update-ref", "refs/tags/release", SLICE_TIP)  # a tag of the same name has it
    ws = workspace(tmp_path, fork, branch="release")
    code, data, err = verify(ws, 48407)
    assert code == 1 and data["verdict"] == "not-converged", err
    assert data["commits"]["fork_ref"] == "refs/heads/release"
    assert data["commits"]["fork_sha"] == git(fork, "rev-parse", f"{merge}^")


# ----------------------------------------------------------------------------- commit-graph


def test_a_fetch_keeps_the_commit_graph_current_with_its_bloom_filters(tmp_path, upstream):
    """`porttrack init` writes a commit-graph with changed-path Bloom filters; every fetch porttrack
    makes adds the fetched commits to it (issue 34), so the churn walk stays fast after a fetch."""
    from porttrack.git.repo import GitRepo

    old = git(upstream, "rev-parse", f"{SLICE_MERGES[46076]}^")
    fork = tmp_path / "fork"
    subprocess.run(["git", "init", "-q", "-b", "main", str(fork)], check=True)
    git(fork, "fetch", "-q", str(upstream), f"{old}:refs/remotes/upstream/main")
    git(fork, "remote", "add", "upstream", str(upstream))
    git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
    repo = GitRepo.open(fork)
    assert repo.commit_graph([old]).state == "ok"
    assert repo.commit_graph([SLICE_TIP]).state != "ok"  # not fetched yet

    repo.fetch("upstream", ["+refs/heads/main:refs/remotes/upstream/main"])

    assert git(fork, "rev-parse", "refs/remotes/upstream/main") == SLICE_TIP
    graph = repo.commit_graph([SLICE_TIP])
    assert graph.state == "ok", graph
    layers = sorted((fork / ".git" / "objects" / "info" / "commit-graphs").glob("graph-*.graph"))
    assert layers and all(b"BIDX" in layer.read_bytes() for layer in layers)  # the Bloom filters came along


def test_status_after_an_undone_upstream_verdict_never_says_port_the_missing_hunks(tmp_path, fork):
    ws = workspace(tmp_path, fork)
    out = ws.run_in_process("verify-converged", str(REVERTED), "--json", env=ws.env())  # recorded
    assert out.returncode == 1 and json.loads(out.stdout)["verdict"] == "undone-upstream"
    status = ws.run_in_process("status", "--offline", "--json", env=ws.env())
    assert status.returncode == 0, status.stderr
    [pr] = [p for t in json.loads(status.stdout)["tracks"] for p in t["prs"] if p["number"] == REVERTED]
    text = pr["next_action"]["text"]
    assert "upstream has since undone part of it" in text and "keep carrying those hunks or drop them" in text
    assert "port the missing hunks" not in text


def test_import_on_a_fork_that_has_the_pr_after_churn_says_already_present_never_a_conflict(tmp_path, fork):
    """The fork at upstream main has #46076 (merged, then changed by later upstream commits): verify
    says present / present after churn for every hunk. `import` must agree: every hunk already in
    the fork, none "conflicts with fork", nothing queued, and a clear message."""
    ws = workspace(tmp_path, fork)
    _code, data, _err = verify(ws, 46076)
    churned = {h["id"] for h in data["hunks"] if h["state"] == "present-after-churn"}
    assert churned and data["verdict"] == "converged"
    out = ws.run_in_process("import", "46076", "--offline", "--json", env=ws.env())
    assert out.stdout.startswith("{"), out.stderr
    plan = json.loads(out.stdout)
    hunks = plan.get("hunks") or plan["plan"]["hunks"]
    reasons = {h["id"]: (h.get("reason") or "") for h in hunks}
    assert not [r for r in reasons.values() if "conflicts with fork" in r], reasons
    assert all("already in the fork" in reasons[hid] for hid in churned), reasons
    assert all("upstream" in reasons[hid] for hid in churned)  # says the fork has upstream's later form
    assert not any(h["taken"] for h in hunks) and out.returncode == 1
    human = ws.run_in_process("import", "46076", "--offline", env=ws.env())
    assert human.returncode == 1 and "conflicts with fork" not in human.stdout
    assert "#46076 is already in the fork: every hunk is there" in human.stderr, human.stderr
    assert ws.run_in_process("queue", "--json", env=ws.env()).stdout.count('"name"') == 0  # nothing queued
