"""How long `porttrack import` takes, excluding the fetch, on a big repository.

    python benchmarks/import_bench.py [--commits 20000] [--files 5000] [--runs 3]

Builds, in a temporary folder (isolated from your git configuration):
  upstream  `--commits` commits over `--files` generated files (`testing.gitfixtures.
            generate_history`, one `git fast-import` stream), then 20 larger modules;
            PR #1 edits 10 well-separated lines in each of those 20 files: 200 hunks. It has two
            revisions: the second (a force-push) rewrites one hunk in each of 10 files, so 10
            hunks are unstable and the stability check has an older revision to diff.
  fork      a clone (remote `upstream`) with one fork commit that conflicts with one hunk, so the
            separability probe falls back from "all at once" to per file and per group.
  workspace tracks.yaml with one track, and the recorded state of PR #1 (both heads seen).

Then `porttrack.take.importer.import_pr` runs in-process, offline (no token: the recorded state is used),
`--runs` times after one warm-up, the queue reset between runs. The PR head is fetched once
before timing; each run's own (no-op) fetch is reported separately and subtracted: the figure is
"import excluding the fetch" — diffs, parsing, stability, probing, the patch file and the queue
write. It prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.gitfixtures import GIT_EPOCH, generate_history, git, isolated_environ  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

PR = 1
BIG = [f"vllm/big/module_{i:02d}.py" for i in range(20)]
LINES = 320
EDIT_EVERY = 30  # 10 edits per file, 30 lines apart: never adjacent, so 10 hunks per file


def big_module(i: int, edits: dict[int, str] | None = None) -> str:
    lines = [f"value_{i}_{j} = {j}  # module {i}\n" for j in range(LINES)]
    for j, text in (edits or {}).items():
        lines[j] = text
    return "".join(lines)


def pr_edits(i: int, revision: int) -> dict[int, str]:
    edits = {10 + k * EDIT_EVERY: f"value_{i}_{10 + k * EDIT_EVERY} = 'changed by the PR'  # hunk {k}\n" for k in range(10)}
    if revision == 2 and i < 10:  # the force-push rewrites the first hunk of half the files
        edits[10] = f"value_{i}_10 = 'changed again in revision 2'\n"
    return edits


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def build(tmp: Path, commits: int, files: int) -> dict:
    t0 = time.perf_counter()
    up = tmp / "upstream"
    generate_history(up, commits=commits, files=files)
    gen_s = time.perf_counter() - t0
    # Later commits are dated after the generated history, as in a real one: git's walks are date
    # ordered, and a commit older than its parents makes merge-base walk the whole history.
    clock = iter(range(GIT_EPOCH + (commits + 10) * 60, GIT_EPOCH + (commits + 100) * 60, 60))

    def commit(repo: Path, *args: str) -> None:
        when = f"{next(clock)} +0000"
        git(repo, "commit", "-q", *args, env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})

    write(up, {name: big_module(i) for i, name in enumerate(BIG)})
    git(up, "add", "-A")
    commit(up, "-m", "add 20 big modules")
    git(up, "checkout", "-q", "-b", "pr/1")
    write(up, {name: big_module(i, pr_edits(i, 1)) for i, name in enumerate(BIG)})
    commit(up, "-am", "PR #1, revision 1")
    rev1 = git(up, "rev-parse", "HEAD")
    git(up, "reset", "-q", "--hard", "main")
    write(up, {name: big_module(i, pr_edits(i, 2)) for i, name in enumerate(BIG)})
    commit(up, "-am", "PR #1, revision 2 (force-pushed)")
    rev2 = git(up, "rev-parse", "HEAD")
    git(up, "update-ref", "refs/pull/1/head", rev2)
    git(up, "checkout", "-q", "main")

    fork = tmp / "fork"
    git(tmp, "clone", "-q", "--origin", "upstream", str(up), str(fork))
    write(fork, {BIG[15]: big_module(15, {100: "value_15_100 = 'the fork changed this'\n"})})
    commit(fork, "-am", "fork: a conflicting local change")
    git(fork, "fetch", "-q", "upstream", f"{rev1}:refs/porttrack/pull/1/seen/{rev1}")
    return {"upstream": up, "fork": fork, "rev1": rev1, "rev2": rev2, "generate_s": gen_s, "build_s": time.perf_counter() - t0}


def record_state(ws_root: Path, rev1: str, rev2: str) -> None:
    from porttrack.workspace import state as state_mod
    from porttrack.workspace.state import HeadSeen, RecordedPR, UpstreamState

    pr = RecordedPR(
        number=PR, title="[Bench] 20 files, 200 hunks", author="bench", state="open",
        html_url="https://github.com/vllm-project/vllm/pull/1", created_at="2026-08-01T00:00:00Z",
        updated_at=None, merged_at=None, closed_at=None, merge_commit_sha=None, head_sha=rev2, head_ref="pr/1",
        base_ref="main", base_sha=None, default_branch="main", observed_at="2026-08-02T00:00:00Z",
        heads=(HeadSeen(rev1, "2026-08-01T00:00:00Z", "initial"), HeadSeen(rev2, "2026-08-02T00:00:00Z", "force-pushed")),
    )
    state = UpstreamState("vllm-project/vllm", "2026-08-02T00:00:00Z", "benchmark", {PR: pr})
    state_mod.save(ws_root / "state" / "upstream.json", state)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=20000)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="porttrack-import-bench-") as tmpdir, isolated_environ(Path(tmpdir) / "home"):
        tmp = Path(tmpdir)
        built = build(tmp, args.commits, args.files)
        handle = make_workspace(tmp / "ws", {"bench": track([PR])}, fork=built["fork"], token=None)
        record_state(handle.root, built["rev1"], built["rev2"])

        from porttrack.git.repo import GitRepo
        from porttrack.queue.manifest import reason_counts
        from porttrack.take.importer import import_pr
        from porttrack.tracks.file import load_config
        from porttrack.workspace.files import Workspace

        ws = Workspace(handle.root)
        config = load_config(ws.tracks_file, fork_override=str(built["fork"]))
        t0 = time.perf_counter()
        GitRepo(built["fork"]).fetch("upstream", [f"+refs/pull/{PR}/head:refs/porttrack/pull/{PR}/head", "+refs/heads/main:refs/porttrack/upstream/main"])
        first_fetch_s = time.perf_counter() - t0

        walls, fetches, plans = [], [], []
        for run in range(args.runs + 1):
            shutil.rmtree(ws.patches_dir, ignore_errors=True)
            t0 = time.perf_counter()
            outcome = import_pr(ws, config, PR, repo=GitRepo.open(built["fork"]), client=None)  # offline
            wall = time.perf_counter() - t0
            assert outcome.written, "the import wrote nothing"
            if run == 0:
                continue  # warm-up
            walls.append(wall)
            fetches.append(outcome.plan.timings["fetch_s"])
            plans.append(outcome.plan)
        plan = plans[-1]
        excl = [w - f for w, f in zip(walls, fetches)]
        commits = git(built["fork"], "rev-list", "--count", "upstream/main")
        tracked = len(git(built["fork"], "ls-files").splitlines())
        by_reason = reason_counts(h.ref() for h in plan.left_out)
        print(f"repository: {commits} commits on upstream main, {tracked} files in the fork checkout")
        print(f"generate_history: {built['generate_s']:.1f} s; whole fixture build: {built['build_s']:.1f} s")
        print(f"PR #{PR}: {len({h.path for h in plan.hunks})} files, {len(plan.hunks)} hunks, "
              f"{len(plan.revisions_compared)} revisions compared")
        print(f"taken {len(plan.taken)}, left out {len(plan.left_out)} {by_reason}")
        print(f"first fetch of the PR head (not counted): {first_fetch_s:.3f} s; per-run no-op fetch: "
              f"median {statistics.median(fetches):.3f} s")
        phases = {k: statistics.median(p.timings[k] for p in plans) for k in ("resolve_s", "classify_s", "probe_s", "write_patch_s")}
        print("phases (median): " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in phases.items()))
        print(f"import excluding the fetch: median {statistics.median(excl):.3f} s over {len(excl)} runs "
              f"(min {min(excl):.3f}, max {max(excl):.3f}); target < 2 s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
