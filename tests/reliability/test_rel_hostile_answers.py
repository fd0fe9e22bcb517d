"""Hostile GitHub answers, over real HTTP from the emulator on loopback: a seeded generator of
mistyped pull-request answers, Retry-After values no clock can hold, and a gzip bomb.

The property, for every case: porttrack exits with a published code other than 70 and no
traceback; when it refuses, state/upstream.json is byte for byte what it was; when it records,
every later command can read what it recorded (`status --offline` exits 0). Issue 33 items 5, 6
and 8: `merged_at: 12345` was recorded and then every later command crashed; `Retry-After: 1e20`
raised OverflowError; a 1 GB gzip answer took 4.1 GB of memory.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import zlib
from typing import Any

import pytest
import requests
from rel_harness import SEED, Rig

pytestmark = pytest.mark.reliability("hostile-upstream")

PR = 101
PATH = rf"/pulls/{PR}$"

HOSTILE_VALUES: list[Any] = [
    12345, -1, 0, 1.5, True, False, None, "", "not a date", "2026-13-45T99:99:99Z", "2026-07-28", "12345",
    {"date": "2026-07-28T00:00:00Z"}, [], ["2026-07-28T00:00:00Z"], "x" * 5000, "\x00\x1b[31m", "g" * 40,
    "2026-07-28T00:00:00Z", "0" * 40, 10 ** 30, -(10 ** 30), {"sha": None}, [[[[[]]]]],
]


# the fields porttrack reads (most mutations aim here; the rest anywhere in the answer)
RELIED = [tuple(p.split(".")) for p in (
    "number title body state merged user user.login html_url draft created_at updated_at merged_at closed_at "
    "merge_commit_sha head head.sha head.ref head.repo head.repo.full_name base base.ref base.sha base.repo "
    "base.repo.default_branch").split()]


def live_answer(rig: Rig) -> dict[str, Any]:
    """The pull request as the emulator answers it, to be mutated."""
    answer = requests.get(f"{rig.fake.base_url}/repos/vllm-project/vllm/pulls/{PR}",
                          headers={"Authorization": f"token {rig.world.token}"}, timeout=10)
    assert answer.status_code == 200
    return answer.json()


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    return found


def mutate(answer: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """The answer with 1-3 fields replaced by hostile values or removed; and what was done."""
    data = copy.deepcopy(answer)
    done = []
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(RELIED if rng.random() < 0.7 else paths(data))
        parent = data
        for key in where[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        if rng.random() < 0.15:
            parent.pop(where[-1], None)
            done.append(f"-{'.'.join(where)}")
        else:
            value = rng.choice(HOSTILE_VALUES)
            parent[where[-1]] = value
            done.append(f"{'.'.join(where)}={value!r:.30}")
    return data, " ".join(done)


def state_bytes(rig: Rig) -> bytes:
    return (rig.root / "state" / "upstream.json").read_bytes()


def pr_record(state: bytes) -> Any:
    """What the recorded state holds for the PR whose answers are made hostile."""
    return json.loads(state)["prs"].get(str(PR))


def refused_per_pr(stderr: str) -> bool:
    """The one-PR refusal (issue 32 item 4): that PR is shown from the recorded state, with its
    reason; the other PRs' answers are live and recorded."""
    return any(line.startswith(f"porttrack: #{PR} not polled (") and "shown from the recorded state" in line
               for line in stderr.splitlines())


def check_outcome(rig: Rig, out, before: bytes, label: str) -> None:
    assert out.returncode != 70 and "Traceback" not in out.stderr, f"{label}: rc {out.returncode}: {out.stderr[-1500:]}"
    if out.returncode != 0:
        assert out.returncode in (1, 2, 3, 5, 6, 7), f"{label}: rc {out.returncode}: {out.stderr[-800:]}"
        if refused_per_pr(out.stderr):
            assert out.returncode == 5, f"{label}: rc {out.returncode}: {out.stderr[-800:]}"
            assert pr_record(state_bytes(rig)) == pr_record(before), f"{label}: refused, yet #{PR}'s record changed"
        else:
            assert any(line.startswith("porttrack: error:") for line in out.stderr.splitlines()), f"{label}: {out.stderr[-800:]}"
            assert state_bytes(rig) == before, f"{label}: refused, yet state/upstream.json changed"
    later = rig.cli("status", "--offline", "--json")
    assert later.returncode == 0, f"{label}: what was recorded breaks a later command: {later.stderr[-1200:]}"


def test_mistyped_dates_are_refused_and_nothing_is_recorded(tmp_path, world):
    """The issue's own case: merged_at 12345, closed_at an object. The PR is refused on its own
    (issue 32 item 4): its record stays as it was, the others are polled live."""
    rig = Rig(tmp_path, world)
    answer = live_answer(rig)
    before = state_bytes(rig)
    for field, value in (("merged_at", 12345), ("closed_at", {"at": "2026-07-28T00:00:00Z"}), ("updated_at", "yesterday")):
        bad = {**answer, field: value}
        rig.fake.inject("status", path=PATH, times=60, status=200, json=bad)
        out = rig.cli("status")
        rig.fake._faults.clear()
        assert out.returncode == 5, out.stderr
        assert field in out.stderr and "not an ISO 8601 time" in out.stderr, out.stderr
        assert pr_record(state_bytes(rig)) == pr_record(before)
        check_outcome(rig, out, before, field)


def test_seeded_hostile_pull_request_answers(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    answer = live_answer(rig)
    rng = random.Random(f"{SEED}:answers")
    refused = 0
    for n in range(120):
        bad, what = mutate(answer, rng)
        with cases.case(f"answer {n}: {what}"):
            before = state_bytes(rig)
            rig.fake.inject("status", path=PATH, times=60, status=200, json=bad)
            out = rig.cli("status")
            with rig.fake._lock:
                rig.fake._faults.clear()
            check_outcome(rig, out, before, what)
            refused += out.returncode != 0
    cases.done()
    assert refused >= 50, f"only {refused} of 120 mutated answers were refused: the generator is too mild"


@pytest.mark.parametrize("status", [429, 403])
@pytest.mark.parametrize("retry_after", ["1e20", "inf", "-inf", "nan", "9" * 5000, "-5", "1e308", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_retry_after_no_clock_can_hold_is_a_clear_answer(tmp_path, world, retry_after, status):
    """Retry-After and X-RateLimit-Reset both hostile (the emulator's own reset would otherwise
    be read first): 429 reads Retry-After, 403 with Remaining 0 and no Retry-After the reset."""
    rig = Rig(tmp_path, world)
    before = state_bytes(rig)
    headers = {"X-RateLimit-Reset": retry_after, "X-RateLimit-Remaining": "0"}
    if status == 429:
        headers["Retry-After"] = retry_after
    rig.fake.inject("status", path=PATH, times=60, status=status, json={"message": "API rate limit exceeded"},
                    headers=headers)
    out = rig.cli("status")
    check_outcome(rig, out, before, f"Retry-After {retry_after[:20]}")
    if retry_after in ("1e20", "inf", "1e308") or retry_after.startswith("9"):
        assert out.returncode == 5 and "rate limit" in out.stderr, out.stderr


def gzip_bomb(decompressed: int) -> bytes:
    """A gzip stream of `decompressed` bytes of a JSON string's inside, made a MiB at a time."""
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [pack.compress(b'{"number": 101, "title": "')]
    block = b"a" * (1 << 20)
    for _ in range(decompressed >> 20):
        parts.append(pack.compress(block))
    parts.append(pack.compress(b'"}'))
    parts.append(pack.flush())
    return b"".join(parts)


_PEAK = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[2:], capture_output=True, text=True)
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
open(sys.argv[1], "w").write(f"{done.returncode}\\n{peak_kib}\\n" + done.stderr)
"""


def test_a_gzip_bomb_answer_is_refused_within_500_mb(tmp_path, world):
    """1 GB of JSON text in ~1 MB of gzip: refused past the answer limit, the process's peak
    resident memory (getrusage of the child, measured) at most 500 MB."""
    rig = Rig(tmp_path, world)
    before = state_bytes(rig)
    bomb = gzip_bomb(1 << 30)
    assert len(bomb) < 2 << 20
    rig.fake.inject("status", path=PATH, times=60, status=200, body=bomb, content_type="application/json",
                    headers={"Content-Encoding": "gzip"})
    report = tmp_path / "peak.txt"
    env = rig.handle.env()
    done = subprocess.run([sys.executable, "-c", _PEAK, str(report), sys.executable, "-m", "porttrack", "status"],
                          cwd=rig.root, env=dict(env), timeout=300)
    assert done.returncode == 0
    rc, peak_kib, stderr = report.read_text().split("\n", 2)
    print(f"gzip bomb (1 GiB decompressed, {len(bomb)} bytes sent): rc {rc}, peak RSS {int(peak_kib) / 1024:.0f} MiB")
    assert int(rc) == 5, stderr
    assert "larger than 32 MiB" in stderr and "refused" in stderr, stderr
    assert int(peak_kib) <= 500 * 1024, f"peak {int(peak_kib) / 1024:.0f} MiB"
    assert pr_record(state_bytes(rig)) == pr_record(before)


@pytest.mark.parametrize("answer", [
    {"status": "ahead", "ahead_by": "many", "behind_by": 0},
    {"status": "ahead", "ahead_by": {"n": 1}, "behind_by": 0},
    {"status": 7, "ahead_by": 1, "behind_by": 0},
    {"status": "ahead", "ahead_by": 1.5, "behind_by": -(10 ** 30)},
    [],
])
def test_a_mistyped_comparison_of_two_heads_is_refused(tmp_path, world, answer):
    """A new head is compared with the last one to tell appended commits from a force-push."""
    rig = Rig(tmp_path, world)
    world.force_push(PR, {"a.py": "a_1 = 'changed'\n"})
    # a fetch that fails: the change of head is then classified by GitHub's compare
    subprocess.run(["git", "-C", str(rig.fork), "remote", "set-url", "upstream", str(tmp_path / "gone.git")], check=True)
    before = state_bytes(rig)
    rig.fake.inject("status", path=r"/compare/", times=60, status=200, json=answer)
    out = rig.cli("status")
    assert rig.fake.requests("GET", r"/compare/"), "the compare was never asked"
    check_outcome(rig, out, before, json.dumps(answer))


def test_seeded_hostile_issue_listings_when_posting_the_weekly_issue(tmp_path, world, cases):
    """The weekly post finds the week's issue in the fork's issue listing; a listing whose items are
    mistyped is refused (nothing posted, nothing recorded), or read for what it says."""
    rig = Rig(tmp_path, world)
    now = "2027-01-04T08:00:00Z"
    assert rig.cli("report", "weekly", "--post", "--offline", "--now", now).returncode == 0
    listing = requests.get(f"{rig.fake.base_url}/repos/randomvariable/vllm/issues", params={"state": "all"},
                           headers={"Authorization": f"token {rig.world.token}"}, timeout=10).json()
    assert listing
    rig.save("posted")
    rng = random.Random(f"{SEED}:issues")
    refused = 0
    fields = ["number", "title", "body", "state", "state_reason", "labels", "created_at", "html_url", "user", "pull_request"]
    for n in range(40):
        bad = copy.deepcopy(listing)
        item = rng.choice(bad)
        what = []
        for _ in range(rng.randint(1, 2)):
            key, value = rng.choice(fields), rng.choice(HOSTILE_VALUES + [[{"name": 5}], [[]], "porttrack"])
            item[key] = value
            what.append(f"{key}={value!r:.30}")
        with cases.case(f"listing {n}: {' '.join(what)}"):
            rig.restore("posted")
            issues_before = len(rig.fake.issues("randomvariable/vllm"))
            records = (rig.root / "state" / "reports.json").read_bytes()
            rig.fake.inject("status", path=r"/repos/randomvariable/vllm/issues$", method="GET", times=60, status=200, json=bad)
            out = rig.cli("report", "weekly", "--post", "--offline", "--now", now)
            with rig.fake._lock:
                rig.fake._faults.clear()
            assert out.returncode != 70 and "Traceback" not in out.stderr, f"rc {out.returncode}: {out.stderr[-1200:]}"
            if out.returncode != 0:
                refused += 1
                assert len(rig.fake.issues("randomvariable/vllm")) == issues_before, "refused, yet an issue was created"
                assert (rig.root / "state" / "reports.json").read_bytes() == records
    cases.done()
    assert refused >= 15, f"only {refused} of 40 mutated listings were refused: the generator is too mild"
