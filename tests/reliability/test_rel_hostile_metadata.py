"""Hostile PR metadata — titles, bodies and author logins a stranger controls — through a live
`porttrack status` (human and --json) and `porttrack report weekly --post`.

The human output carries no escape sequence, direction override, NUL or carriage return, and one
PR keeps its fixed number of lines however many newlines its title holds. The posted issue (and
reports/*.md) holds no raw HTML but porttrack's own marker (which names this week, whatever a
title imitates), no live mention, no foreign link, no table a title could break (every row has
the header's cells, checked with a real GFM renderer), and fits GitHub's 65,536 characters.
"""

from __future__ import annotations

import json
import re

import pytest
import rel_harness as H
from rel_harness import SUBSETS, Rig, check_consistent, half, outside

from testing.gfm import cmark

pytestmark = pytest.mark.reliability("hostile-metadata")

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"
CASES = {
    "mentions": {"title": "@octocat please look, cc @vllm-project/maintainers and @ghost", "user": "octocat"},
    "html": {"title": "<script>alert(1)</script><img src=x onerror=alert(1)><iframe src=//evil>"},
    "table-breaker": {"title": "a | b | c\n| --- | --- |\n| x | y |"},
    "megabyte-body": {"title": "a body of one mebibyte", "body": ("x" * 1023 + "\n") * 1024 + "depends on #101"},
    "direction-overrides": {"title": "release\u202efdp.exe and \u2066isolated\u2069 text"},
    "ansi-escapes": {"title": "\x1b[2J\x1b[31mred\x1b[0m \x1b]0;owned\x07title"},
    "control-characters": {"title": "a\x00b\x07c\rd\x0be"},
    "markdown-links": {"title": "[click](javascript:alert(1)) ![x](http://evil.example/t.png) <http://evil.example>"},
    "code-fence": {"title": "```\n</details>\n```"},
    "marker-spoof": {"title": "<!-- porttrack:weekly:2027-W01 --> take over"},
    "very-long-title": {"title": "long " * 4000},
    "block-injection": {"title": "# Heading\n- item\n> quote\n1. one"},
    "references": {"title": "fixes #1, GH-2, vllm-project/vllm#3 and https://github.com/x/y/issues/4"},
    "invisible-characters": {"title": "pay\u200bpal\u2060 \ufeff zero\u200dwidth"},
    "entities": {"title": "&lt;script&gt; &#64;octocat &amp;"},
    "unicode": {"title": "速度 ⚡ émoji 🚀 ﷽"},
    "backslashes": {"title": "\\| \\\\| \\` \\* \\_"},
    "author-login": {"title": "ordinary", "user": "evil<script>@x\n| y |"},
    "body-with-stack-spam": {"title": "stacked", "body": "depends on #101 " * 5000},
}
FAST = ("html", "table-breaker", "direction-overrides", "megabyte-body")


def _check_terminal(text: str) -> None:
    assert "\x1b" not in text, "an escape sequence reached the terminal"
    assert not any(c in text for c in BIDI), "a direction override reached the terminal"
    assert "\x00" not in text and "\r" not in text and "\x07" not in text


def _check_issue(body: str, week: str) -> None:
    from porttrack.common import markdown as md

    assert len(body) <= 65536
    assert md.find_marker(body) == week
    assert re.findall(r"<[A-Za-z!/]", body) == ["<!"], "no raw HTML but porttrack's marker"
    assert not any(c in body for c in BIDI)
    assert not re.search(r"(?<![\w&#;])@(octocat|ghost|vllm-project)", body), "no live mention"
    links = re.findall(r"(?<!\\)\]\(([^)]*)\)", body)
    assert all(re.match(r"https://(redirect\.)?github\.com/", url) for url in links), links
    for html in (cmark(body), cmark(body, "--unsafe")):
        assert "<script" not in html and "<img" not in html and "<iframe" not in html
        assert "javascript:" not in "".join(re.findall(r'(?:href|src)="([^"]*)"', html))
        assert "evil.example" not in "".join(re.findall(r'(?:href|src)="([^"]*)"', html))
    html = cmark(body)
    for table in re.findall(r"<table>(.*?)</table>", html, re.S):
        header = len(re.findall(r"<th[ >]", table))
        bodies = re.findall(r"<tbody>(.*)</tbody>", table, re.S)
        for row in (bodies[0].split("</tr>")[:-1] if bodies else []):
            assert len(re.findall(r"<td[ >]", row)) == header, "a row with another number of cells: a broken table"


@pytest.mark.parametrize("subset", SUBSETS)
def test_hostile_pr_metadata_through_status_and_report(tmp_path, world, cases, subset):
    rig = Rig(tmp_path, world)
    chosen = dict(half(CASES.items(), lambda kv: kv[0] in FAST, subset))
    rig.save("base")
    clean_lines = len(rig.ok("status").stdout.splitlines())
    around = outside(rig.around())
    for n, (name, fields) in enumerate(sorted(chosen.items())):
        with cases.case(name):
            rig.restore("base")
            world.fake.put_pull(H.UPSTREAM_REPO, 101, **fields)
            human = rig.cli("status")
            assert human.returncode == 0, human.stderr[-1200:]
            _check_terminal(human.stdout + human.stderr)
            events = 1 if "title" in fields else 0  # a retitle is one more "changed:" line
            assert len(human.stdout.splitlines()) <= clean_lines + events, "a title cannot add lines"
            data = rig.ok("status", "--json").json()
            [pr] = [p for t in data["tracks"] for p in t["prs"] if p["number"] == 101]
            assert pr["state"] == "open"
            if "body" in fields and "depends on #101" in fields["body"]:
                assert pr["stacked_on"] == [], "a PR is never stacked on itself, however its body repeats it"
            now = f"2027-{1 + n // 4:02d}-{1 + 7 * (n % 4):02d}T08:00:00Z"
            week = H.report_week(now)
            out = rig.cli("report", "weekly", "--post", "--now", now)
            assert out.returncode == 0, out.stderr[-1200:]
            _check_terminal(out.stderr)
            [issue] = rig.weekly_issues(week)
            _check_issue(issue["body"], week)
            saved = (rig.root / "reports" / f"weekly-{week}.md").read_text(encoding="utf-8")
            _check_issue(saved, week)
            assert json.loads((rig.root / "state" / "upstream.json").read_text())["prs"]["101"]["title"] is not None
            assert outside(rig.around()) == around
            check_consistent(rig)
    cases.done()


def test_status_as_a_process_writes_hostile_titles_safely_to_a_real_stdout(tmp_path, world):
    """What a terminal receives when the output is not captured in-process (encoding included)."""
    rig = Rig(tmp_path, world)
    title = "".join(CASES[k]["title"] for k in ("ansi-escapes", "direction-overrides", "control-characters", "unicode"))
    world.fake.put_pull(H.UPSTREAM_REPO, 101, title=title)
    out = rig.sub("status", PYTHONIOENCODING="utf-8:strict")
    assert out.returncode == 0, out.stderr[-1200:]
    _check_terminal(out.stdout + out.stderr)
    assert "速度" in out.stdout
