"""Successors of a PR closed without merging, found through the GitHub emulator over loopback:
cross-references (timeline), "supersedes #N" bodies (search), later PRs of the same author, ranked
by shared hunk ids and near-matches; and a second run answered by conditional requests."""

from __future__ import annotations

import json
import re

import requests

from porttrack.observe.successors import says_succeeds
from testing.github_emulator import DEFAULT_TOKEN
from testing.text import numbered
from testing.workspace import make_workspace, track

W = {f"w{i}.py": numbered(f"w{i}", 5) for i in range(1, 5)}


def _comment(world, number: int, body: str) -> None:
    answer = requests.post(f"{world.fake.base_url}/repos/{world.upstream_repo}/issues/{number}/comments",
                           json={"body": body}, headers={"Authorization": f"token {DEFAULT_TOKEN}"}, timeout=10)
    assert answer.status_code == 201, answer.text


def _scene(world):
    world.open_pr(100, W, "Warm the kernels")
    world.fake.put_pull(world.upstream_repo, 100, user="alice")
    world.close(100)
    # (a) another author takes it over: 3 of its 4 hunks unchanged, the 4th edited in one line;
    # the link is only a comment (a cross-reference on #100's timeline, not in any body)
    edited = W["w4.py"].replace("w4_3", "w4_three")
    world.open_pr(201, {**{k: W[k] for k in ("w1.py", "w2.py", "w3.py")}, "w4.py": edited}, "Warmup contract")
    world.fake.put_pull(world.upstream_repo, 201, user="bob")
    world.squash_merge(201)
    _comment(world, 201, "This carries on from #100.")
    # (b) the same author, later, the same file, none of the same hunks
    world.open_pr(202, {"w1.py": numbered("other", 5)}, "Unrelated rework")
    world.fake.put_pull(world.upstream_repo, 202, user="alice")
    # (c) a body that says it supersedes #100, sharing no hunk
    world.open_pr(203, {"x.py": numbered("x", 3)}, "New warmup API", body="Supersedes #100.")
    world.fake.put_pull(world.upstream_repo, 203, user="carol")
    # not candidates: the same author on other files, and an unrelated PR
    world.open_pr(204, {"z.py": numbered("z", 3)}, "Docs")
    world.fake.put_pull(world.upstream_repo, 204, user="alice")
    world.open_pr(205, {"y.py": numbered("y", 3)}, "Other")


def _status(ws):
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    return out, json.loads(out.stdout)


def test_candidates_ranked_by_shared_hunks_with_reasons(tmp_path, world):
    _scene(world)
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    _, report = _status(ws)
    found = report["findings"]["successors"]
    assert [s["pr"] for s in found] == [100]
    candidates = found[0]["candidates"]
    assert [c["number"] for c in candidates] == [201, 203, 202]
    kinds = {c["number"]: [r["kind"] for r in c["reasons"]] for c in candidates}
    assert kinds[201] == ["shares-hunks", "near-hunks", "cross-referenced", "state"]
    assert candidates[0]["shared_hunks"] == 3 and candidates[0]["near_hunks"] == 1 and candidates[0]["of_hunks"] == 4
    assert candidates[0]["text"].startswith("shares 3 of 4 hunks; nearly matches 1 of 4 more")
    assert "merged 20" in candidates[0]["text"]
    assert kinds[203] == ["body-says", "cross-referenced", "state"]
    assert candidates[0]["warning"] is None and candidates[1]["warning"] == candidates[2]["warning"] == "warning: shares none of the closed PR's 4 hunks"
    assert candidates[1]["text"].endswith("; warning: shares none of the closed PR's 4 hunks")
    assert "its body says 'Supersedes #100'" in candidates[1]["text"]
    assert kinds[202] == ["same-author", "state"] and candidates[2]["shared_hunks"] == 0
    assert "alice, touches 1 of its 4 files" in candidates[2]["text"]
    assert candidates[0]["adopt"] == ["  warm:", "    prs: [201] # #201 succeeds #100 (closed without merging)"]
    cost = report["findings"]["cost"]
    assert 0 < cost["requests"] <= cost["limit"] and cost["not_modified"] == 0

    # the human view: the candidates under the orphaned PR's next action, the lines to adopt one
    text = ws.run_in_process("status").stdout
    next_at = text.index("next: #100 closed without merging -> follow #201? (shares 3 of 4 hunks, merged 20")
    assert ") tracks.yaml: warm: prs: [201]" in text
    assert text.index("successor candidates for #100:") > next_at
    assert "#201 Warmup contract: shares 3 of 4 hunks" in text
    assert "          warm:\n            prs: [201] # #201 succeeds #100" in text
    assert "searches cost" in text


def test_second_run_is_answered_by_conditional_requests(tmp_path, world):
    _scene(world)
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    _, first = _status(ws)
    world.fake.clear_log()
    _, second = _status(ws)
    log = world.fake.requests()
    assert log and all(r.conditional and r.status == 304 for r in log), [(r.path, r.status) for r in log]
    assert second["findings"]["successors"] == first["findings"]["successors"]
    cost = second["findings"]["cost"]
    assert cost["requests"] == cost["not_modified"] > 0


def test_a_missing_cross_reference_is_made_up_by_the_body_search(tmp_path, world):
    _scene(world)
    world.fake.hidden_cross_references.add((world.upstream_repo, 100, 203))
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    _, report = _status(ws)
    c203 = next(c for c in report["findings"]["successors"][0]["candidates"] if c["number"] == 203)
    assert [r["kind"] for r in c203["reasons"]] == ["body-says", "state"]


def test_request_limit_stops_the_search_and_says_so(tmp_path, world):
    _scene(world)
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    ws.extra_env["PORTTRACK_SEARCH_LIMIT"] = "5"
    _, report = _status(ws)
    assert report["findings"]["cost"]["exhausted"] is True
    assert report["findings"]["cost"]["requests"] <= 5
    assert "request limit" in report["findings"]["successors"][0]["problem"]


def test_phrases_that_say_a_pr_succeeds_another():
    assert says_succeeds("This supersedes #48804 and more", 48804) == "supersedes #48804"
    assert says_succeeds("Follow-up to #48804.", 48804) == "Follow-up to #48804"
    assert says_succeeds("replaces https://github.com/vllm-project/vllm/pull/48804", 48804)
    assert says_succeeds("supersedes #488040", 48804) is None
    assert says_succeeds("see #48804", 48804) is None


def test_the_weekly_issue_shows_the_candidates_under_the_orphaned_prs_next_action(tmp_path, world):
    from testing.gfm import cmark

    _scene(world)
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    out = ws.run_in_process("report", "weekly", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)["found"]
    assert found["successors"]["100"][0] == "successor candidates for #100:"
    shown = ws.run_in_process("report", "weekly", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    body = shown.stdout
    after_next = body[body.index("**Next:**"):].split("###")[0].split("## ")[0]
    assert "Warmup contract: shares 3 of 4 hunks" in after_next, after_next
    assert re.search(r"\n\n(A pull request|Pull requests) that may succeed \[#100\]\(", after_next)  # its own paragraph, not glued to the next action
    assert "```yaml\ntracks:\n  warm:\n    prs: [201] # #201 succeeds #100 (closed without merging)\n```" in body
    html = cmark(body)  # GitHub's renderer: the candidates are a list of links, the tracks.yaml change a block
    section = html[html.index("closed without merging → follow"):]  # the next action proposes #201 (it shares 3 of 4 hunks)
    assert "may succeed" in section and "/vllm-project/vllm/pull/201\">#201</a>" in section, section[:1500]
    assert '<pre><code class="language-yaml">tracks:' in section, section[:1500]
    assert html.count("<li>") >= 3
    assert found["cost"].startswith("searches cost")


def test_a_refused_search_keeps_what_the_timeline_and_the_author_listing_named(tmp_path, world):
    """Class 7 of issue 21: one 403 (the search API's own rate limit) used to drop every candidate."""
    _scene(world)
    world.fake.inject("secondary_rate_limit", path=r"^/search/issues", retry_after=3600)
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    _, report = _status(ws)
    search = report["findings"]["successors"][0]
    numbers = [c["number"] for c in search["candidates"]]
    assert numbers[0] == 201 and 202 in numbers  # timeline (201, 203) and same author (202) still stand
    assert [f["source"] for f in search["failed_sources"]] == ["search"]
    assert "the issue search failed" in search["problem"] and "other sources' candidates stand" in search["problem"]
    c203 = next(c for c in search["candidates"] if c["number"] == 203)
    assert [r["kind"] for r in c203["reasons"]] == ["body-says", "cross-referenced", "state"]  # its body was still read
    action = report["tracks"][0]["next_action"]
    assert action["kind"] == "orphaned" and action["text"].startswith("#100 closed without merging -> follow #201?")
    world.fake.inject("secondary_rate_limit", path=r"^/search/issues", retry_after=3600)
    text = ws.run_in_process("status").stdout
    assert "(search incomplete: the issue search failed" in text


def test_follow_is_proposed_only_for_a_candidate_sharing_half_the_hunks(tmp_path, world):
    world.open_pr(100, W, "Warm the kernels")
    world.fake.put_pull(world.upstream_repo, 100, user="alice")
    world.close(100)
    # shares 1 of 4 hunks only: a candidate, not a proposal
    world.open_pr(301, {"w1.py": W["w1.py"], "v.py": numbered("v", 3)}, "Part of it", body="Supersedes #100.")
    ws = make_workspace(tmp_path / "ws", {"warm": track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    _, report = _status(ws)
    (candidate,) = report["findings"]["successors"][0]["candidates"]
    assert candidate["number"] == 301 and candidate["shared_hunks"] == 1 and candidate["warning"] is None
    action = report["tracks"][0]["next_action"]
    assert "follow #301" not in action["text"] and "decide carry / follow a successor / drop" in action["text"]
    # two of four: at least half
    world.open_pr(302, {"w1.py": W["w1.py"], "w2.py": W["w2.py"]}, "Half of it", body="Supersedes #100.")
    _, report = _status(ws)
    assert report["tracks"][0]["next_action"]["text"].startswith("#100 closed without merging -> follow #302? (shares 2 of 4 hunks, open)")
    assert report["tracks"][0]["next_action"]["text"].endswith("tracks.yaml: warm: prs: [302]")
