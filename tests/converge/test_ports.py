"""Ports found in the fork's own history, with no `fork_commits` in tracks.yaml: a `cherry-pick -x`
commit, a "Port: upstream #N through SHA only" commit that took the PR's first commits, and an
unmarked hand port with edits. Real git repositories; coverage read through `porttrack queue --json`."""

from __future__ import annotations

import json

from porttrack.converge.ports import read_markers
from porttrack.git.repo import pull_ref
from testing.gitfixtures import git
from testing.text import edit, numbered
from testing.workspace import make_workspace, track

S = numbered("s", 8)


def _fetch(world, *numbers):
    git(world.fork, "fetch", "-q", "upstream", *[f"refs/pull/{n}/head:{pull_ref(n)}" for n in numbers])


def test_each_kind_of_port_is_found_with_its_method(tmp_path, world):
    world.open_pr(301, {"q.py": numbered("q", 4)}, "Cherry-picked change")
    world.open_pr(302, {"r1.py": numbered("r1", 3)}, "Three commits")
    second = world.append(302, {"r2.py": numbered("r2", 3)})
    world.append(302, {"r3.py": numbered("r3", 3)})
    world.open_pr(303, {"s.py": S, "s2.py": numbered("s2", 4)}, "Hand-ported with edits")
    world.open_pr(304, {"u.py": numbered("u", 3)}, "Not ported")
    _fetch(world, 301, 302, 303, 304)
    git(world.fork, "cherry-pick", "-x", world.head(301))
    world.fork_commit({"r1.py": numbered("r1", 3), "r2.py": numbered("r2", 3)},
                      f"Warm kernels\n\nPort: upstream #302 through {second[:10]} only\n")
    world.fork_commit({"s.py": edit(S, {4: "s_4 = 'four, adapted'"}), "s2.py": numbered("s2", 4)}, "adapt the warmup")
    ws = make_workspace(tmp_path / "ws", {"t": track([301, 302, 303, 304])}, api_url=world.fake.base_url,
                        fork=world.fork, token=world.token)
    assert "fork_commits" not in ws.tracks_file.read_text()
    out = ws.run_in_process("queue", "--json")
    assert out.returncode == 0, out.stderr
    coverage = {c["pr"]: c for c in json.loads(out.stdout)["coverage"]}
    assert sorted(coverage) == [301, 302, 303]  # #304: nothing in the fork names or carries it

    c301 = coverage[301]
    assert (c301["present"], c301["total"]) == (1, 1)
    assert c301["hunks"][0]["found_by"]["method"] == "cherry-pick" and c301["hunks"][0]["found_by"]["match"] == "same"
    assert [p["kind"] for p in c301["ports"]] == ["cherry-pick"]

    c302 = coverage[302]
    by_path = {h["path"]: h for h in c302["hunks"]}
    assert c302["through"] == second
    assert {p: (h["state"], h["after_through"]) for p, h in by_path.items()} == {
        "r1.py": ("applied", False), "r2.py": ("applied", False), "r3.py": ("not-applied", True)}
    assert by_path["r1.py"]["found_by"]["method"] == "port-note" and by_path["r3.py"]["found_by"] is None
    assert "ported through" in c302["text"] and "1 later hunk not taken" in c302["text"]

    c303 = {h["path"]: h for h in coverage[303]["hunks"]}
    assert c303["s2.py"]["found_by"]["method"] == "content" and c303["s2.py"]["found_by"]["match"] == "same"
    assert c303["s.py"]["found_by"]["method"] == "content" and c303["s.py"]["found_by"]["match"] == "edited"
    assert c303["s.py"]["state"] != "applied"  # edited: its exact post-image is not there

    human = ws.run_in_process("queue").stdout
    assert "#302 (t): coverage 2/3 hunks present in the fork; found by port-note" in human


def test_listed_commits_still_count(tmp_path, world):
    world.open_pr(305, {"v.py": numbered("v", 3)}, "Listed")
    _fetch(world, 305)
    sha = world.fork_commit({"v.py": numbered("v", 3)}, "carry v")
    ws = make_workspace(tmp_path / "ws", {"t": track([305], fork_commits=[sha[:9]])}, api_url=world.fake.base_url,
                        fork=world.fork, token=world.token)
    out = ws.run_in_process("queue", "--json")
    c = json.loads(out.stdout)["coverage"][0]
    assert c["hunks"][0]["found_by"]["method"] == "listed" and c["present"] == 1


def test_markers_as_forks_write_them():
    msg = ("Warmup\n\nPort: upstream #52645 through c848ab5aa4 only (commit 10cb5be03f).\n"
           "Upstream-PR: https://github.com/vllm-project/vllm/pull/46849\nBackport of #48407\n"
           "(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\n")
    got = [(m.kind, m.pr, m.upstream_commit, m.only) for m in read_markers(msg)]
    assert got == [("cherry-pick", None, "0123456789abcdef0123456789abcdef01234567", False),
                   ("port-note", 52645, "c848ab5aa4", True), ("trailer", 46849, None, False), ("backport", 48407, None, False)]
    assert [m.upstream_commit for m in read_markers("Port: upstream #7\n")] == [None]


def test_the_first_live_status_gathers_coverage_after_its_fetch(tmp_path, world):
    """Issue 32, item 7: the first live `status` said "coverage unknown: #N's head is not in the
    fork checkout (a live `porttrack status` fetches it)" in the very run that fetched it; the
    second run said 1/1. Coverage is now gathered after the poll's fetch: the first run says 1/1."""
    world.open_pr(306, {"w.py": numbered("w", 3)}, "Listed, head not fetched")
    sha = world.fork_commit({"w.py": numbered("w", 3)}, "carry w")
    ws = make_workspace(tmp_path / "ws", {"t": track([306], fork_commits=[sha[:9]])}, api_url=world.fake.base_url,
                        fork=world.fork, token=world.token)
    assert git(world.fork, "rev-parse", "--verify", "--quiet", pull_ref(306), check=False) == ""
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    notes = [n for t in json.loads(out.stdout)["tracks"] for p in t["prs"] for n in p["notes"]]
    assert not [n for n in notes if "not in the fork checkout" in n], notes
    assert any("1/1" in n for n in notes), notes


def test_coverage_is_kept_while_nothing_it_reads_moved(tmp_path, world, monkeypatch):
    """Issue 32, item 4 (a run where nothing moved): every `status` recomputed every tracked PR's
    coverage (the fork's history walked, each PR's hunks looked for at the tip). It is kept under
    .porttrack/coverage/ keyed by what it reads: the same answer with no walk while nothing moved;
    a new fork commit, a new PR head, or another listed commit computes it again."""
    from porttrack.converge import coverage as coverage_mod
    from porttrack.tracks.file import load_config
    from porttrack.workspace.files import Workspace

    world.open_pr(307, {"x.py": numbered("x", 3)}, "Ported by cherry-pick")
    world.open_pr(308, {"y.py": numbered("y", 3)}, "Not ported yet")
    _fetch(world, 307, 308)
    git(world.fork, "cherry-pick", "-x", world.head(307))
    ws = make_workspace(tmp_path / "ws", {"t": track([307, 308])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    workspace = Workspace(ws.root)
    config = load_config(ws.tracks_file)
    walks: list[int] = []
    real = coverage_mod.fork_history
    monkeypatch.setattr(coverage_mod, "fork_history", lambda *a, **k: walks.append(1) or real(*a, **k))

    def run():
        from porttrack.git.repo import GitRepo
        return {c.pr: c.to_json() for c in coverage_mod.track_coverage(workspace, config, GitRepo.open(world.fork))}

    first = run()
    assert sorted(first) == [307] and first[307]["present"] == 1 and len(walks) == 1
    assert (workspace.cache_dir / coverage_mod.KEPT_FILE).is_file()
    assert run() == first and len(walks) == 1, "nothing moved: kept, no walk"

    git(world.fork, "cherry-pick", "-x", world.head(308))  # the fork moved: computed again
    moved = run()
    assert len(walks) == 2 and sorted(moved) == [307, 308] and moved[308]["present"] == 1
    world.append(308, {"y2.py": numbered("y2", 2)})  # the PR moved
    _fetch(world, 308)
    again = run()
    assert len(walks) == 3 and (again[308]["present"], again[308]["total"]) == (1, 2)
    assert run() == again and len(walks) == 3
