"""`verify-converged` on real vLLM history: verdicts per hunk, git processes, and time against the
naive patch-id pass (issues 30 and 34).

    python proofs/verify_real_history.py --history <vLLM git dir> [--runs 5] [--json FILE]
    (or PORTTRACK_VLLM_HISTORY=<vLLM git dir>)

The history is a clone of upstream vLLM whose `main` is upstream main (the full history: to
2026-08-17, 20,050 commits); it is only read (the fork shares its objects through `alternates`).
The script says which history it ran on (tip, date, commit count) in its output and JSON.

For #46076, #46849 and #48407 (their squash merges on main, found by the PR number in the subject):

  main        the fork at upstream main itself: converged, exit 0, by ancestry -- git processes
              counted (testing/gitcount.py, a `git` first on PATH) and, for #46076, wall time
              against the naive pass `git log -p <merge>^..main | git patch-id --stable`,
              interleaved run by run, medians of --runs;
  picked-N    upstream at the merge's parent, one fork commit, then a cherry-pick of the squash:
              converged by patch-id -- git processes counted, goal <= 5 as at main (issue 34);
  port-N      upstream at the merge's parent, then a hand port of every other hunk (the 1st, 3rd,
              ... of each file): each ported hunk present, every other missing (checked hunk by
              hunk against what the port applied).

The fork has a commit-graph with changed-path Bloom filters, as `porttrack init` writes it.
Every command runs as the user runs it (`python -m porttrack verify-converged N --json`), with the
merges in the recorded state as `status` leaves them (no GitHub request).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from porttrack.diff import hunks as hunks_mod  # noqa: E402
from testing.gitcount import GitCounter, describe  # noqa: E402
from testing.gitfixtures import isolated_environ  # noqa: E402
from testing.realhistory import TITLES, cherry_pick, commit_tree, git, hand_port, make_fork, record_merges  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

PRS = (46076, 46849, 48407)
GOAL_PROCESSES = 5
GOAL_RATIO = 0.2


def find_merge(repo: Path, pr: int) -> str:
    """The squash merge of upstream PR `pr` on main: the first-parent commit whose subject ends "(#pr)"."""
    out = git(repo, "log", "--first-parent", "--format=%H %s", "-F", f"--grep=(#{pr})", "refs/heads/main")
    found = [line.split(" ", 1)[0] for line in out.splitlines() if line.rstrip().endswith(f"(#{pr})")]
    if not found:
        raise SystemExit(f"#{pr} has no squash merge on main in this history")
    return found[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=Path, default=os.environ.get("PORTTRACK_VLLM_HISTORY"),
                    help="a git directory of upstream vLLM (main = upstream main); read only")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument("--code", type=Path, default=ROOT, help="the porttrack checkout to run (default: this one; e.g. main's, "
                                                            "for the figures before)")
    args = ap.parse_args()
    if args.history is None or not Path(args.history).exists():
        raise SystemExit("give the vLLM history with --history or PORTTRACK_VLLM_HISTORY")
    history = Path(args.history).resolve()
    with tempfile.TemporaryDirectory(prefix="porttrack-real-verify-") as tmp, isolated_environ(Path(tmp) / "home"):
        root = Path(tmp)
        tip = git(history, "rev-parse", "refs/heads/main")
        world = {"history": "upstream vLLM main (real history)", "tip": tip,
                 "tip_date": git(history, "log", "-1", "--format=%cI", tip),
                 "commits": int(git(history, "rev-list", "--count", tip))}
        print(f"history: {world['history']}, tip {tip[:12]} of {world['tip_date']}, {world['commits']} commits")
        merges = {pr: find_merge(history, pr) for pr in PRS}
        fork = make_fork(history, root / "fork", main=tip)
        cases: dict[str, dict] = {}
        expected: dict[str, dict[str, str]] = {}
        for pr, merge in merges.items():
            parent = git(fork, "rev-parse", f"{merge}^1")
            own = commit_tree(fork, parent, git(fork, "rev-parse", f"{parent}^{{tree}}"), "The fork's own commit (empty)")
            git(fork, "update-ref", f"refs/heads/picked-{pr}", cherry_pick(fork, own, merge, f"Cherry-pick #{pr}"))
            files = hunks_mod.parse_diff(subprocess.run(["git", "-C", str(fork), "diff", "--binary", "--full-index", "-M", parent, merge],
                                                        capture_output=True, check=True).stdout)
            keep = {(fd.path, i) for fd in files for i, h in enumerate(fd.hunks) if i % 2 == 0 and h.kind == "text"}
            port = hand_port(fork, parent, merge, lambda path, i: (path, i) in keep, f"Port part of #{pr} by hand")
            git(fork, "update-ref", f"refs/heads/port-{pr}", port)
            expected[f"port-{pr}"] = {h.id: ("present" if (fd.path, i) in keep else "missing")
                                      for fd in files for i, h in enumerate(fd.hunks)}
        t0 = time.perf_counter()
        git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
        print(f"commit-graph written in {time.perf_counter() - t0:.1f}s (as `porttrack init` does)")
        ws = make_workspace(root / "ws", {f"t{pr}": track([pr]) for pr in PRS}, fork=fork, token=None)
        record_merges(ws.root, merges, TITLES)
        env = {**ws.env(PYTHONDONTWRITEBYTECODE=None), "PYTHONPATH": str(args.code.resolve())}
        world["code"] = "this checkout" if args.code.resolve() == ROOT else f"another checkout ({args.code})"
        counter = GitCounter(root / "gitcount")
        py = [sys.executable, "-m", "porttrack", "verify-converged"]

        def run(pr: int, ref: str, counted: bool = False) -> tuple[float, dict, int]:
            run_env = {**env, **counter.env(env)} if counted else env
            counter.reset()
            t = time.perf_counter()
            proc = subprocess.run(py + [str(pr), "--json", "--dry-run", "--fork-ref", ref], env=run_env, cwd=ws.root,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t
            if not proc.stdout.startswith("{"):
                raise SystemExit(f"verify-converged {pr} --fork-ref {ref}: exit {proc.returncode}: {proc.stderr[-800:]}")
            return wall, json.loads(proc.stdout), proc.returncode

        failures = []
        for pr in PRS:
            for ref in ("main", f"picked-{pr}", f"port-{pr}"):
                wall, data, code = run(pr, ref, counted=True)
                git_calls = counter.summary()
                s = data["summary"]
                case = {"pr": pr, "fork_ref": ref, "exit": code, "verdict": data["verdict"], "method": data["method"],
                        "summary": s, "git": git_calls, "wall_s": round(wall, 3)}
                if ref in expected:
                    got = {h["id"]: h["state"] for h in data["hunks"]}
                    wrong = {i: (want, got.get(i)) for i, want in expected[ref].items() if got.get(i) != want}
                    case["hunks_checked"] = len(expected[ref])
                    case["hunks_wrong"] = wrong
                    if wrong:
                        failures.append(f"{ref}: {len(wrong)} hunk(s) not as ported: {list(wrong.items())[:3]}")
                elif data["verdict"] != "converged" or code != 0:
                    failures.append(f"#{pr} at {ref}: {data['verdict']}, exit {code}")
                if ref in ("main", f"picked-{pr}") and git_calls["processes"] > GOAL_PROCESSES:
                    failures.append(f"#{pr} at {ref}: {git_calls['processes']} git processes (goal <= {GOAL_PROCESSES})")
                cases[f"{pr} {ref}"] = case
                print(f"  #{pr} --fork-ref {ref:<13} {data['verdict']} by {data['method']}, exit {code}; "
                      f"{s['present']} present / {s['present_after_churn']} after churn / {s.get('undone_upstream', 0)} undone upstream / "
                      f"{s['missing']} missing / {s['unknown']} unknown; {describe(git_calls)}", flush=True)

        # #46076 at upstream main against the naive pass, interleaved run by run
        merge = merges[46076]
        naive_cmd = f"git log -p {merge}^..{tip} | git patch-id --stable > /dev/null"
        ours, naive = [], []
        run(46076, "main")  # warm-up
        subprocess.run(["bash", "-o", "pipefail", "-c", naive_cmd], cwd=fork, check=True)
        for _ in range(args.runs):
            ours.append(run(46076, "main")[0])
            t = time.perf_counter()
            subprocess.run(["bash", "-o", "pipefail", "-c", naive_cmd], cwd=fork, check=True)
            naive.append(time.perf_counter() - t)
        ratio = statistics.median(ours) / statistics.median(naive)
        speed = {"command": "verify-converged 46076 --fork-ref main (whole command, subprocess)",
                 "naive": f"git log -p <merge>^..main | git patch-id --stable ({git(fork, 'rev-list', '--count', f'{merge}^..{tip}')} commits)",
                 "ours_s": [round(x, 4) for x in ours], "naive_s": [round(x, 4) for x in naive],
                 "ours_median_s": round(statistics.median(ours), 4), "naive_median_s": round(statistics.median(naive), 4),
                 "ratio": round(ratio, 3), "goal": GOAL_RATIO, "load": os.getloadavg()[0]}
        print(f"#46076 at main: ours median {speed['ours_median_s']:.3f}s, naive median {speed['naive_median_s']:.3f}s "
              f"(interleaved, {args.runs} runs): {ratio:.2f}x (goal <= {GOAL_RATIO}x)")
        if ratio > GOAL_RATIO:
            failures.append(f"#46076 at main: {ratio:.2f}x the naive pass (goal <= {GOAL_RATIO}x)")
        result = {"schema": "porttrack/bench-verify-real-history/v1", "world": world,
                  "merges": merges, "cases": cases, "speed_46076_main": speed, "failures": failures}
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
        print("failures: " + ("; ".join(failures) if failures else "none"))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
