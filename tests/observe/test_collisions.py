"""Collisions ahead: a queued patch and open upstream PRs. One that rewrites the same lines is
reported (status, queue --collisions, --json); one that touches another file is not."""

from __future__ import annotations

import json

from porttrack.diff.hunks import parse_diff
from porttrack.observe.collisions import compare
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
    assert "collisions ahead (3 of 3 open PRs compared):" in text
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


def test_the_weekly_issue_shows_the_collisions_under_the_queue(tmp_path, world):
    from testing.gfm import cmark

    ws = _scene(world, tmp_path)
    shown = ws.run_in_process("report", "weekly", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    queue_section = shown.stdout.split("## Patch queue")[1].split("\n## ")[0]
    head = "Open upstream PRs that would conflict with the queue at the next rebase (all 3 open PRs checked):"
    assert head in queue_section, queue_section
    assert "Rewrites the same lines — with `0001-pr401-queued-change`: both change m.py lines" in queue_section
    assert "Another file" not in queue_section and "compared" not in queue_section
    html = cmark(shown.stdout)
    assert f"<p>{head}</p>\n<ul>\n<li><a href=\"https://redirect.github.com/vllm-project/vllm/pull/402\">#402</a>" in html, queue_section


# -- issue 21, class 5: every page, line numbers carried onto each open PR's base -----------------

PAGE = 20  # GitHub's default page: the old scan read only the first one
RANK_X, RANK_Y, RANK_Z = 50, 230, 100  # pages 3 and 12 of 20 (collide); the far-away edit


def _listing_scene(world, tmp_path, filler: int = 247):
    from datetime import datetime, timedelta, timezone

    world.upstream.commit({"m.py": M, "other.py": O}, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")  # the fork's base: A
    world.open_pr(401, {"m.py": edit(M, {30: "m_30 = 'queued'"})}, "Queued change")
    ws = make_workspace(tmp_path / "ws", {"t": track([401])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    imported = ws.run_in_process("import", "401")
    assert imported.returncode == 0, imported.stderr
    # upstream moves on: ten lines above everything, then #401 itself merges (its line is now 40)
    world.upstream.commit({"m.py": numbered("head", 10) + M}, "a header")
    world.squash_merge(401)
    now = git(world.upstream.path, "show", "-s", "--format=%H", "main")
    moved = (numbered("head", 10) + M).replace("m_30 = 30", "m_30 = 'queued'")
    world.open_pr(501, {"m.py": edit(moved, {40: "m_30 = 'rewritten'"})}, "Rewrites the queued line")
    world.open_pr(502, {"m.py": edit(moved, {39: "m_29 = 'x'", 41: "m_31 = 'y'"})}, "Rewrites around it")
    world.open_pr(503, {"m.py": edit(moved, {30: "m_20 = 'far away'"})}, "Same file, far away")  # line 30 = old 20
    base = datetime(2026, 8, 1, tzinfo=timezone.utc)
    ranks = {RANK_X: 501, RANK_Y: 502, RANK_Z: 503}
    number = 1000
    for rank in range(1, filler + 4):
        if rank not in ranks:
            number += 1
            ranks[rank] = number
            world.fake.put_pull(world.upstream_repo, number, title=f"Filler {number}", base_sha=now, files=[
                {"filename": f"f{number}.py", "status": "modified", "patch": "@@ -1 +1 @@\n-a = 1\n+a = 2"}])
    for rank, n in ranks.items():
        world.fake.put_pull(world.upstream_repo, n, updated_at=(base - timedelta(minutes=rank)).isoformat())
    git(world.fork, "fetch", "-q", "upstream", "main")  # the open PRs' base is in the checkout
    return ws


def test_every_page_is_read_and_lines_are_carried_onto_the_open_prs_base(tmp_path, world):
    ws = _listing_scene(world, tmp_path)
    listed = requests_get_all(world)
    assert [listed.index(n) // PAGE + 1 for n in (501, 502)] == [3, 12]  # the scene is what the test says
    ws.extra_env["PORTTRACK_SEARCH_LIMIT"] = "400"
    world.fake.clear_log()
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)["findings"]["collisions"]
    assert sorted(c["upstream"] for c in found["collisions"]) == [501, 502]  # not #503, far away in the same file
    assert found["open_prs"] == 250 and found["compared_open_prs"] == 250 and found["complete"] is True
    kinds = {o["kind"] for c in found["collisions"] for o in c["overlaps"]}
    assert kinds == {"overlapping-lines"}, found
    listing = [r for r in world.fake.requests() if r.path.endswith("/pulls")]
    files = [r for r in world.fake.requests() if r.path.endswith("/files")]
    print(f"\nrequests: {len(listing)} listing pages, {len(files)} file lists")
    # the three PRs upstream serves refs/pull/N/head for are compared in git; the fillers (no git
    # behind them) from their file lists, the path each took said
    assert len(listing) == 3 and len(files) == 247
    assert found["compared_through_git"] == 3 and found["compared_from_file_lists"] == 247
    assert found["method"] == "git and file lists"
    text = ws.run_in_process("status").stdout
    assert "collisions ahead (250 of 250 open PRs compared):" in text
    # a second run: every answer a 304 from the ETag cache
    world.fake.clear_log()
    again = json.loads(ws.run_in_process("status", "--json").stdout)["findings"]
    assert sorted(c["upstream"] for c in again["collisions"]["collisions"]) == [501, 502]
    log = [r for r in world.fake.requests() if r.path.endswith(("/pulls", "/files"))]
    assert log and all(r.status == 304 for r in log)


def test_a_scan_cut_short_says_incomplete_never_none(tmp_path, world):
    ws = _listing_scene(world, tmp_path)
    ws.extra_env["PORTTRACK_SEARCH_LIMIT"] = "40"
    text = ws.run_in_process("status").stdout
    assert "collisions ahead (" not in text and ": none\n" not in text
    # #501-#503 (git behind them) compared through git, at no request; 37 fillers from file lists
    assert "collisions ahead: incomplete: 40 of 250 open PRs compared:" in text
    assert "(search incomplete: request limit reached" in text
    assert "3 through git" in text and "37 from GitHub's file lists" in text
    # the next run goes on from there: the 37 compared are remembered at their head SHAs (no request)
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)["findings"]["collisions"]
    assert found["complete"] is False and found["open_prs"] == 250 and found["compared_open_prs"] == 3 + 37 + 37
    assert sorted(c["upstream"] for c in found["collisions"]) == [501, 502]


def requests_get_all(world) -> list[int]:
    """The open PRs in GitHub's order, read straight from the emulator (independent of porttrack)."""
    import requests

    numbers, page = [], 1
    while True:
        answer = requests.get(f"{world.fake.base_url}/repos/{world.upstream_repo}/pulls", timeout=10,
                              params={"state": "open", "sort": "updated", "direction": "desc", "per_page": PAGE, "page": page},
                              headers={"Authorization": f"token {world.token}"})
        numbers += [p["number"] for p in answer.json()]
        if 'rel="next"' not in answer.headers.get("Link", ""):
            return numbers
        page += 1


def test_with_a_token_one_run_compares_all_from_file_lists(tmp_path, world):
    """Issue 32, item 2: with a token the searches' default bound (80 requests) needed 4 runs for
    244 open PRs on a host that serves no pull refs; the file lists now take what the hour has."""
    ws = _listing_scene(world, tmp_path)
    ws.extra_env.pop("PORTTRACK_SEARCH_LIMIT", None)
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)["findings"]["collisions"]
    assert found["complete"] is True and found["compared_open_prs"] == 250, found
    assert sorted(c["upstream"] for c in found["collisions"]) == [501, 502]
