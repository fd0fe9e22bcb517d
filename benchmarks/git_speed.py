"""How close porttrack's git work is to git's own floor, on a history of the shape of upstream vLLM,
with the git processes each command starts counted (testing/gitcount.py, a `git` first on PATH).

    python benchmarks/git_speed.py [--commits 20000] [--fork-commits 2000] [--runs 5] [--json FILE]

The history is `converge_bench.build_vllm_shape`: 20,000 upstream commits, a PR the size of #46076
(12 files, +1996/-98, 62 hunks) and one the size of #48407 (7 files, +230/-12, one file deleted
2 days after the merge), and a fork checkout with a branch for each way `verify-converged` decides
(ancestry, patch-id, per-hunk). Every command runs as the user runs it (`python -m porttrack ...`,
a subprocess), --runs times after one warm-up; figures are median [min..max] wall seconds, and the
git processes of one more, counted, run. The machine's load (`os.getloadavg`) is printed with each.

  verify-converged  both PRs on each of the three fork branches, first without a commit-graph (a
                    bare clone), then with the one `init` writes (changed-path Bloom filters)
  import            #46076 (open, 62 hunks; upstream/main before its merge, the fork branch one
                    commit ahead) into an empty queue, vs its git floor: merge-base, diff,
                    read-tree and `apply --cached --check` of the whole diff in a scratch index;
                    once as configured by default (built on the fork branch) and once with
                    `build_base: upstream/main` (quilt-style: a trial build over the queue)
  apply --staging   the imported patch, vs its plumbing floor (read-tree, apply --cached,
                    write-tree, commit-tree, update-ref)
  status --offline  with the fork checkout, 2 tracked PRs (one queued, one verified)
  report weekly     --offline --dry-run, vs status --offline

It prints figures (and writes them as JSON with --json); it is not a test.
"""

from __future__ import annotations

import argparse
import contextlib
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from converge_bench import VLLM_PRS, build_vllm_shape, recorded_prs  # noqa: E402

from testing.gitcount import GitCounter, describe  # noqa: E402
from testing.gitfixtures import git, isolated_environ  # noqa: E402
from testing.github_emulator import DEFAULT_TOKEN, running_emulator  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def spread(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4), "max": round(max(xs), 4), "runs": len(xs)}


def words(s: dict) -> str:
    return f"{s['median']:.3f} [{s['min']:.3f}..{s['max']:.3f}]"


class Bench:
    """Runs commands and floors. With `against` (a checkout of another porttrack, e.g. the code
    before a change), every command runs under both, interleaved run by run (A B A B ...), so a
    burst of load on this shared machine hits both alike; both are reported."""

    def __init__(self, root: Path, runs: int, against: Path | None = None) -> None:
        self.counter = GitCounter(root / "gitcount")
        self.runs = runs
        self.against = against
        self.results: dict[str, dict] = {}

    def command(self, label: str, argv: list[str], env: dict, cwd: Path, before_each=lambda: None, ok=(0,)) -> dict:
        """Median [min..max] of `runs` runs after a warm-up, and one more run with git counted."""
        trees = {"this": env}
        if self.against is not None:
            others = [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x and Path(x).resolve() != ROOT]
            trees = {"against": {**env, "PYTHONPATH": os.pathsep.join([str(self.against), *others])}, "this": env}
        walls: dict[str, list[float]] = {tree: [] for tree in trees}
        counts: dict[str, dict] = {}
        last: dict[str, subprocess.CompletedProcess] = {}
        for k in range(self.runs + 2):
            for tree, tree_env in trees.items():
                before_each()
                counted = k == self.runs + 1
                self.counter.reset()
                run_env = {**tree_env, **self.counter.env(tree_env)} if counted else tree_env
                t0 = time.perf_counter()
                proc = subprocess.run(argv, env=run_env, cwd=cwd, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if proc.returncode not in ok:
                    raise SystemExit(f"{label} ({tree}): exit {proc.returncode}: {proc.stderr[-500:]}")
                if 0 < k <= self.runs:
                    walls[tree].append(wall)
                if counted:
                    counts[tree] = self.counter.summary()
                last[tree] = proc
        out = {}
        for tree in trees:
            result = {"wall_s": spread(walls[tree]), "git": counts[tree], "load": load(), "exit": last[tree].returncode}
            if last[tree].stdout.startswith("{"):
                data = json.loads(last[tree].stdout)
                if "verdict" in data:
                    result["verdict"] = f"{data['verdict']} by {data['method']}"
            out[tree] = result
            extra = f"; {result['verdict']}" if "verdict" in result else ""
            name = label if len(trees) == 1 else f"{label} [{tree}]"
            print(f"  {name:<44} {words(result['wall_s'])} s; {describe(result['git'])}{extra}; load {result['load']}", flush=True)
        self.results[label] = out["this"] if len(trees) == 1 else out
        return out["this"]

    def floor(self, label: str, steps, before_each=lambda: None) -> dict:
        walls = []
        for k in range(self.runs + 1):
            before_each()
            t0 = time.perf_counter()
            steps()
            if k:
                walls.append(time.perf_counter() - t0)
        result = {"wall_s": spread(walls), "load": load()}
        self.results[label] = result
        print(f"  {label:<44} {words(result['wall_s'])} s; load {result['load']}", flush=True)
        return result


def sh(argv: list[str], cwd: Path, env: dict | None = None, input: bytes | None = None) -> str:
    return subprocess.run(argv, cwd=cwd, env=env, input=input, check=True, capture_output=True).stdout.decode().strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=20000)
    ap.add_argument("--fork-commits", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    ap.add_argument("--against", type=Path, help="another porttrack checkout (e.g. `git worktree add /tmp/before <commit>`): "
                    "every command runs under both, interleaved; figures for both")
    ap.add_argument("--keep", type=Path, help="build in this (new) folder and leave it there, to profile a command by hand")
    args = ap.parse_args()

    if args.keep:
        args.keep.mkdir(parents=True)
    with (contextlib.nullcontext(str(args.keep.resolve())) if args.keep else
          tempfile.TemporaryDirectory(prefix="porttrack-git-speed-")) as tmp, isolated_environ(Path(tmp) / "home"):
        root = Path(tmp)
        t0 = time.perf_counter()
        built = build_vllm_shape(root, args.commits, args.fork_commits)
        fork: Path = built["fork"]
        build_s = time.perf_counter() - t0
        print(f"built in {build_s:.1f}s: upstream main {git(fork, 'rev-list', '--count', 'upstream/main')} commits; "
              f"fork branches: " + ", ".join(f"{b} {git(fork, 'rev-list', '--count', b)}" for b in ("rebased", "picked", "old")))
        print(f"machine: {os.cpu_count()} cpus, load average {load()}; seconds: median [min..max] of {args.runs}")
        bench = Bench(root, args.runs, args.against.resolve() if args.against else None)
        # Every GitHub address points at the emulator on loopback, never the real one: import asks
        # for the PR; the other commands must ask nothing (checked: its log stays empty for them).
        fake_cm = running_emulator()
        fake = fake_cm.__enter__()
        fake.add_repo("vllm-project/vllm", default_branch="main")
        fake.put_pull("vllm-project/vllm", 46076, title=VLLM_PRS[46076]["title"], head_sha=built["heads"][46076], base_ref="main")
        py = [sys.executable, "-m", "porttrack"]

        # verify-converged: each PR on each branch, merges recorded as status leaves them
        ws = make_workspace(root / "ws", {f"t{pr}": track([pr]) for pr in VLLM_PRS}, fork=fork, token=None)
        (ws.root / "state").mkdir()
        (ws.root / "state" / "upstream.json").write_text(json.dumps(recorded_prs(built["merges"])))
        env = ws.env(PYTHONDONTWRITEBYTECODE=None, GITHUB_API_URL=fake.base_url)
        print("verify-converged (whole command, subprocess):")
        bench.command("porttrack --version (start-up floor)", py + ["--version"], env, ws.root)
        # First as a bare clone leaves it, then as `porttrack init` / `doctor --fix` leave the fork:
        # with a commit-graph and its changed-path Bloom filters (GitRepo.write_commit_graph).
        for graph in ("no commit-graph", "commit-graph"):
            if graph == "commit-graph":
                t0 = time.perf_counter()
                sh(["git", "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress"], fork)
                print(f"  (commit-graph written in {time.perf_counter() - t0:.1f}s, as init does)")
            for ref, how in (("rebased", "ancestry"), ("picked", "patch-id"), ("old", "per-hunk")):
                for pr in VLLM_PRS:
                    bench.command(f"verify-converged {pr} --fork-ref {ref} ({how}; {graph})",
                                  py + ["verify-converged", str(pr), "--json", "--fork-ref", ref], env, ws.root, ok=(0, 1))
            bench.floor(f"git merge-base --is-ancestor (ancestry floor; {graph})",
                        lambda: sh(["git", "merge-base", "--is-ancestor", built["merges"][46076], "rebased"], fork))
        assert not fake.log, f"verify-converged asked GitHub: {[r.path for r in fake.log]}"

        # import #46076 as it was while open: upstream/main (the build base) at the merge's first
        # parent, the fork branch one commit of its own ahead of it, #46076's head already fetched.
        before_merge = git(fork, "rev-parse", f"{built['merges'][46076]}^1")
        git(fork, "update-ref", "refs/remotes/upstream/main", before_merge)
        git(fork, "checkout", "-q", "-f", "-B", "before", before_merge)
        git(fork, "clean", "-q", "-f", "-d")
        (fork / "FORK.md").write_text("the fork's own work\n")
        git(fork, "add", "FORK.md")
        git(fork, "commit", "-q", "-m", "The fork's own commit")
        recorded = json.dumps(recorded_prs({46076: built["merges"][46076], 48407: built["merges"][48407]}, built["heads"],
                                           open_prs=(46076,)))
        workspaces = {}
        for how, options in (("default", {"branch": "before"}), ("quilt", {"branch": "before", "build_base": "upstream/main"})):
            w = make_workspace(root / f"iws-{how}", {"spec": track([46076]), "skip": track([48407])}, fork=fork, token=None,
                               fork_options=options)
            (w.root / "state").mkdir()
            (w.root / "state" / "upstream.json").write_text(recorded)
            workspaces[how] = w
        iws = workspaces["quilt"]
        ienv = iws.env(PYTHONDONTWRITEBYTECODE=None, GITHUB_API_URL=fake.base_url, GITHUB_TOKEN=DEFAULT_TOKEN)
        print("import #46076 (62 hunks, the PR asked of the GitHub emulator on loopback, its head already fetched once):")
        git(fork, "fetch", "-q", "upstream", "+refs/pull/46076/head:refs/porttrack/pull/46076/head")
        for how, label in (("default", "import 46076"), ("quilt", "import 46076 (build_base upstream/main: a trial build)")):
            w = workspaces[how]
            bench.command(label, py + ["import", "46076", "--json"],
                          w.env(PYTHONDONTWRITEBYTECODE=None, GITHUB_API_URL=fake.base_url, GITHUB_TOKEN=DEFAULT_TOKEN), w.root,
                          before_each=lambda w=w: shutil.rmtree(w.root / "patches", ignore_errors=True))
        scratch = root / "floor-index"
        fenv = {**os.environ, "GIT_INDEX_FILE": str(scratch)}

        def import_floor() -> None:
            head = built["heads"][46076]
            base = sh(["git", "merge-base", head, "upstream/main"], fork)
            diff = subprocess.run(["git", "diff", "--binary", "--full-index", "-M", base, head], cwd=fork, check=True,
                                  capture_output=True).stdout
            sh(["git", "read-tree", "before"], fork, fenv)
            sh(["git", "apply", "--cached", "--check", "-"], fork, fenv, input=diff)
        bench.floor("import floor (merge-base, diff, read-tree, apply --check)", import_floor)

        print("apply --staging of the imported patch:")
        staging = "refs/heads/porttrack/staging"
        left = sh(["git", "status", "--porcelain"], fork)
        if left:  # see the report of issue 25: import's 3-way probe left the PR's new files here
            print(f"    NOTE: import left files in the fork work tree: {' '.join(left.split())[:200]}; removed (git clean)")
            git(fork, "clean", "-q", "-f", "-d")
        bench.command("apply --staging", py + ["apply", "--staging", "--json"], ienv, iws.root,
                      before_each=lambda: git(fork, "update-ref", "-d", staging, check=False))
        patch = next((iws.root / "patches").glob("*.patch"))

        def apply_floor() -> None:
            base = before_merge
            sh(["git", "read-tree", base], fork, fenv)
            sh(["git", "apply", "--cached", str(patch)], fork, fenv)
            tree = sh(["git", "write-tree"], fork, fenv)
            commit = sh(["git", "commit-tree", tree, "-p", base, "-m", "floor"], fork, fenv)
            sh(["git", "update-ref", "refs/heads/floor", commit], fork, fenv)
        bench.floor("apply floor (read-tree, apply, write-tree, commit-tree, update-ref)", apply_floor)

        print("status --offline and report weekly --dry-run, with the fork checkout (1 PR queued, 1 verified):")
        git(fork, "update-ref", "refs/remotes/upstream/main", git(root / "upstream", "rev-parse", "main"))
        verified = subprocess.run(py + ["verify-converged", "48407", "--json"], env=ienv, cwd=iws.root, capture_output=True, text=True)
        assert verified.returncode in (0, 1), verified.stderr  # 1: not converged on 'before' (recorded all the same)
        fake.clear_log()
        bench.command("status --offline", py + ["status", "--offline"], ienv, iws.root)
        bench.command("report weekly --offline --dry-run", py + ["report", "weekly", "--offline", "--dry-run"], ienv, iws.root)
        assert not fake.log, f"an offline command asked GitHub: {[r.path for r in fake.log]}"

        def median(label: str) -> float:
            result = bench.results[label]
            return (result["this"] if "this" in result else result)["wall_s"]["median"]

        ratios = {
            "import / floor": median("import 46076") / median("import floor (merge-base, diff, read-tree, apply --check)"),
            "import (trial build) / floor": median("import 46076 (build_base upstream/main: a trial build)")
            / median("import floor (merge-base, diff, read-tree, apply --check)"),
            "apply --staging / floor": median("apply --staging") / median("apply floor (read-tree, apply, write-tree, commit-tree, update-ref)"),
            "report weekly / status --offline": median("report weekly --offline --dry-run") / median("status --offline"),
        }
        for k, v in ratios.items():
            print(f"  {k}: {v:.1f}x (medians)")
        fake_cm.__exit__(None, None, None)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({
                "machine": {"cpus": os.cpu_count(), "load_at_end": load()},
                "history": {"commits": args.commits, "fork_commits": args.fork_commits, "build_s": round(build_s, 1)},
                "runs": args.runs, "results": bench.results, "ratios": {k: round(v, 2) for k, v in ratios.items()},
            }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
