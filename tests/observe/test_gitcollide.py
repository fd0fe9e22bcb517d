"""Collisions through git (issue 32, item 1): every open PR's head fetched from refs/pull/N/head and
diffed locally against its merge-base, so every file and changed line is seen at no counted
request. The acceptance case: 250 open PRs; colliders on pages 3 and 12 (20 a page) that insert
lines among the queued ones, change a file the queue adds, rename a queued file and nothing else,
and change a queued file as the 301st file of a 310-file PR; the queue imported against an older
base (upstream then moved every line and merged the queued change); a far edit in the same file."""

from __future__ import annotations

import json

import pytest

from testing import openprs
from testing.gitfixtures import git
from testing.text import numbered
from testing.workspace import make_workspace, track

M, R, Z = numbered("m", 40), numbered("r", 12), numbered("z", 20)
NEW = numbered("new", 6)
PAGE = 20
INSERTS, ADDS_TO_NEW, RENAMES, FILE_301, FAR = 70001, 70002, 70003, 70004, 70005
RANKS = {INSERTS: 45, ADDS_TO_NEW: 50, RENAMES: 225, FILE_301: 230, FAR: 100}  # pages 3, 3, 12, 12; the far edit page 6


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _insert(text: str, after: int, new: list[str]) -> str:
    lines = _lines(text)
    return "".join(lines[:after] + [n + "\n" for n in new] + lines[after:])


def _replace(text: str, line: int, new: str) -> str:
    lines = _lines(text)
    lines[line - 1] = new + "\n"
    return "".join(lines)


def _scene(world, tmp_path, total: int = 250, merged: bool = True):
    world.upstream.commit({"m.py": M, "r.py": R, "zq.py": Z}, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")  # the fork's base: the older one
    queued = {"m.py": _insert(M, 30, ["q_a = 'queued'", "q_b = 'queued'"]), "new.py": NEW,
              "r.py": _replace(R, 5, "r_5 = 'queued'"), "zq.py": _replace(Z, 10, "z_10 = 'queued'")}
    world.open_pr(401, queued, "Queued change")
    ws = make_workspace(tmp_path / "ws", {"t": track([401])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    imported = ws.run_in_process("import", "401")
    assert imported.returncode == 0, imported.stderr
    # upstream moves on: ten lines above everything in m.py, then (usually) #401 itself merges
    head = numbered("head", 10)
    world.upstream.commit({"m.py": head + M}, "a header")
    if merged:
        world.squash_merge(401)
    now = world.upstream.tip()
    m_now = git(world.upstream.path, "show", f"{now}:m.py") + "\n"
    inserted_at = 10 + 30  # the queued lines are lines 41-42 of m.py now (when merged)
    prs: dict[int, dict] = {}
    order = {rank: n for n, rank in RANKS.items()}
    filler = 80000
    for rank in range(total):
        if rank in order:
            continue
        filler += 1
        order[rank] = filler
    wanted = {
        INSERTS: {"m.py": _insert(m_now, inserted_at + 1, ["between = 'the queued lines'"]) if merged
                  else _insert(m_now, inserted_at, ["right = 'where the queue inserts'"])},
        ADDS_TO_NEW: {"new.py": _replace(NEW, 3, "new_3 = 'changed upstream'")} if merged else {"new.py": "their own new file\n"},
        FILE_301: {**{f"a/{i:03d}.py": f"a{i}\n" for i in range(300)},
                   "zq.py": _replace(Z, 10, "z_10 = 'upstream'")},
        FAR: {"m.py": _replace(m_now, 3, "head_3 = 'far away'")},
    }
    for rank in sorted(order):
        n = order[rank]
        prs[n] = wanted.get(n, {f"o/o{n}.py": f"open {n}\n"})
    prs[RENAMES] = {}
    from datetime import datetime, timedelta, timezone

    start = datetime(2026, 8, 1, tzinfo=timezone.utc)
    updated = {n: start - timedelta(minutes=rank) for rank, n in order.items()}
    openprs.seed(world, prs, now, updated=updated, renames={RENAMES: ("r.py", "r2.py")},
                 real_files=False)
    for n in (INSERTS, ADDS_TO_NEW, FILE_301, RENAMES, FAR):  # their file lists as GitHub gives them
        world.fake.put_pull(world.upstream_repo, n, files=world.pr_files(n), updated_at=updated[n].isoformat())
    return ws


def _listed(world) -> list[int]:
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


def _found(out) -> dict:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["findings"]["collisions"]


def test_all_four_colliders_found_through_git_the_far_edit_not_complete_on_the_first_run(tmp_path, world):
    ws = _scene(world, tmp_path)
    listed = _listed(world)
    assert len(listed) == 250
    assert [listed.index(n) // PAGE + 1 for n in (INSERTS, ADDS_TO_NEW, RENAMES, FILE_301)] == [3, 3, 12, 12]
    files = [f["filename"] for f in world.pr_files(FILE_301)]
    assert files.index("zq.py") == 300, "zq.py is the PR's 301st file"
    world.fake.clear_log()
    found = _found(ws.run_in_process("status", "--json"))
    by_pr = {c["upstream"]: c for c in found["collisions"]}
    assert sorted(by_pr) == [INSERTS, ADDS_TO_NEW, RENAMES, FILE_301], found["collisions"]
    assert found["complete"] is True and found["open_prs"] == 250 and found["compared_open_prs"] == 250
    assert found["compared_through_git"] == 250 and found["method"] == "git"
    assert [o["kind"] for o in by_pr[RENAMES]["overlaps"]] == ["renamed"]
    assert by_pr[RENAMES]["overlaps"][0]["detail"] == "r2.py"
    assert {o["path"] for o in by_pr[FILE_301]["overlaps"]} == {"zq.py"}
    assert {o["path"] for o in by_pr[ADDS_TO_NEW]["overlaps"]} == {"new.py"}
    assert {o["path"] for o in by_pr[INSERTS]["overlaps"]} == {"m.py"}
    asked = [r for r in world.fake.requests() if r.path.endswith("/files")]
    assert asked == [], "no file list was asked: git answered for every PR"
    text = ws.run_in_process("status").stdout
    assert "collisions ahead (250 of 250 open PRs compared):" in text
    assert "250 through git" in text


def test_queue_not_merged_upstream_the_same_colliders_by_insertion_and_added_file(tmp_path, world):
    """The queued change not in upstream: a PR inserting at the queued insertion point collides, a
    PR adding the file the queue adds collides, the far edit does not."""
    ws = _scene(world, tmp_path, total=40, merged=False)
    found = _found(ws.run_in_process("status", "--json"))
    assert sorted(c["upstream"] for c in found["collisions"]) == [INSERTS, ADDS_TO_NEW, RENAMES, FILE_301]
    assert found["complete"] is True and found["compared_through_git"] == found["open_prs"] == 45  # 40 + the five


def test_a_warm_run_compares_only_what_moved(tmp_path, world):
    ws = _scene(world, tmp_path, total=60)
    first = _found(ws.run_in_process("status", "--json"))
    cache = json.loads((ws.root / ".porttrack" / "collisions.json").read_text())
    assert len(cache["prs"]) == 63  # 58 fillers and the five
    # the far edit is pushed again onto the queued lines: that PR alone is compared again
    m_now = git(world.upstream.path, "show", "main:m.py") + "\n"
    openprs.seed(world, {FAR: {"m.py": _replace(m_now, 41, "q_a = 'rewritten'")}}, world.upstream.tip())
    from porttrack.common import trace  # noqa: F401  (the run's git processes are counted below)

    out = ws.run_in_process("-v", "status", "--json")
    again = _found(out)
    assert sorted(c["upstream"] for c in again["collisions"]) == sorted([*(c["upstream"] for c in first["collisions"]), FAR])
    diffs = [line for line in out.stderr.splitlines() if " diff " in f" {line} " and "-U0" in line]
    assert 1 <= len(diffs) <= 2, diffs  # the moved PR's lines (and at most one base mapping), not 60 PRs' worth


@pytest.mark.parametrize("served", [False])
def test_a_host_that_serves_no_pull_refs_falls_back_to_file_lists_and_says_so(tmp_path, world, served):
    ws = _scene(world, tmp_path, total=30)
    for ref in git(world.upstream.path, "for-each-ref", "--format=%(refname)", "refs/pull/").split():
        n = int(ref.split("/")[2])
        if n != 401:
            git(world.upstream.path, "update-ref", "-d", ref)
    found = _found(ws.run_in_process("status", "--json"))
    assert found["method"] == "file lists" and found["compared_through_git"] == 0
    assert found["compared_open_prs"] == 35  # 30 fillers and the five
    # the file lists stop at 300 files: the 301st file's collision is not seen that way
    assert sorted(c["upstream"] for c in found["collisions"]) == [INSERTS, ADDS_TO_NEW, RENAMES]
    text = ws.run_in_process("status").stdout
    assert "from GitHub's file lists" in text and "serves no refs/pull/" in text


def test_no_fetch_compares_through_git_only_the_heads_already_here(tmp_path, world):
    """`status --no-fetch` fetches nothing into the fork checkout: the open PRs' heads it lacks are
    compared from GitHub's file lists instead, and the output says why."""
    ws = _scene(world, tmp_path, total=20)
    before = git(world.fork, "for-each-ref", "--format=%(refname)", "refs/porttrack/open/")
    out = ws.run_in_process("status", "--no-fetch", "--json")
    found = _found(out)
    assert found["compared_through_git"] == 0 and found["compared_open_prs"] == found["open_prs"]
    assert git(world.fork, "for-each-ref", "--format=%(refname)", "refs/porttrack/open/") == before == ""
    assert "--no-fetch" in ws.run_in_process("status", "--no-fetch").stdout
