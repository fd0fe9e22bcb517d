"""`status --offline` with a fork checkout on real vLLM history: git processes cold and warm, and
the answer compared with another checkout's code (issue 34: <= 6 processes cold).

    python benchmarks/status_offline_real.py --history <vLLM git dir> [--code-before DIR] [--runs 3] [--json FILE]
    (or PORTTRACK_VLLM_HISTORY=<vLLM git dir>)

The history is a clone of upstream vLLM whose `main` is upstream main (to 2026-08-17, 20,050
commits); it is only read (the fork shares its objects through `alternates`). The script says
which history it ran on (tip, date, commit count).

The workspace tracks 12 PRs, each in a track of its own:
  merged   #46076, #46849, #48407: their squash merges on main, recorded as `status` leaves them;
           their tracks list two fork commits each (the merge, abbreviated, and a SHA the fork lacks);
  open     the 9 newest other squash merges of main~200..main, each made an open PR: its change
           cherry-picked onto the merge's parent (every third one after an empty commit of its own,
           so a head of two commits), the head at refs/porttrack/pull/N/head, as a live `status`
           fetches it, and recorded open with that head.
The fork is upstream main (a commit-graph written, as `porttrack init` does). `status --offline
--json` runs as the user runs it (a subprocess); cold: the kept diffs and answers removed
(.porttrack/prdiff, .porttrack/coverage), warm: the run after. Processes are counted by
testing/gitcount.py (a `git` first on PATH); wall seconds are medians of --runs cold runs.
With --code-before (e.g. `git archive main | tar -x -C DIR`), the same runs with that checkout's
code, and the two JSON answers compared: they must be equal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.gitcount import GitCounter, describe  # noqa: E402
from testing.gitfixtures import isolated_environ  # noqa: E402
from testing.realhistory import TITLES, cherry_pick, commit_tree, git, make_fork, record_merges  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

MERGED = (46076, 46849, 48407)
OPEN = 9
GOAL = 6


def squash_merges(repo: Path, rev_range: str) -> list[tuple[int, str]]:
    """(PR, commit) of the first-parent commits of `rev_range` whose subject ends "(#N)", newest first."""
    out = []
    for line in git(repo, "log", "--first-parent", "--no-merges", "--format=%H %s", rev_range).splitlines():
        sha, subject = line.split(" ", 1)
        if subject.rstrip().endswith(")") and "(#" in subject:
            number = subject.rstrip()[:-1].rsplit("(#", 1)[1]
            if number.isdigit():
                out.append((int(number), sha))
    return out


def build(history: Path, root: Path):
    tip = git(history, "rev-parse", "refs/heads/main")
    fork = make_fork(history, root / "fork", main=tip)
    found = dict(squash_merges(history, "refs/heads/main"))
    merges = {pr: found[pr] for pr in MERGED}
    opened: dict[int, str] = {}
    for pr, merge in squash_merges(history, "refs/heads/main~200..refs/heads/main"):
        if len(opened) == OPEN:
            break
        if pr in merges:
            continue
        parent = git(fork, "rev-parse", f"{merge}^1")
        onto = parent
        if len(opened) % 3 == 2:  # a head of two commits
            onto = commit_tree(fork, parent, git(fork, "rev-parse", f"{parent}^{{tree}}"), f"Start #{pr} (empty)")
        try:
            head = cherry_pick(fork, onto, merge, f"#{pr} as an open PR")
        except Exception:  # noqa: BLE001 - a merge that does not replay on its parent is skipped
            continue
        git(fork, "update-ref", f"refs/porttrack/pull/{pr}/head", head)
        opened[pr] = head
    git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
    # the merged PRs' tracks list fork commits, as a hand port's track does: the merge (abbreviated,
    # in the fork) and one the fork lacks
    listed = {pr: {"fork_commits": [merge[:9], "0" * 40]} for pr, merge in merges.items()}
    ws = make_workspace(root / "ws", {f"t{pr}": track([pr], **listed.get(pr, {})) for pr in [*merges, *opened]}, fork=fork,
                        token=None)
    state_file = record_merges(ws.root, merges, TITLES)
    state = json.loads(state_file.read_text())
    for pr, head in opened.items():
        state["prs"][str(pr)] = {**state["prs"][str(MERGED[0])], "number": pr, "title": f"PR {pr}", "state": "open",
                                 "merged_at": None, "merge_commit_sha": None, "head_sha": head, "head_ref": f"pr-{pr}"}
    state_file.write_text(json.dumps(state))
    world = {"history": "upstream vLLM main (real history)", "tip": tip, "tip_date": git(history, "log", "-1", "--format=%cI", tip),
             "commits": int(git(history, "rev-list", "--count", tip)), "merged": {str(k): v for k, v in merges.items()},
             "open": {str(k): v for k, v in opened.items()}}
    return ws, world


def measure(ws, code: Path, counter: GitCounter, runs: int) -> dict:
    env = {**ws.env(PYTHONDONTWRITEBYTECODE=None), "PYTHONPATH": str(code)}
    argv = [sys.executable, "-m", "porttrack", "status", "--offline", "--json"]

    def run(counted: bool, cold: bool) -> tuple[float, str]:
        if cold:
            for kept in ("prdiff", "coverage"):
                shutil.rmtree(ws.root / ".porttrack" / kept, ignore_errors=True)
        counter.reset()
        started = time.perf_counter()
        proc = subprocess.run(argv, env={**env, **counter.env(env)} if counted else env, cwd=ws.root, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"status --offline with {code}: exit {proc.returncode}: {proc.stderr[-1500:]}")
        return wall, proc.stdout

    _, cold_out = run(True, True)
    cold = counter.summary()
    _, warm_out = run(True, False)
    warm = counter.summary()
    walls = [run(False, True)[0] for _ in range(runs)]
    warm_walls = [run(False, False)[0] for _ in range(runs)]
    if json.loads(cold_out) != json.loads(warm_out):
        raise SystemExit(f"{code}: the warm answer differs from the cold one")
    return {"cold": cold, "warm": warm, "cold_wall_s": round(statistics.median(walls), 3),
            "warm_wall_s": round(statistics.median(warm_walls), 3), "answer": json.loads(cold_out)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=Path, default=os.environ.get("PORTTRACK_VLLM_HISTORY"))
    ap.add_argument("--code-before", type=Path, help="another porttrack checkout, run the same way and compared")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.history is None or not Path(args.history).exists():
        raise SystemExit("give the vLLM history with --history or PORTTRACK_VLLM_HISTORY")
    with tempfile.TemporaryDirectory(prefix="porttrack-status-real-") as tmp, isolated_environ(Path(tmp) / "home"):
        root = Path(tmp)
        ws, world = build(Path(args.history).resolve(), root)
        print(f"history: {world['history']}, tip {world['tip'][:12]} of {world['tip_date']}, {world['commits']} commits; "
              f"{len(world['merged'])} merged and {len(world['open'])} open PRs tracked; load {os.getloadavg()[0]:.2f}")
        counter = GitCounter(root / "gitcount")
        codes = {"this checkout": ROOT}
        if args.code_before:
            codes["before"] = args.code_before.resolve()
        results = {}
        for name, code in codes.items():
            results[name] = measure(ws, code, counter, args.runs)
            r = results[name]
            print(f"  {name:<14} cold {describe(r['cold'])}, {r['cold_wall_s']} s; warm {describe(r['warm'])}, {r['warm_wall_s']} s")
        same = None
        if "before" in results:
            same = results["before"]["answer"] == results["this checkout"]["answer"]
            print(f"  answers equal: {same}")
        cold = results["this checkout"]["cold"]["processes"]
        print(f"status --offline cold: {cold} git processes (goal <= {GOAL}): {'met' if cold <= GOAL else 'NOT met'}")
        if args.json:
            args.json.write_text(json.dumps({
                "schema": "porttrack/bench-status-offline-real/v1", "world": world, "goal_processes_cold": GOAL,
                "load_end": os.getloadavg()[0], "answers_equal": same,
                "results": {k: {kk: vv for kk, vv in v.items() if kk != "answer"} for k, v in results.items()}}, indent=2) + "\n")
            print(f"wrote {args.json}")
        return 0 if cold <= GOAL and same is not False else 1


if __name__ == "__main__":
    sys.exit(main())
