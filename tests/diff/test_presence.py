"""Presence is proven, never assumed (issue 11, Build 1 and 3): generated repositories for each case
the issue reports, against real git and the GitHub emulator.

The PR here is modelled on #48407 as it met a real fork: seven modules changed plus a new test file.
The fork ports some of it by hand (new SHAs, so ancestry and patch-id do not decide), upstream
later rewrites the PR's own lines in the modules the fork did not port, and porttrack must not
mistake that churn for presence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porttrack.diff import presence
from porttrack.diff.hunks import parse_diff
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Patch
from porttrack.workspace.files import Workspace
from testing.gitfixtures import git, git_bytes
from testing.queueing import queue_mail
from testing.workspace import TestWorkspace as WorkspaceHandle  # (renamed: pytest would collect Test*)
from testing.workspace import make_workspace, track

PR = 48407
TRACK = "sparse-indexer-skip"
TITLE = "[Attention] Skip sparse indexer scoring for dense short prefills"
MODS = [f"vllm/attention/mod{i}.py" for i in range(7)]
TEST = "tests/attention/test_short_prefill.py"
PORTED, UNPORTED = MODS[:3], MODS[3:]


def module(name: str, edits: dict[int, str] | None = None) -> str:
    """40 two-line functions; `edits` replaces function i's body line."""
    lines = [f"def {name}_{i}(x):\n    return x + {i}\n" for i in range(40)]
    for i, body in (edits or {}).items():
        lines[i] = f"def {name}_{i}(x):\n    {body}\n"
    return "".join(lines)


PR_EDITS = {5: "return x  # dense short prefill: skip the indexer", 30: "return x * 2  # indexer topk"}
LATER_EDITS = {5: "return x >> 1  # upstream's later rewrite of the skip"}  # rewrites the PR's own line
BASE = {path: module(f"m{i}") for i, path in enumerate(MODS)}
CHANGE = {**{path: module(f"m{i}", PR_EDITS) for i, path in enumerate(MODS)},
          TEST: "".join(f"def test_case_{i}():\n    assert True\n" for i in range(10))}
LATER = {path: module(f"m{MODS.index(path)}", {**PR_EDITS, **LATER_EDITS}) for path in UNPORTED}


@pytest.fixture
def world(world):
    world.upstream.commit(BASE, "Add the attention modules")
    world.rebase_fork()
    return world


def workspace(tmp_path: Path, world) -> WorkspaceHandle:
    return make_workspace(tmp_path / "ws", {TRACK: track([PR])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)


def verify_json(ws: WorkspaceHandle, *args: str) -> tuple[int, dict, str]:
    out = ws.run_in_process("verify-converged", str(PR), "--json", *args, env=ws.env())
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout), out.stderr


def by_path(data: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for h in data["hunks"]:
        out.setdefault(h["path"], []).append(h["state"])
    return out


def merged_with_later_churn(world, *, delete_last: bool) -> tuple[str, str]:
    """#PR squash-merged, then upstream rewrites the PR's lines in the 4 unported modules (and,
    with `delete_last`, deletes the last of them instead); the fork's upstream base has both, the
    fork branch has neither. Returns (squash, the later commit)."""
    world.open_pr(PR, CHANGE, title=TITLE)
    squash = world.squash_merge(PR)
    later = dict(LATER)
    if delete_last:
        later[UNPORTED[-1]] = None
    churn = world.upstream.commit(later, "Rework the short-prefill skip")
    git(world.fork, "fetch", "-q", "upstream")
    return squash, churn


def queue_patch(ws: WorkspaceHandle, world, squash: str) -> Patch:
    """A queued copy of the PR, as `porttrack import` would have left it."""
    data = git_bytes(world.upstream.path, "format-patch", "-1", "--stdout", squash)
    return queue_mail(ws.root, data, name=f"0001-pr{PR}-skip-sparse-indexer", track=TRACK, pr=PR, title=TITLE,
                      head=world.head(PR), base=f"{squash}~1")


# ------------------------------------------------------------------------------ the reported case


def test_hand_port_of_3_of_7_files_is_partially_converged_and_drops_nothing(tmp_path, world):
    squash, _ = merged_with_later_churn(world, delete_last=True)
    world.fork_commit({**{p: CHANGE[p] for p in PORTED}, TEST: CHANGE[TEST]}, "Port #48407 (3 of its modules)")
    ws = workspace(tmp_path, world)
    patch = queue_patch(ws, world, squash)

    code, data, err = verify_json(ws, "--apply-drops")

    assert code == 1, err
    assert (data["verdict"], data["method"]) == ("partially-converged", "content")
    states = by_path(data)
    assert all(states[p] == ["present", "present"] for p in PORTED) and states[TEST] == ["present"]
    # The fork never ported these: the pre-image is intact, whatever upstream did to them later.
    assert all(states[p] == ["missing", "missing"] for p in UNPORTED)
    assert data["summary"] == {"hunks": 15, "present": 7, "present_after_churn": 0, "missing": 8, "unknown": 0, "undone_upstream": 0}
    assert "7 present, 0 present after churn, 8 missing, 0 unknown of 15 hunk(s)" in err
    # porttrack's own hunk_state agrees, hunk by hunk.
    diff = git_bytes(world.fork, "diff", f"{squash}~1", squash)
    fork_files = {p: git_bytes(world.fork, "show", f"HEAD:{p}") for p in UNPORTED}
    assert {presence.hunk_state(h, fork_files[fd.path]) for fd in parse_diff(diff) if fd.path in UNPORTED for h in fd.hunks} == {"not-applied"}
    # --apply-drops retired nothing.
    [drop] = data["drops"]
    assert (drop["kind"], drop["droppable"], drop["retired"]) == ("queued-patch", False, False)
    queue = queue_mod.load(Workspace(ws.root))
    assert queue.get(patch.name).state == "queued" and patch.file in (Workspace(ws.root).patches_dir / "series").read_text()


def test_a_fork_that_also_took_upstreams_later_change_is_present_after_churn(tmp_path, world):
    squash, churn = merged_with_later_churn(world, delete_last=False)
    # By hand again: the PR's 3 modules and test, and the other 4 as upstream has them now.
    world.fork_commit({**{p: CHANGE[p] for p in PORTED}, TEST: CHANGE[TEST], **LATER}, "Port #48407 and its follow-up")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 0, err
    assert data["verdict"] == "converged"
    late = [h for h in data["hunks"] if h["path"] in UNPORTED and h["state"] != "present"]
    # Function 5's hunk was rewritten by upstream; function 30's is still as merged.
    assert [(h["path"], h["state"], h["method"]) for h in late] == [(p, "present-after-churn", "churn") for p in UNPORTED]
    assert {h["changed_by"]["commit"] for h in late} == {churn}
    assert data["summary"] == {"hunks": 15, "present": 11, "present_after_churn": 4, "missing": 0, "unknown": 0, "undone_upstream": 0}


def test_a_fork_with_its_own_version_of_rewritten_lines_is_unknown_not_present(tmp_path, world):
    merged_with_later_churn(world, delete_last=False)
    own = {p: module(f"m{MODS.index(p)}", {**PR_EDITS, 5: "return x - 5  # the fork's own take"}) for p in UNPORTED}
    world.fork_commit({**{p: CHANGE[p] for p in PORTED}, TEST: CHANGE[TEST], **own}, "Port #48407, our way")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    assert data["verdict"] == "partially-converged"
    unknown = [h for h in data["hunks"] if h["state"] == "unknown"]
    assert [h["path"] for h in unknown] == UNPORTED
    assert all(h["method"] == "churn" and "neither that form nor" in h["detail"] for h in unknown)
    assert data["summary"]["unknown"] == 4 and data["summary"]["present_after_churn"] == 0


def test_the_prs_own_parent_has_none_of_it(tmp_path, world):
    squash, _ = merged_with_later_churn(world, delete_last=True)
    parent = git(world.fork, "rev-parse", f"{squash}~1")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws, "--fork-ref", parent)

    assert code == 1, err
    assert data["verdict"] == "not-converged"
    assert {h["state"] for h in data["hunks"] if h["path"] != TEST} == {"missing"}
    assert by_path(data)[TEST] == ["missing"]  # absent, and upstream never deleted it
    assert data["summary"] == {"hunks": 15, "present": 0, "present_after_churn": 0, "missing": 15, "unknown": 0, "undone_upstream": 0}
    assert "0 present, 0 present after churn, 15 missing, 0 unknown of 15 hunk(s)" in err


# ------------------------------------------------------------------------------ deleted later


def test_an_added_file_upstream_deleted_later_that_the_fork_never_had_is_not_present(tmp_path, world):
    world.open_pr(PR, {TEST: CHANGE[TEST]}, title=TITLE)
    world.squash_merge(PR)
    deletion = world.upstream.commit({TEST: None}, "Drop the short-prefill test")
    git(world.fork, "fetch", "-q", "upstream")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    [h] = data["hunks"]
    # an added file's pre-image is its absence, and upstream's newest form is that absence: the
    # change is undone upstream (issue 30), naming the deletion -- never present, never "missing"
    assert h["state"] == "undone-upstream" and data["verdict"] == "undone-upstream"
    assert h["changed_by"]["commit"] == deletion and "no such file either" in h["detail"]

    world.rebase_fork()  # now the fork has both the PR and the deletion, by ancestry: still undone upstream
    code, data, err = verify_json(ws)
    assert code == 1, err
    assert [(h["state"], h["method"]) for h in data["hunks"]] == [("undone-upstream", "ancestry")]
    assert data["hunks"][0]["changed_by"]["commit"] == deletion


def test_a_file_deleted_upstream_later_that_the_fork_still_has_unported_is_missing(tmp_path, world):
    merged_with_later_churn(world, delete_last=True)
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    gone = [h for h in data["hunks"] if h["path"] == UNPORTED[-1]]
    assert [h["state"] for h in gone] == ["missing", "missing"]
    assert all("pre-image still at the fork ref" in h["detail"] for h in gone)


# ------------------------------------------------------------------------------ first and last lines


EDGES = {"short.txt": "first\nb\nc\nd\nlast\n", "long.txt": "".join(f"line {i}\n" for i in range(1, 13))}
EDGES_CUT = {"short.txt": "b\nc\nd\n", "long.txt": "".join(f"line {i}\n" for i in range(2, 12))}


@pytest.mark.parametrize("ported", [False, True], ids=["not-ported", "ported"])
def test_deleting_the_first_and_the_last_line_of_a_file(tmp_path, world, ported):
    world.upstream.commit(EDGES, "Add the edge files")
    world.rebase_fork()
    world.open_pr(PR, EDGES_CUT, title=TITLE)
    squash = world.squash_merge(PR)
    git(world.fork, "fetch", "-q", "upstream")
    if ported:
        world.fork_commit(EDGES_CUT, "Port #48407 by hand")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    headers = [(h["path"], h["header"].split(" @@")[0]) for h in data["hunks"]]
    assert headers == [("long.txt", "@@ -1,4 +1,3"), ("long.txt", "@@ -9,4 +8,3"), ("short.txt", "@@ -1,5 +1,3")]
    if ported:
        assert code == 0, err
        assert {h["state"] for h in data["hunks"]} == {"present"}
    else:
        assert code == 1
        assert data["verdict"] == "not-converged"
        assert {h["state"] for h in data["hunks"]} == {"missing"}
        # The content check itself: the remaining lines occur in the untouched file, but not where
        # the hunk must sit (at its start or its end).
        untouched = {p: git_bytes(world.fork, "show", f"HEAD:{p}") for p in EDGES}
        for fd in parse_diff(git_bytes(world.fork, "diff", f"{squash}~1", squash)):
            for h in fd.hunks:
                assert not presence.post_image_present(h, untouched[fd.path]), h.body
                assert presence.hunk_state(h, untouched[fd.path]) == "not-applied"


def test_anchoring_follows_git_apply_for_a_hunk_in_the_middle():
    """A hunk with context on both sides is found anywhere (the fork may have moved it)."""
    [fd] = parse_diff(b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -4,7 +4,6 @@\n c\n d\n e\n-x\n f\n g\n h\n")
    [h] = fd.hunks
    moved = b"".join(b"%d\n" % i for i in range(20)) + b"c\nd\ne\nf\ng\nh\n"
    assert presence.hunk_state(h, moved) == "applied"
    assert presence.hunk_state(h, b"c\nd\ne\nx\nf\ng\nh\n") == "not-applied"


# ------------------------------------------------------------------------------ renames


@pytest.mark.parametrize("ported", [False, True], ids=["not-ported", "ported"])
def test_a_renamed_and_edited_file_the_fork_still_has_under_its_old_name_is_missing(tmp_path, world, ported):
    old, new = MODS[0], "vllm/attention/renamed.py"
    world.open_pr(PR, {old: None, new: CHANGE[old]}, title=TITLE)
    world.squash_merge(PR)
    git(world.fork, "fetch", "-q", "upstream")
    if ported:
        world.fork_commit({old: None, new: CHANGE[old]}, "Port #48407 by hand")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert {h["path"] for h in data["hunks"]} == {new}  # one entry, a rename with edits
    if ported:
        assert code == 0, err
        assert {h["state"] for h in data["hunks"]} == {"present"}
    else:
        assert code == 1
        assert {h["state"] for h in data["hunks"]} == {"missing"}
        assert all(f"not renamed at the fork ref: {old} is still there" in h["detail"] for h in data["hunks"])


def test_a_side_branch_cut_before_the_merge_is_not_taken_for_later_churn(tmp_path, world):
    """Upstream merges (true merge) a branch cut before #PR merged that touched the same file
    elsewhere. Its commit lacks the PR's post-image for want of the merge, not because it
    rewrote those lines: it must not count as the later change C, even for a fork that has it."""
    side = {MODS[3]: module("m3", {20: "return 20  # side branch"})}
    world.open_pr(PR + 1, side, title="An unrelated change, cut before #48407 merged")
    world.open_pr(PR, CHANGE, title=TITLE)
    world.squash_merge(PR)
    world.merge(PR + 1)
    git(world.fork, "fetch", "-q", "upstream")
    # The fork has the side change, and its own version of #PR's first line in that module.
    world.fork_commit({MODS[3]: module("m3", {**PR_EDITS, 5: "return x - 5  # our own", 20: "return 20  # side branch"})}, "Our way")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    first = next(h for h in data["hunks"] if h["path"] == MODS[3] and "m3_3" in h["header"])
    assert first["state"] == "unknown" and first["changed_by"] is None
    assert "upstream still has the post-image" in first["detail"]


@pytest.mark.parametrize("by", ["fork", "upstream"])
def test_with_ancestry_a_reverted_hunk_is_missing_not_churn(tmp_path, world, by):
    """The merge commit is in the fork ref, but a later commit put one module back as it was
    before #PR: its pre-image is at the fork ref again. Reverted by the fork: missing, naming the
    fork's commit; reverted upstream: undone upstream (upstream's newest form is the pre-image),
    naming upstream's commit -- never converged either way."""
    world.open_pr(PR, CHANGE, title=TITLE)
    world.squash_merge(PR)
    if by == "upstream":
        revert = world.upstream.commit({MODS[0]: BASE[MODS[0]]}, "Revert the skip in mod0")
        world.rebase_fork()
    else:
        world.rebase_fork()
        revert = world.fork_commit({MODS[0]: BASE[MODS[0]]}, "Revert the skip in mod0 for now")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    state = "undone-upstream" if by == "upstream" else "missing"
    assert (data["verdict"], data["method"]) == ("undone-upstream" if by == "upstream" else "partially-converged", "ancestry")
    reverted = [h for h in data["hunks"] if h["path"] == MODS[0]]
    assert [(h["state"], h["changed_by"]["commit"], h["changed_by"]["upstream"]) for h in reverted] == [(state, revert, by == "upstream")] * 2
    assert data["summary"] == {"hunks": 15, "present": 13, "present_after_churn": 0, "missing": 2 * (by == "fork"), "unknown": 0,
                               "undone_upstream": 2 * (by == "upstream")}


def test_a_cherry_pick_reverted_since_is_missing_not_present_by_patch_id(tmp_path, world):
    world.open_pr(PR, CHANGE, title=TITLE)
    squash = world.squash_merge(PR)
    git(world.fork, "fetch", "-q", "upstream")
    git(world.fork, "cherry-pick", squash)
    git(world.fork, "revert", "--no-edit", "HEAD")
    ws = workspace(tmp_path, world)

    code, data, err = verify_json(ws)

    assert code == 1, err
    assert (data["verdict"], data["method"]) == ("not-converged", "patch-id")
    assert {(h["state"], h["method"]) for h in data["hunks"]} == {("missing", "patch-id")}
    assert all("pre-image is back" in h["detail"] for h in data["hunks"])
