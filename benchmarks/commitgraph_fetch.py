"""A fetch keeps the commit-graph current (issue 34): `verify-converged` after porttrack fetched
500 new upstream commits is as fast as with a freshly written commit-graph, on real vLLM history.

    python benchmarks/commitgraph_fetch.py --history <vLLM git dir> [--new 500] [--runs 5] [--json FILE]
    (or PORTTRACK_VLLM_HISTORY=<vLLM git dir>)

The history is a clone of upstream vLLM whose `main` is upstream main (to 2026-08-17, 20,050
commits); it is only read. The script says which history it ran on.

1. An upstream: a local bare clone of the history (hard links), with `main` at the tip T.
2. A fork checkout with its own object store, blobless as `porttrack init` clones it: upstream's
   history up to T0, `--new` commits below T on the first-parent line, fetched (a real pack of
   commits and trees; file contents come when first read), and a commit-graph with changed-path Bloom
   filters written as `porttrack init` writes it.
3. porttrack's own fetch (`GitRepo.fetch`: `-c fetch.writeCommitGraph=true`) brings T: the
   `--new` commits arrive in a pack, and git adds them to the commit-graph (a split layer).
4. The fork's `main` moved to T; `verify-converged <PR> --fork-ref main` (the fork at upstream main,
   the churn walk over the newest commits) is timed with three commit-graphs swapped in, run by run
   (interleaved), medians of `--runs`:

     fetched  what the fetch left (the graph of step 2 plus the fetch's layer);
     stale    the graph of step 2 only (as if the fetch had not written one: the new commits miss it);
     fresh    `git commit-graph write --reachable --changed-paths` after the fetch (one full file).

   The churn walk alone (the `git log` verify runs, where the graph counts) is timed the same way.
   Goal: the walk's fetched / fresh <= 1.1 (the same speed); stale / fresh shows what a stale graph
   costs. The whole command's ratios are printed too (on a loaded machine they carry Python's
   start-up noise).
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

from porttrack.git.commitgraph import read_commit_graph  # noqa: E402
from porttrack.git.repo import GitRepo  # noqa: E402
from testing.gitcount import GitCounter, describe  # noqa: E402
from testing.gitfixtures import isolated_environ  # noqa: E402
from testing.realhistory import TITLES, git, record_merges  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

PRS = (46076, 48407)
GOAL = 1.1


def find_merge(repo: Path, pr: int) -> str:
    out = git(repo, "log", "--first-parent", "--format=%H %s", "-F", f"--grep=(#{pr})", "refs/heads/main")
    found = [line.split(" ", 1)[0] for line in out.splitlines() if line.rstrip().endswith(f"(#{pr})")]
    if not found:
        raise SystemExit(f"#{pr} has no squash merge on main in this history")
    return found[-1]


def graph_files(fork: Path) -> Path:
    return fork / ".git" / "objects" / "info"


def save_graph(fork: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    info = graph_files(fork)
    if (info / "commit-graph").exists():
        shutil.copy2(info / "commit-graph", dest / "commit-graph")
    if (info / "commit-graphs").exists():
        shutil.copytree(info / "commit-graphs", dest / "commit-graphs")


def load_graph(fork: Path, src: Path) -> None:
    info = graph_files(fork)
    (info / "commit-graph").unlink(missing_ok=True)
    shutil.rmtree(info / "commit-graphs", ignore_errors=True)
    if (src / "commit-graph").exists():
        shutil.copy2(src / "commit-graph", info / "commit-graph")
    if (src / "commit-graphs").exists():
        shutil.copytree(src / "commit-graphs", info / "commit-graphs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=Path, default=os.environ.get("PORTTRACK_VLLM_HISTORY"),
                    help="a git directory of upstream vLLM (main = upstream main); read only")
    ap.add_argument("--new", type=int, default=500, help="upstream commits the fetch brings")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    if args.history is None or not Path(args.history).exists():
        raise SystemExit("give the vLLM history with --history or PORTTRACK_VLLM_HISTORY")
    history = Path(args.history).resolve()
    with tempfile.TemporaryDirectory(prefix="porttrack-cg-fetch-") as tmp, isolated_environ(Path(tmp) / "home"):
        root = Path(tmp)
        tip = git(history, "rev-parse", "refs/heads/main")
        world = {"history": "upstream vLLM main (real history)", "tip": tip,
                 "tip_date": git(history, "log", "-1", "--format=%cI", tip),
                 "commits": int(git(history, "rev-list", "--count", tip))}
        print(f"history: {world['history']}, tip {tip[:12]} of {world['tip_date']}, {world['commits']} commits")
        up = root / "upstream.git"
        subprocess.run(["git", "clone", "-q", "--bare", "--local", str(history), str(up)], check=True)
        old = git(up, "rev-list", "--first-parent", f"--skip={args.new}", "--max-count=1", tip)
        git(up, "update-ref", "refs/heads/before", old)
        # a blobless fork, as `porttrack init` makes it (file contents come when first read)
        git(up, "config", "uploadpack.allowFilter", "true")
        git(up, "config", "uploadpack.allowAnySHA1InWant", "true")
        new = int(git(up, "rev-list", "--count", f"{old}..{tip}"))
        merges = {pr: find_merge(history, pr) for pr in PRS}

        fork = root / "fork"
        subprocess.run(["git", "init", "-q", "-b", "main", str(fork)], check=True)
        git(fork, "remote", "add", "upstream", str(up))
        t = time.perf_counter()
        git(fork, "config", "remote.upstream.promisor", "true")
        git(fork, "config", "remote.upstream.partialclonefilter", "blob:none")
        git(fork, "fetch", "-q", "--no-tags", "--filter=blob:none", "upstream", "+refs/heads/before:refs/remotes/upstream/main")
        first_fetch_s = time.perf_counter() - t
        git(fork, "update-ref", "refs/heads/main", old)
        git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
        before = read_commit_graph(graph_files(fork) / "..", [old])
        print(f"fork at {old[:12]} ({new} commits behind), its own objects (fetched in {first_fetch_s:.1f}s); "
              f"commit-graph as `init` writes it: {before.commits} commits, Bloom {before.bloom}")
        save_graph(fork, root / "graph-stale")

        # porttrack's fetch: the door's policy (fetch.writeCommitGraph=true), counted
        counter = GitCounter(root / "gitcount")
        repo = GitRepo.open(fork)
        saved = dict(os.environ)
        os.environ.update(counter.env(dict(os.environ)))
        counter.reset()
        t = time.perf_counter()
        try:
            repo.fetch("upstream", ["+refs/heads/main:refs/remotes/upstream/main"])
        finally:
            os.environ.clear()
            os.environ.update(saved)
        fetch_s = time.perf_counter() - t
        fetch_git = counter.summary()
        after = read_commit_graph(graph_files(fork) / "..", [tip])
        print(f"porttrack fetch of {new} new commits: {fetch_s:.2f}s, {describe(fetch_git)}; commit-graph now "
              f"{after.files} file(s), {after.commits} commits, Bloom {after.bloom}, holds the new tip: {not after.missing_tips}")
        save_graph(fork, root / "graph-fetched")
        git(fork, "update-ref", "refs/heads/main", tip)
        git(fork, "commit-graph", "write", "--reachable", "--changed-paths", "--no-progress")
        fresh = read_commit_graph(graph_files(fork) / "..", [tip])
        save_graph(fork, root / "graph-fresh")

        ws = make_workspace(root / "ws", {f"t{pr}": track([pr]) for pr in PRS}, fork=fork, token=None)
        record_merges(ws.root, merges, TITLES)
        env = ws.env(PYTHONDONTWRITEBYTECODE=None)
        py = [sys.executable, "-m", "porttrack", "verify-converged"]

        def verify(pr: int) -> tuple[float, dict]:
            t = time.perf_counter()
            proc = subprocess.run(py + [str(pr), "--json", "--dry-run", "--fork-ref", "main"], env=env, cwd=ws.root,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t
            if not proc.stdout.startswith("{"):
                raise SystemExit(f"verify-converged {pr}: exit {proc.returncode}: {proc.stderr[-800:]}")
            return wall, json.loads(proc.stdout)

        def walk(pr: int) -> float:
            """verify's churn walk alone (trail.walk's `git log`), where the commit-graph is what counts."""
            merge = merges[pr]
            paths = git(fork, "diff", "--name-only", "--no-renames", f"{merge}^", merge).splitlines()
            t = time.perf_counter()
            subprocess.run(["git", "-C", str(fork), "log", "--first-parent", "--diff-merges=first-parent", "--reverse", "-p", "-U0",
                            "--no-renames", "--format=%H", f"{merge}^..main", "--", *paths], check=True, capture_output=True,
                           env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
            return time.perf_counter() - t

        states = ("fetched", "stale", "fresh")
        times: dict[int, dict[str, list[float]]] = {pr: {s: [] for s in states} for pr in PRS}
        walks: dict[int, dict[str, list[float]]] = {pr: {s: [] for s in states} for pr in PRS}
        verdicts: dict[str, dict[str, str]] = {}
        for pr in PRS:
            for state in states:  # warm-up, and the verdicts (the same in every state)
                load_graph(fork, root / f"graph-{state}")
                verdicts.setdefault(str(pr), {})[state] = verify(pr)[1]["verdict"]
            for _ in range(args.runs):
                for state in states:
                    load_graph(fork, root / f"graph-{state}")
                    times[pr][state].append(verify(pr)[0])
                    walks[pr][state].append(walk(pr))
        results = {}
        failures = []
        for pr in PRS:
            med = {s: statistics.median(times[pr][s]) for s in states}
            r = {"medians_s": {s: round(v, 4) for s, v in med.items()},
                 "runs_s": {s: [round(x, 4) for x in times[pr][s]] for s in states},
                 "fetched_over_fresh": round(med["fetched"] / med["fresh"], 3),
                 "stale_over_fresh": round(med["stale"] / med["fresh"], 3),
                 "verdicts": verdicts[str(pr)]}
            wmed = {s: statistics.median(walks[pr][s]) for s in states}
            r["walk"] = {"medians_s": {s: round(v, 4) for s, v in wmed.items()},
                         "fetched_over_fresh": round(wmed["fetched"] / wmed["fresh"], 3),
                         "stale_over_fresh": round(wmed["stale"] / wmed["fresh"], 3)}
            print(f"#{pr} the churn walk alone (git log --first-parent -p -U0 <merge>^..main -- <paths>): fetched {wmed['fetched']:.3f}s, "
                  f"stale {wmed['stale']:.3f}s, fresh {wmed['fresh']:.3f}s: fetched/fresh {r['walk']['fetched_over_fresh']:.2f}x, "
                  f"stale/fresh {r['walk']['stale_over_fresh']:.2f}x")
            results[str(pr)] = r
            print(f"#{pr} verify-converged --fork-ref main (upstream main): fetched {med['fetched']:.3f}s, stale {med['stale']:.3f}s, "
                  f"fresh {med['fresh']:.3f}s (medians of {args.runs}, interleaved): fetched/fresh {r['fetched_over_fresh']:.2f}x, "
                  f"stale/fresh {r['stale_over_fresh']:.2f}x; verdicts {verdicts[str(pr)]}")
            if r["walk"]["fetched_over_fresh"] > GOAL:
                failures.append(f"#{pr}: the walk, fetched/fresh {r['walk']['fetched_over_fresh']}x (goal <= {GOAL}x)")
            if len(set(verdicts[str(pr)].values())) != 1:
                failures.append(f"#{pr}: verdicts differ between commit-graphs: {verdicts[str(pr)]}")
        out = {"schema": "porttrack/bench-commitgraph-fetch/v1", "world": world, "before": old, "new_commits": new,
               "first_fetch_s": round(first_fetch_s, 2),
               "porttrack_fetch": {"seconds": round(fetch_s, 3), "git": fetch_git},
               "graphs": {"stale": {"files": before.files, "commits": before.commits, "bloom": before.bloom},
                          "fetched": {"files": after.files, "commits": after.commits, "bloom": after.bloom,
                                      "holds_tip": not after.missing_tips},
                          "fresh": {"files": fresh.files, "commits": fresh.commits, "bloom": fresh.bloom}},
               "verify": results, "goal_fetched_over_fresh": GOAL, "load": os.getloadavg()[0], "failures": failures}
        if args.json:
            args.json.write_text(json.dumps(out, indent=1) + "\n")
        print("failures: " + ("; ".join(failures) if failures else "none"))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
