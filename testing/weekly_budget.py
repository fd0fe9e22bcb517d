"""The weekly ritual's workspace (issue 24): five tracked PRs, one of them closed without merging
and taken over by a merged successor, one queued patch, and ~270 open upstream PRs, with no token.

`build(tmp, fake)` returns the workspace; `counted(fake)` is what the emulator's log says cost rate
limit (every answered request but a 304). Used by tests/report/test_weekly_budget.py and
benchmarks/status_poll.py."""

from __future__ import annotations

from pathlib import Path

from testing import openprs
from testing.text import numbered
from testing.workspace import TestWorkspace, make_workspace, track
from testing.world import World

OPEN_PRS = 265  # open upstream PRs besides the tracked ones (~270 in all, as vLLM has)


def build(tmp: Path, fake, open_prs: int = OPEN_PRS, git_heads: bool = True) -> tuple[TestWorkspace, World]:
    w = World(tmp, fake)
    warm = {f"vllm/model_executor/warmup/w{i}.py": numbered(f"w{i}", 6) for i in range(1, 3)}
    w.open_pr(48804, warm, "[Spec Decode][V1] Warm kernels")
    fake.put_pull(w.upstream_repo, 48804, user="leihuang-sketch")
    w.close(48804)
    w.open_pr(56323, warm, "[6/N][warmup][DSv4] Migrate sampling", body="Follow-up to #48804")
    w.squash_merge(56323)
    for n in (46076, 46849, 48407, 46900):
        w.open_pr(n, {f"vllm/f{n}.py": numbered(f"f{n}", 4)}, f"PR {n}")
    # the open PRs upstream, one touching the queued file: #60007 adds the file the queued patch adds.
    # git_heads: each a real commit with refs/pull/N/head (as GitHub serves them); else only the
    # emulator's records (fake heads: a host that serves no pull refs, GitHub's file lists answer)
    paths = {60000 + i: ("vllm/f46849.py" if i == 7 else f"vllm/o/o{60000 + i}.py") for i in range(open_prs)}
    if git_heads:
        openprs.seed(w, {n: {path: f"other {n}\nmore\n"} for n, path in paths.items()})
    else:
        for i, (n, path) in enumerate(paths.items()):
            fake.put_pull(w.upstream_repo, n, title=f"open {n}", head_sha=f"{n:040x}", user=f"dev{i % 40}",
                          files=[{"filename": path, "status": "added", "additions": 2, "deletions": 0, "changes": 2,
                                  "patch": f"@@ -0,0 +1,2 @@\n+other {n}\n+more\n"}])
    ws = make_workspace(tmp / "ws", {"warm": track([48804]), "ar": track([46849]), "sparse": track([46076]),
                                     "skip": track([48407]), "more": track([46900])},
                        api_url=fake.base_url, fork=w.fork, token=None)
    ws.extra_env["PORTTRACK_HTTP_BACKOFF"] = "0.01"
    out = ws.run_in_process("import", "46849")
    assert out.returncode == 0, out.stderr
    w.squash_merge(48407)
    return ws, w


def counted(fake) -> int:
    """Requests that cost rate limit: answered, and not 304."""
    return sum(1 for r in fake.log if r.status is not None and r.status != 304)


def critical_path(log) -> int:
    """Round trips on the critical path, from the emulator's log: the longest chain of requests in
    which each was sent after the one before it was answered (earliest-answer-first greedy, which
    is optimal for chains of intervals)."""
    chain, answered = 0, float("-inf")
    for req in sorted(log, key=lambda r: r.time + r.duration):
        if req.time >= answered:
            chain, answered = chain + 1, req.time + req.duration
    return chain
