"""The weekly issue, `status` and `status --json` say the same thing (issue 32, items 5, 6 of the
'why' list, 8 and 9): an orphan whose successor shares its hunks has "follow #N?" as its next action
in the track, in the PR (--json), in the issue's summary row and its Next line; a candidate sharing
none of the hunks carries its warning into the issue; a draft successor is said draft and ranked
after a ready one of the same content; an offline run keeps what the last live run found; a
search that did not run is "not searched". The issue's track section is a golden file, and the
whole issue is rendered by GitHub's own renderer (cmark-gfm)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from testing.gfm import cmark
from testing.text import numbered
from testing.workspace import make_workspace, track

W = {f"w{i}.py": numbered(f"w{i}", 5) for i in range(1, 3)}
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "weekly-successors.md"
NOW = "2026-12-04T12:00:00Z"


def _scene(world, tmp_path):
    world.open_pr(48804, W, "[Spec Decode][V1] Warm kernels")
    world.fake.put_pull(world.upstream_repo, 48804, user="leihuang-sketch")
    world.close(48804)
    world.open_pr(54733, W, "[warmup] Migrate kernel warmup (WIP)", body="Supersedes #48804", draft=True)
    world.open_pr(54740, W, "[warmup] Kernel warmup contract", body="Follow-up to #48804")
    world.open_pr(54890, {"x.py": numbered("x", 3)}, "New warmup API", body="Replaces #48804")
    return make_workspace(tmp_path / "ws", {"warm": track([48804], "Speculative-decoding kernel warmup")},
                          api_url=world.fake.base_url, fork=world.fork, token=world.token)


def _track_section(body: str) -> str:
    start = body.index("### warm:")
    end = body.index("\n## ", start)
    return body[start:end]


def _normal(text: str) -> str:
    text = re.sub(r"\b[0-9a-f]{12}\b", "<sha>", text)
    return re.sub(r"20\d\d-\d\d-\d\d", "<date>", text)


def test_status_json_and_the_weekly_issue_agree_on_the_next_action_warning_and_draft(tmp_path, world):
    ws = _scene(world, tmp_path)
    out = ws.run_in_process("status", "--json")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    track_action = shown["tracks"][0]["next_action"]
    pr_action = next(p for p in shown["tracks"][0]["prs"] if p["number"] == 48804)["next_action"]
    assert track_action == pr_action, (track_action, pr_action)  # the PR says what its track says
    assert track_action["text"].startswith("#48804 closed without merging -> follow #54740? (shares 2 of 2 hunks, open)")
    candidates = shown["findings"]["successors"][0]["candidates"]
    assert [c["number"] for c in candidates] == [54740, 54733, 54890]  # the draft after the ready one
    assert [c["draft"] for c in candidates] == [False, True, False]
    assert candidates[2]["warning"] == "warning: shares none of the closed PR's 2 hunks"
    text = ws.run_in_process("status").stdout
    assert "open, draft" in text and "warning: shares none of the closed PR's 2 hunks" in text

    weekly = ws.run_in_process("report", "weekly", "--dry-run", "--now", NOW)
    assert weekly.returncode == 0, weekly.stderr
    body = weekly.stdout
    assert "decide: carry" not in body, "the summary says the same next action as the track"
    summary_row = next(line for line in body.splitlines() if line.startswith("| **warm** |"))
    assert "follow [#54740](" in summary_row and "(shares 2 of 2 hunks, open)" in summary_row, summary_row
    section = _track_section(body)
    assert "**Next:** [#48804](" in section and "closed without merging → follow [#54740](" in section, section
    assert "[#54733](https://redirect.github.com/vllm-project/vllm/pull/54733) \\[warmup\\] Migrate kernel warmup (WIP) (draft):" in section
    assert "— ⚠️ warning: shares none of the closed PR's 2 hunks" in section
    assert section.count("warning: shares none") == 1
    html = cmark(body)
    listed = html[html.index("may succeed"):html.index("instead, change")]
    assert "(draft): shares 2 of 2 hunks" in listed and "; open — ⚠️ warning: shares none of the closed PR's 2 hunks</li>" in listed
    assert listed.count("<li>") == 3, listed  # three list items: none glued to the next
    assert html.count("/vllm-project/vllm/pull/5") >= 3
    golden = _normal(section)
    if os.environ.get("PORTTRACK_UPDATE_GOLDEN"):
        GOLDEN.write_text(golden, encoding="utf-8")
    assert golden == GOLDEN.read_text(encoding="utf-8"), "weekly-successors.md differs (PORTTRACK_UPDATE_GOLDEN=1 to accept)"

    # offline, a minute later: what the live run found still stands, said as such
    offline = ws.run_in_process("status", "--offline", "--json")
    assert offline.returncode == 0, offline.stderr
    kept = json.loads(offline.stdout)["tracks"][0]["next_action"]
    assert kept == track_action, kept
    offline_text = ws.run_in_process("status", "--offline").stdout
    assert "follow #54740?" in offline_text and "as the live run of" in offline_text
    offline_weekly = ws.run_in_process("report", "weekly", "--offline", "--dry-run", "--now", NOW)
    assert offline_weekly.returncode == 0, offline_weekly.stderr
    assert "decide: carry" not in offline_weekly.stdout and "follow [#54740](" in offline_weekly.stdout
    assert "as the live run of" in offline_weekly.stdout


def test_a_refused_search_is_not_searched_never_none_found(tmp_path, world):
    ws = _scene(world, tmp_path)
    for path in (r"^/search/issues", r"/timeline$", r"^/repos/[^/]+/[^/]+/issues$", r"/pulls/48804/files"):
        world.fake.inject("status", path=path, status=403, times=50,
                          json={"message": "API rate limit exceeded for 127.0.0.1."},
                          headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "9999999999"})
    text = ws.run_in_process("status").stdout
    assert "no successor found" not in text
    assert "successors of #48804 not searched: " in text, text


def test_a_listing_refused_says_collisions_not_searched(tmp_path, world):
    """'incomplete: 0 of at least 0 open PRs compared; none among those' was a refusal worded as a
    finding: the listing itself was refused, nothing was compared."""
    from porttrack.observe.collisions import CollisionSearch, render_lines

    refused = CollisionSearch((), 0, "the listing of open PRs was cut short", 0, False)
    assert render_lines(refused) == ["collisions ahead: not searched (the listing of open PRs was cut short)"]
    assert not [line for line in render_lines(refused) if "none" in line]
