"""The weekly issue reads like a colleague's (issue 24): every PR it names is a link (successor
candidates too), the tracks.yaml change it proposes is a fenced `yaml` block to paste, and neither
request accounting nor porttrack's internal labels reach it (they stay in --json). Checked with
GitHub's own renderer (cmarkgfm); a live week against the GitHub emulator, tokenless."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from testing.gfm import cmark as gfm
from testing.workspace import make_workspace, track

UPSTREAM = "vllm-project/vllm"


@pytest.fixture
def week(tmp_path, world):
    """A merged PR seen first this week, one closed without merging with a successor that says so."""
    world.open_pr(101, {"a.py": "a = 1\n"}, "First")
    world.merge(101)
    world.open_pr(102, {"b.py": "b = 1\nc = 1\n"}, "Second")
    world.close(102)
    world.open_pr(103, {"b.py": "b = 1\nc = 1\n"}, "Second, again", body="Supersedes #102")
    world.open_pr(104, {"d.py": "d = 1\n"}, "Fourth")
    ws = make_workspace(tmp_path / "ws", {"one": track([101]), "two": track([102, 104])},
                        api_url=world.fake.base_url, fork=world.fork, token=None)
    ws.extra_env["PORTTRACK_HTTP_BACKOFF"] = "0.01"
    imported = ws.run_in_process("import", "104")  # the track has no gate: the patch is queued ungated
    assert imported.returncode == 0, imported.stderr
    return ws


def _issue(ws) -> str:
    out = ws.run_in_process("report", "weekly", "--dry-run")
    assert out.returncode == 0, out.stderr
    if os.environ.get("PORTTRACK_KEEP_WEEKLY"):
        Path(os.environ["PORTTRACK_KEEP_WEEKLY"]).write_text(out.stdout, encoding="utf-8")
    return out.stdout


def test_every_pr_named_is_a_link_successors_included(week):
    body = _issue(week)
    html = gfm(body)
    for number in (101, 102, 103, 104):
        assert f'href="https://github.com/{UPSTREAM}/pull/{number}"' in html or \
            re.search(rf'href="https://[^"]+/{UPSTREAM}/pull/{number}"', html), f"#{number} is not a link"
    text = re.sub(r"<a [^>]*>.*?</a>|<code>.*?</code>|<pre.*?</pre>", "", html, flags=re.S)
    bare = re.findall(r".{0,30}#(?:\u200b|&#8203;)?\d{3}\b.{0,10}", text)  # escaped or not: named, not linked
    assert not bare, f"a PR number that is no link: {bare}"


def test_the_proposed_tracks_yaml_change_is_a_yaml_block_to_paste(week):
    import yaml

    body = _issue(week)
    blocks = re.findall(r"^```yaml\n(.*?)^```$", body, re.S | re.M)
    assert blocks, "no fenced yaml block"
    proposal = yaml.safe_load(blocks[0])
    assert proposal == {"tracks": {"two": {"prs": [103, 104]}}}
    assert '<pre><code class="language-yaml">tracks:' in gfm(body), "GitHub's renderer shows it as a yaml block"


def test_no_request_accounting_or_internal_labels_reach_the_team(week):
    body = _issue(week)
    for words in (r"\d+ requests?\b", r"\b304\b", "from cache", "first observed: ", "observed: first", "changed:", "ungated; ungated"):
        assert not re.search(words, body), f"{words!r} in the weekly issue"
    data = json.loads(week.run_in_process("report", "weekly", "--dry-run", "--json").stdout)
    assert "requests" in data["upstream"] and data["found"]["cost"], "the accounting stays in --json"
