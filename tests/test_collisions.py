"""Collisions ahead: a queued patch and open upstream PRs. One that rewrites the same lines is
reported (status, queue --collisions, --json); one that touches another file is not."""

from __future__ import annotations

import json

from porttrack.collisions import compare
from porttrack.hunks import parse_diff
from testing.gitfixtures import git
from testing.text import edit, numbered
from testing.workspace import make_workspace, track

M, O = numbered("m", 40), numbered("o", 20)


def _scene(world, tmp_path):
    world.upstream.commit({"m.py": M, "other.py": O}, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    world.open_pr(401, {"m.py": edit(M, {10: "m_10 = 'queued'"})}, "Queued change")
    world.open_pr(402, {"m.py": edit(M, {11: "m_11 = 'rewritten upstream'"})}, "Rewrites the same lines")
    world.open_pr(403, {"other.py": edit(O, {10: "o_10 = 'elsewhere'"})}, "Another file")
    world.open_pr(404, {"m.py": edit(M, {35: "m_35 = 'far away'"})}, "Same file, other lines")
    ws = make_workspace(tmp_path / "ws", {"t": track([401])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    imported = ws.run_in_process("import", "401")
    assert imported.returncode == 0, imported.stderr
    return ws


def test_open_pr_on_the_same_lines_collides_another_file_does_not(tmp_path, world):
    ws = _scene(world, tmp_path)
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)["findings"]["collisions"]
    assert found["compared_open_prs"] == 3  # 402, 403, 404; the tracked #401 itself is left out
    assert [(c["upstream"], c["patch_pr"]) for c in found["collisions"]] == [(402, 401)]
    overlap = found["collisions"][0]["overlaps"][0]
    assert overlap["kind"] == "overlapping-lines" and overlap["path"] == "m.py"
    text = ws.run_in_process("status").stdout
    assert "collisions ahead (open upstream PRs compared: 3):" in text
    assert "open #402 (Rewrites the same lines) collides with" in text and "#403" not in text.split("collisions ahead")[1]

    queue = ws.run_in_process("queue", "--collisions", "--json")
    assert queue.returncode == 0, queue.stderr
    assert [c["upstream"] for c in json.loads(queue.stdout)["collisions"]["collisions"]] == [402]
    assert "open #402" in ws.run_in_process("queue", "--collisions").stdout


def _diff(world, number):
    head = world.head(number)
    return parse_diff(git(world.upstream.path, "diff", f"main...{head}").encode())


def test_the_same_hunk_is_named_by_its_id(tmp_path, world):
    world.upstream.commit({"m.py": M}, "project files")
    world.open_pr(410, {"m.py": edit(M, {20: "m_20 = 'x'"})}, "one")
    world.open_pr(411, {"m.py": edit(M, {20: "m_20 = 'x'"})}, "the same change")
    mine = [h for fd in _diff(world, 410) for h in fd.text_hunks]
    theirs = [h for fd in _diff(world, 411) for h in fd.text_hunks]
    assert [(o.kind, o.detail) for o in compare(mine, theirs)] == [("same-hunk", mine[0].id)]
