"""`porttrack import` on real vLLM history: PRs open, the fork's base older than the PR (issue 34).

    python proofs/import_real.py REPO [--runs 5] [--json FILE]

REPO is a git repository holding upstream vLLM's `main` (the full history, or the slice bundle
../shared/data/vllm-slice.bundle cloned bare: the script says which it ran on, with the commit
count and the tip). Nothing of it is changed: an upstream and a fork are made beside it in a
temporary folder (`--shared`, so its objects are not copied).

Cases (each PR opened as GitHub shows it while open: `refs/pull/N/head` = the squash's tree on
the squash's first parent, upstream `main` at that parent; the fork's branch at upstream main as
of 2026-07-01, older than the PR; the fork checkout with a commit-graph, as `porttrack init`
leaves it):

  48407   "[Attention] Skip sparse indexer scoring for dense short prefills" (squash ba702e978e)
  46849   "[MRV2][Spec] Fuse AR speculator ... one CUDA graph" (squash a311916a29)
  many    upstream's own commits before #46849's squash, taken together as one PR until its
          diff has at least 952 hunks (a PR the size of the issue's 952-hunk one), over the same
          older fork base

Each runs as the user runs it (`python -m porttrack import N --offline --json`, a subprocess, the
queue emptied before each run), --runs times after a warm-up; the git processes of one more run
are counted (testing/gitcount.py). The plumbing floor is what git alone needs for the question:
merge-base, diff, read-tree of the fork base and `apply --cached --check` of the PR's diff in a
scratch index. It prints figures (and writes them as JSON with --json); it is not a test.

`--baseline DIR` (a checkout of other code, e.g. `git worktree add --detach /tmp/base main`): each
run of this checkout's code is followed by one of DIR's on the same case (interleaved, so both see
the same load), the plumbing floor run between them; the figures of both, and their ratio, are
printed and written; the plans must be the same (hunk verdicts, reasons, taken count, source check).

Beside wall time, CPU time (user + system of the command and the git processes it waited for,
from `getrusage(RUSAGE_CHILDREN)`), medians of the same runs: on a shared, loaded machine the wall
figures of both the command and the floor swing with the load; the CPU figures much less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
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
from testing.gitfixtures import git, isolated_environ  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

# upstream squash merges: in the full history, and in the slice (its README maps them)
SQUASHES = {
    48407: ("ba702e978e", "aadab92253eec07de8560da322fdfede049bacd5"),
    46849: ("a311916a29", "8a3064361a90deee69dcd8100b427a7bd1b594e6"),
}
FORK_BASE_DATE = "2026-07-01T00:00:00Z"
MANY_HUNKS = 952
MANY = 1  # the PR number of the "many" case


def cpu_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def spread(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4), "max": round(max(xs), 4), "runs": len(xs)}


def squash_in(repo: Path, pr: int) -> str:
    for candidate in SQUASHES[pr]:
        sha = subprocess.run(["git", "rev-parse", "--verify", "-q", f"{candidate}^{{commit}}"], cwd=repo, capture_output=True,
                             text=True).stdout.strip()
        if sha:
            return sha
    raise SystemExit(f"neither of {SQUASHES[pr]} (#{pr}'s squash) is in {repo}")


def hunks_of(repo: Path, a: str, b: str) -> int:
    out = subprocess.run(["git", "diff", "--no-ext-diff", a, b], cwd=repo, capture_output=True).stdout
    return sum(1 for line in out.split(b"\n") if line.startswith(b"@@ "))


def build_case(tmp: Path, source: Path, pr: int, parent: str, tree_of: str) -> dict:
    """upstream (main at `parent`, refs/pull/pr/head = tree_of's tree on parent), the fork, a workspace."""
    case = tmp / f"case-{pr}"
    case.mkdir()
    up = case / "upstream.git"
    git(case, "clone", "-q", "--bare", "--shared", str(source), str(up))
    env = {"GIT_AUTHOR_NAME": "contributor", "GIT_AUTHOR_EMAIL": "c@example.invalid", "GIT_COMMITTER_NAME": "github",
           "GIT_COMMITTER_EMAIL": "g@example.invalid", "GIT_AUTHOR_DATE": "1785000000 +0000",
           "GIT_COMMITTER_DATE": "1785000000 +0000"}
    head = git(up, "commit-tree", f"{tree_of}^{{tree}}", "-p", parent, "-m", f"#{pr} as its head", env=env)
    git(up, "update-ref", f"refs/pull/{pr}/head", head)
    git(up, "update-ref", "refs/heads/main", parent)
    git(up, "symbolic-ref", "HEAD", "refs/heads/main")
    fork = case / "fork"
    git(case, "clone", "-q", "--shared", "--no-checkout", "--origin", "upstream", str(up), str(fork))
    base = git(fork, "rev-list", "-1", "--first-parent", f"--before={FORK_BASE_DATE}", parent)
    git(fork, "update-ref", "refs/heads/main", base)
    git(fork, "symbolic-ref", "HEAD", "refs/heads/main")
    git(fork, "read-tree", "main")
    git(fork, "fetch", "-q", "upstream", f"+refs/pull/{pr}/head:refs/porttrack/pull/{pr}/head",
        "+refs/heads/main:refs/porttrack/upstream/main")
    git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
    ws = make_workspace(case / "ws", {"t": track([pr])}, fork=fork, token=None)
    record = {"number": pr, "title": f"vLLM #{pr}" if pr != MANY else "upstream commits as one PR", "author": "contributor",
              "state": "open", "html_url": "", "created_at": "2026-07-01T00:00:00Z", "updated_at": None, "merged_at": None,
              "closed_at": None, "merge_commit_sha": None, "head_sha": head, "head_ref": f"pr{pr}", "base_ref": "main",
              "base_sha": None, "default_branch": "main", "observed_at": "2026-08-25T00:00:00Z"}
    (ws.root / "state").mkdir()
    (ws.root / "state" / "upstream.json").write_text(json.dumps({
        "schema": "porttrack/upstream-state/v1", "upstream": "vllm-project/vllm", "observed_at": "2026-08-25T00:00:00Z",
        "source": "benchmark", "prs": {str(pr): record}}))
    return {"ws": ws, "fork": fork, "head": head, "base": base, "parent": parent,
            "pr_hunks": hunks_of(fork, parent, head), "fork_behind": int(git(fork, "rev-list", "--count", f"{base}..{parent}"))}


def _verdicts(plan: dict) -> list:
    """What must not change between two codes: every hunk's verdict, what is taken, the source check."""
    return [[(h["id"], h["taken"], h["applies"], h["reason_kind"], h["reason"]) for h in plan.get("hunks", [])],
            plan.get("taken"), None if not plan.get("source_check") else plan["source_check"].get("ok"),
            None if not plan.get("regenerated") else plan["regenerated"].get("how")]


def measure(case: dict, pr: int, runs: int, counter: GitCounter, baseline: Path | None = None) -> dict:
    ws, fork = case["ws"], case["fork"]
    argv = [sys.executable, "-m", "porttrack", "import", str(pr), "--offline", "--json"]
    env = ws.env(PYTHONDONTWRITEBYTECODE=None)
    base_env = None if baseline is None else {**env, "PYTHONPATH": str(baseline)}
    if baseline is not None:  # compiled once, as this checkout's own code is by its first run
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(baseline / "porttrack")], capture_output=True)
    walls, cpus, base_walls, base_cpus = [], [], [], []
    out = base_out = None

    def one(run_env: dict) -> tuple[subprocess.CompletedProcess, float, float]:
        shutil.rmtree(ws.root / "patches", ignore_errors=True)
        t0, c0 = time.perf_counter(), cpu_children()
        proc = subprocess.run(argv, env=run_env, cwd=ws.root, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - t0, cpu_children() - c0
        if proc.returncode not in (0, 1):
            raise SystemExit(f"import {pr}: exit {proc.returncode}: {proc.stderr[-800:]}")
        return proc, wall, cpu

    scratch = fork / ".git" / "floor-index"
    fenv = {**os.environ, "GIT_INDEX_FILE": str(scratch)}

    def floor() -> None:
        head = case["head"]
        base = subprocess.run(["git", "merge-base", head, "refs/porttrack/upstream/main"], cwd=fork, check=True,
                              capture_output=True, text=True).stdout.strip()
        diff = subprocess.run(["git", "diff", "--binary", "--full-index", "-M", base, head], cwd=fork, check=True,
                              capture_output=True).stdout
        subprocess.run(["git", "read-tree", case["base"]], cwd=fork, env=fenv, check=True, capture_output=True)
        subprocess.run(["git", "apply", "--cached", "--check", "-"], cwd=fork, env=fenv, input=diff, capture_output=True)

    floors: list[float] = []
    floor_cpus: list[float] = []
    for k in range(runs + 2):  # a warm-up, `runs` timed, one counted; the floor and the baseline between
        counted = k == runs + 1
        counter.reset()
        run_env = {**env, **counter.env(env)} if counted else env
        proc, wall, cpu = one(run_env)
        if 0 < k <= runs:
            walls.append(wall)
            cpus.append(cpu)
        if counted:
            git_calls = counter.summary()
        out = proc
        if k <= runs:
            t0, c0 = time.perf_counter(), cpu_children()
            floor()
            if k:
                floors.append(time.perf_counter() - t0)
                floor_cpus.append(cpu_children() - c0)
        if base_env is not None and k <= runs:
            base_out, bwall, bcpu = one(base_env)
            if k:
                base_walls.append(bwall)
                base_cpus.append(bcpu)
    plan = json.loads(out.stdout) if out.stdout.startswith("{") else {}
    base_plan = None if base_out is None else (json.loads(base_out.stdout) if base_out.stdout.startswith("{") else {})
    scratch.unlink(missing_ok=True)
    reasons: dict[str, int] = {}
    for h in plan.get("hunks", []):
        if not h["taken"]:
            reasons[h["reason_kind"]] = reasons.get(h["reason_kind"], 0) + 1
    result = {
        "exit": out.returncode, "wall_s": spread(walls), "floor_s": spread(floors),
        "ratio_to_floor": round(statistics.median(walls) / statistics.median(floors), 2),
        "cpu_s": spread(cpus), "floor_cpu_s": spread(floor_cpus),
        "cpu_ratio_to_floor": round(statistics.median(cpus) / statistics.median(floor_cpus), 2),
        "git": git_calls, "pr_hunks": case["pr_hunks"], "fork_base": case["base"], "fork_behind_pr_base": case["fork_behind"],
        "taken": plan.get("taken"), "left_out_by_reason": reasons,
        "source_check": None if not plan.get("source_check") else {"ok": plan["source_check"]["ok"],
                                                                    "checked": len(plan["source_check"]["checked"])},
        "regenerated": None if not plan.get("regenerated") else plan["regenerated"]["how"],
        "timings": plan.get("timings"),
    }
    if base_plan is not None:
        same = _verdicts(plan) == _verdicts(base_plan)
        result["baseline"] = {"code": baseline.name, "wall_s": spread(base_walls), "cpu_s": spread(base_cpus),
                              "ratio_to_floor": round(statistics.median(base_walls) / statistics.median(floors), 2),
                              "cpu_ratio_to_floor": round(statistics.median(base_cpus) / statistics.median(floor_cpus), 2),
                              "same_plan": same, "timings": base_plan.get("timings")}
        print(f"    baseline ({baseline.name}): {spread(base_walls)['median']:.3f} s wall ({result['baseline']['ratio_to_floor']}x), "
              f"CPU {spread(base_cpus)['median']:.3f} s ({result['baseline']['cpu_ratio_to_floor']}x); this code / baseline: wall "
              f"{statistics.median(walls) / statistics.median(base_walls):.2f}, CPU {statistics.median(cpus) / statistics.median(base_cpus):.2f}; "
              f"same plan: {same}", flush=True)
        if not same:
            raise SystemExit(f"import {pr}: the plan differs from the baseline's")
    print(f"  import {pr if pr != MANY else 'many'}: {result['pr_hunks']} hunks, {result['taken']} taken, left out {reasons}; "
          f"{spread(walls)['median']:.3f} s [{spread(walls)['min']:.3f}..{spread(walls)['max']:.3f}], floor "
          f"{spread(floors)['median']:.3f} s ({result['ratio_to_floor']}x); CPU {spread(cpus)['median']:.3f} s, floor "
          f"{spread(floor_cpus)['median']:.3f} s ({result['cpu_ratio_to_floor']}x); {describe(git_calls)}; source check "
          f"{'ok' if result['source_check'] and result['source_check']['ok'] else result['source_check']}", flush=True)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path, help="a git repository with upstream vLLM's main (full history or the slice)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument("--cases", default="48407,46849,many")
    ap.add_argument("--baseline", type=Path, help="a checkout of other code, run interleaved with this one's (see above)")
    ap.add_argument("--keep", type=Path, help="build in this (new) folder and leave it there, to run a case by hand")
    args = ap.parse_args()
    source = args.repo.resolve()
    tip = subprocess.run(["git", "log", "-1", "--format=%H %cI", "main"], cwd=source, capture_output=True, text=True, check=True).stdout.split()
    commits = int(subprocess.run(["git", "rev-list", "--count", "main"], cwd=source, capture_output=True, text=True, check=True).stdout)
    history = {"repository": source.name if source.name != "repo" else source.parent.name, "commits_on_main": commits,
               "main": tip[0], "main_date": tip[1], "kind": "full vLLM history" if commits > 5000 else "the vLLM slice (real commits, 30 paths)"}
    print(f"history: {history['kind']}: {commits} commits on main, tip {tip[0][:12]} ({tip[1]})")
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cpus, load {' '.join(f'{x:.2f}' for x in load)}; runs {args.runs}")
    results: dict[str, dict] = {}
    if args.keep:
        args.keep.mkdir(parents=True)
    with (contextlib.nullcontext(str(args.keep.resolve())) if args.keep else
          tempfile.TemporaryDirectory(prefix="porttrack-import-real-")) as tmpdir, isolated_environ(Path(tmpdir) / "home"):
        tmp = Path(tmpdir)
        counter = GitCounter(tmp / "gitcount")
        for name in args.cases.split(","):
            t0 = time.perf_counter()
            if name == "many":
                squash = squash_in(source, 46849)
                parent = git(source, "rev-parse", f"{squash}^")
                k, start = 8, None
                while k < 4096:
                    start = git(source, "rev-parse", f"{parent}~{k}")
                    if hunks_of(source, start, parent) >= MANY_HUNKS:
                        break
                    k *= 2
                lo, hi = k // 2, k  # the fewest commits that make MANY_HUNKS
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if hunks_of(source, git(source, "rev-parse", f"{parent}~{mid}"), parent) >= MANY_HUNKS:
                        hi = mid
                    else:
                        lo = mid
                pr_base = git(source, "rev-parse", f"{parent}~{hi}")
                case = build_case(tmp, source, MANY, pr_base, parent)
                case["commits_taken"] = hi
                pr = MANY
            else:
                pr = int(name)
                squash = squash_in(source, pr)
                case = build_case(tmp, source, pr, git(source, "rev-parse", f"{squash}^"), squash)
            print(f"case {name}: built in {time.perf_counter() - t0:.1f} s; fork base {case['base'][:12]}, "
                  f"{case['fork_behind']} commits behind the PR's base", flush=True)
            results[name] = measure(case, pr, args.runs, counter, args.baseline.resolve() if args.baseline else None)
            if "commits_taken" in case:
                results[name]["upstream_commits_in_the_pr"] = case["commits_taken"]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"history": history, "machine": {"cpus": os.cpu_count(), "load_at_start": [round(x, 2) for x in load],
                                                                     "load_at_end": [round(x, 2) for x in os.getloadavg()]},
                                         "runs": args.runs, "code": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                         capture_output=True, text=True).stdout.strip(),
                                         "baseline": None if not args.baseline else args.baseline.name,
                                         "fork_base_date": FORK_BASE_DATE, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
