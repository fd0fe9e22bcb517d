"""How long `porttrack verify-converged` takes on a big repository, against a naive patch-id pass.

    python benchmarks/converge_bench.py [--commits 20000] [--fork-commits 8000] [--runs 5]

Builds, in a temporary folder (isolated from your git configuration), with one `git fast-import`
stream per repository:
  upstream  `--commits` commits on main, each rewriting 3 of 5,000 generated files; at 60 % a
            commit adds 7 attention modules; at 75 % PR #9001 is squash-merged (2 hunks in each
            module plus a new test file); at 85 % one of the modules is deleted (churn, as
            happened to #48407's `vllm/models/deepseek_v32/nvidia/attention.py`).
  fork      a clone (remote `upstream`) with two branches:
            rebased  upstream's tip + 50 fork commits            -> the ancestry case (converged)
            old      forked at 60 %, `--fork-commits` fork commits, the last a hand port of #9001
                     with one hunk edited                        -> no patch-id match; the
                                                                    per-hunk content check decides
Commit dates grow monotonically along every branch, as in a real history: git's walks are date
ordered, and `testing.gitfixtures.generate_history` restarts its clock on every call, which makes
a history built from several calls unrealistically expensive to walk.

Each case runs the whole command as a subprocess (`python -m porttrack verify-converged 9001
--fork-ref ... --json`) with the merge commit in the recorded PR state, as `status` leaves it (a
merge is final: no GitHub round trip, token or not), median of
`--runs` after one warm-up run (which also validates tracks.yaml once, as any earlier command
would have: later runs read it back from `.porttrack/validated-config.json`); the ancestry case
again with that file removed before every run (the first command after tracks.yaml changed), with
a token, and with the merge not yet recorded, so that the PR is asked of the GitHub emulator over
HTTP (loopback: no latency); and once more after `git commit-graph write`. Then the naive pass,
`git log -p <merge-base>..old | git patch-id --stable`, over the range the command narrows with
`-- <paths of the PR>`, and the ratio. It prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.gitfixtures import GIT_EPOCH, git, isolated_environ  # noqa: E402
from testing.github_emulator import DEFAULT_TOKEN, running_emulator  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

PR = 9001
MODULES = [f"vllm/model_executor/layers/mod_{i}.py" for i in range(7)]
DELETED_LATER = MODULES[-1]
TEST_FILE = "tests/test_short_prefill.py"
FILES = 5000
AUTHOR = b"Porttrack Bench <bench@porttrack.invalid>"


def module(i: int, edits: dict[int, str] | None = None) -> str:
    lines = [f"def f_{i}_{j}(x):\n    return x + {j}  # module {i}\n" for j in range(60)]
    for j, text in (edits or {}).items():
        lines[j] = text
    return "".join(lines)


def pr_edits(i: int, variant: str = "") -> dict[int, str]:
    return {
        10: f"def f_{i}_10(x):\n    # skip the indexer for dense short prefills{variant}\n    return x\n",
        45: f"def f_{i}_45(x):\n    return x * 2  # module {i}, changed by #{PR}\n",
    }


class Stream:
    """A `git fast-import` stream: commits with monotonic dates, generated or given file changes."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0
        self.rev = [0] * FILES

    def commit(self, branch: str, parent: str | None, when: int, message: str, files: dict[str, str | None]) -> str:
        self.mark += 1
        msg = message.encode() + b"\n"
        self.parts.append(b"commit refs/heads/%s\nmark :%d\ncommitter %s %d +0000\ndata %d\n%s"
                          % (branch.encode(), self.mark, AUTHOR, GIT_EPOCH + when, len(msg), msg))
        if parent:
            self.parts.append(b"from %s\n" % parent.encode())
        for name, content in files.items():
            if content is None:
                self.parts.append(b"D %s\n" % name.encode())
            else:
                data = content.encode()
                self.parts.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))
        self.parts.append(b"\n")
        return f":{self.mark}"

    def generated(self, branch: str, parent: str | None, when: int, n: int) -> str:
        """Commit `n` of a deterministic series rewriting 3 generated files."""
        files = {}
        for k in range(3):
            i = (n * 7919 + k * 104729) % FILES
            self.rev[i] += 1
            files[f"src/d{i // 100:03d}/mod_{i:05d}.py"] = "".join(
                f"value_{j} = {self.rev[i] if j == self.rev[i] % 11 else j * i}\n" for j in range(11))
        return self.commit(branch, parent, when, f"Change {n}", files)

    def run(self, repo: Path, marks: tuple[str, ...] = ()) -> list[str]:
        """Feed the stream to `repo`; return the SHAs of `marks`."""
        self.parts += [b"get-mark %s\n" % m.encode() for m in marks] + [b"done\n"]
        out = subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet", "--done", "--cat-blob-fd=1"],
                             input=b"".join(self.parts), check=True, capture_output=True).stdout
        return out.decode().split()


def build(root: Path, commits: int, fork_commits: int) -> dict[str, str]:
    up, fork = root / "upstream", root / "fork"
    git(root, "init", "-q", "--initial-branch=main", str(up))
    s = Stream()
    at_add, at_merge, at_delete = int(commits * 0.6), int(commits * 0.75), int(commits * 0.85)
    s.commit("main", None, 0, "Initial import", {f"src/d{i // 100:03d}/mod_{i:05d}.py": f"value = {i}\n" for i in range(FILES)})
    for n in range(1, commits):
        if n == at_add:
            added = s.commit("main", None, n * 60, "Add the sparse attention modules", {m: module(i) for i, m in enumerate(MODULES)})
        elif n == at_merge:
            files: dict[str, str | None] = {m: module(i, pr_edits(i)) for i, m in enumerate(MODULES)}
            files[TEST_FILE] = "".join(f"def test_{j}():\n    assert True\n" for j in range(80))
            merge = s.commit("main", None, n * 60, f"[Attention] Skip sparse indexer scoring for dense short prefills (#{PR})", files)
        elif n == at_delete:
            s.commit("main", None, n * 60, "Remove the old sparse attention module", {DELETED_LATER: None})
        else:
            s.generated("main", None, n * 60, n)
    added_sha, merge_sha = s.run(up, (added, merge))
    git(up, "checkout", "-q", "-f", "main")

    git(root, "clone", "-q", "--no-checkout", "--origin", "upstream", str(up), str(fork))
    f = Stream()
    # 'old': forked when the modules were added; its commits interleave in time with upstream's.
    step = (commits - at_add) * 60 // max(1, fork_commits)
    f.commit("old", added_sha, at_add * 60 + step, "Start the fork", {"FORK.md": "the fork's own work\n"})
    for k in range(1, fork_commits - 1):
        f.generated("old", None, at_add * 60 + (k + 1) * step, 10**6 + k)
    port = {m: module(i, pr_edits(i, " (fork)" if i == 0 else "")) for i, m in enumerate(MODULES)}
    f.commit("old", None, commits * 60 + 1, f"Port upstream #{PR} by hand", port)
    # 'rebased': upstream's tip and 50 commits of the fork's own.
    tip = git(fork, "rev-parse", "upstream/main")
    for k in range(50):
        f.generated("rebased", tip if k == 0 else None, (commits + 1 + k) * 60, 2 * 10**6 + k)
    f.run(fork)
    git(fork, "checkout", "-q", "-f", "rebased")
    return {"merge": merge_sha, "fork": str(fork)}


# -- the shape of upstream vLLM: 20k commits, two PRs the size of #46076 and #48407 ----------------

# #46076: 12 files, +1996/-98 (10 files edited in 6 hunks each, 2 new); #48407: 7 files, +230/-12
# (6 edited in 2 hunks each, 1 new), and one of its files deleted 2 days after the merge, as
# upstream deleted vllm/models/deepseek_v32/nvidia/attention.py.
VLLM_PRS = {
    46076: {"title": "[Spec Decode] Warm up the drafter kernels", "edited": 10, "hunks": 6, "new": 2,
            "add": 1996, "remove": 98},
    48407: {"title": "[Attention] Skip sparse indexer scoring for dense short prefills", "edited": 6, "hunks": 2,
            "new": 1, "add": 230, "remove": 12},
}
VLLM_LINES = 400  # lines of each module a PR edits
DAY = 1440  # commits a day at one a minute


def vllm_module(pr: int, i: int) -> list[str]:
    return [f"def f_{pr}_{i}_{j}(x):  # line {j}\n" for j in range(VLLM_LINES)]


def vllm_files(pr: int, variant: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """(files before, files after) of the PR: exactly its +/- line counts, spread over its hunks."""
    spec = VLLM_PRS[pr]
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    new_lines = spec["add"] - spec["add"] * 3 // 4 if spec["new"] else 0
    edit_add, edit_remove = spec["add"] - new_lines, spec["remove"]
    hunks = spec["edited"] * spec["hunks"]
    for i in range(spec["edited"]):
        name = f"vllm/pr{pr}/edited_{i:02d}.py"
        lines = vllm_module(pr, i)
        before[name] = "".join(lines)
        out: list[str] = []
        cut = 0
        for k in range(spec["hunks"]):
            n = i * spec["hunks"] + k
            add = edit_add // hunks + (1 if n < edit_add % hunks else 0)
            remove = edit_remove // hunks + (1 if n < edit_remove % hunks else 0)
            at = 20 + k * (VLLM_LINES - 40) // spec["hunks"]
            out += lines[cut:at]
            out += [f"    # #{pr} hunk {n} line {a}{variant if n == 0 else ''}\n" for a in range(add)]
            cut = at + remove
        after[name] = "".join(out + lines[cut:])
    for i in range(spec["new"]):
        share = new_lines // spec["new"] + (1 if i < new_lines % spec["new"] else 0)
        after[f"vllm/pr{pr}/new_{i}.py"] = "".join(f"NEW_{pr}_{i}_{j} = {j}\n" for j in range(share))
    return before, after


def build_vllm_shape(root: Path, commits: int = 20000, fork_commits: int = 2000) -> dict:
    """An upstream of `commits` commits (generated changes to 5,000 files) in which #46076 is
    squash-merged at 70 % and #48407 at 80 %, one of #48407's files deleted 2 days (2,880 commits)
    later; `refs/pull/N/head` for both (the PR's own commit on its base). The fork, a clone of it
    (remote `upstream`), has three branches, one per way `verify-converged` can decide:
      rebased  upstream's tip + 50 fork commits                        -> ancestry
      picked   forked at 60 %, `fork_commits` commits, then both PRs
               cherry-picked unchanged                                 -> patch-id
      old      the same fork, both PRs ported by hand with one hunk
               edited                                                  -> per-hunk content
    One `git fast-import` stream per repository. Returns the SHAs and paths."""
    up, fork = root / "upstream", root / "fork"
    git(root, "init", "-q", "--initial-branch=main", str(up))
    s = Stream()
    at_add, at_fork = int(commits * 0.5), int(commits * 0.6)
    at_merge = {46076: int(commits * 0.7), 48407: int(commits * 0.8)}
    at_delete = min(at_merge[48407] + 2 * DAY, commits - 2)
    deleted = "vllm/pr48407/edited_00.py"
    files = {f"src/d{i // 100:03d}/mod_{i:05d}.py": f"value = {i}\n" for i in range(FILES)}
    s.commit("main", None, 0, "Initial import", files)
    marks: dict[str, str] = {}
    for n in range(1, commits):
        pr = next((k for k, at in at_merge.items() if at == n), None)
        if n == at_add:
            both = {name: text for pr in VLLM_PRS for name, text in vllm_files(pr)[0].items()}
            marks["added"] = s.commit("main", None, n * 60, "Add the modules the PRs edit", both)
        elif pr is not None:
            before_pr = f":{s.mark}"
            marks[f"head{pr}"] = s.commit(f"pr{pr}", before_pr, n * 60 - 30, VLLM_PRS[pr]["title"], vllm_files(pr)[1])
            marks[f"merge{pr}"] = s.commit("main", before_pr, n * 60, f"{VLLM_PRS[pr]['title']} (#{pr})", vllm_files(pr)[1])
        elif n == at_delete:
            s.commit("main", None, n * 60, "Remove the old sparse attention module", {deleted: None})
        elif n == at_fork:
            marks["fork_point"] = s.generated("main", None, n * 60, n)
        else:
            s.generated("main", None, n * 60, n)
    names = sorted(marks)
    shas = dict(zip(names, s.run(up, tuple(marks[k] for k in names))))
    for pr in VLLM_PRS:
        git(up, "update-ref", f"refs/pull/{pr}/head", shas[f"head{pr}"])
        git(up, "branch", "-q", "-D", f"pr{pr}")
    git(up, "checkout", "-q", "-f", "main")

    git(root, "clone", "-q", "--no-checkout", "--origin", "upstream", str(up), str(fork))
    f = Stream()
    step = (commits - at_fork) * 60 // max(1, fork_commits)
    for branch, variant in (("picked", ""), ("old", " (fork)")):
        f.commit(branch, shas["fork_point"], at_fork * 60 + step, "Start the fork", {"FORK.md": "the fork's own work\n"})
        for k in range(1, fork_commits - 2):
            f.generated(branch, None, at_fork * 60 + (k + 1) * step, 10**6 + k)
        for j, pr in enumerate(VLLM_PRS):
            how = "cherry picked" if not variant else "ported by hand"
            f.commit(branch, None, commits * 60 + 1 + j, f"{VLLM_PRS[pr]['title']} (#{pr}), {how}", vllm_files(pr, variant)[1])
    tip = git(fork, "rev-parse", "upstream/main")
    for k in range(50):
        f.generated("rebased", tip if k == 0 else None, (commits + 1 + k) * 60, 2 * 10**6 + k)
    f.run(fork)
    git(fork, "checkout", "-q", "-f", "rebased")
    return {"upstream": up, "fork": fork, "merges": {pr: shas[f"merge{pr}"] for pr in VLLM_PRS},
            "heads": {pr: shas[f"head{pr}"] for pr in VLLM_PRS}, "deleted": deleted}


def recorded_prs(merges: dict[int, str], heads: dict[int, str] | None = None, open_prs: tuple[int, ...] = ()) -> dict:
    """The recorded upstream state of several PRs, merged as `status` leaves them (or open, for
    `open_prs`, with their head)."""
    prs = {}
    for pr, merge in merges.items():
        rec = recorded_state(merge)["prs"][str(PR)]
        rec.update(number=pr, title=VLLM_PRS.get(pr, {}).get("title", f"PR {pr}"))
        if pr in open_prs:
            rec.update(state="open", merged_at=None, merge_commit_sha=None, head_sha=(heads or {})[pr],
                       head_ref=f"pr{pr}", created_at="2026-07-01T00:00:00Z")
        prs[str(pr)] = rec
    return {**recorded_state(next(iter(merges.values()))), "prs": prs}


def recorded_state(merge: str) -> dict:
    return {
        "schema": "porttrack/upstream-state/v1", "upstream": "vllm-project/vllm",
        "observed_at": "2026-08-25T00:00:00Z", "source": "benchmark",
        "prs": {str(PR): {
            "number": PR, "title": "[Attention] Skip sparse indexer scoring for dense short prefills",
            "author": "bench", "state": "merged", "html_url": "", "created_at": None, "updated_at": None,
            "merged_at": "2026-07-28T16:17:22Z", "closed_at": None, "merge_commit_sha": merge,
            "head_sha": None, "head_ref": None, "base_ref": "main", "base_sha": None,
            "default_branch": "main", "observed_at": "2026-08-25T00:00:00Z",
        }},
    }


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system, the process and its git children), the result."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def measure(label: str, argv: list[str], env: dict[str, str], cwd: Path, runs: int,
            before_each: Callable[[], None] = lambda: None) -> tuple[float, dict]:
    walls, cpus, last = [], [], None
    timed(argv, env, cwd)  # warm-up: page cache, .pyc files written as an install would have, tracks.yaml validated once
    for _ in range(runs):
        before_each()
        wall, cpu, last = timed(argv, env, cwd)
        walls.append(wall)
        cpus.append(cpu)
    data = json.loads(last.stdout) if last.stdout.startswith("{") else {}
    line = (f"  {label:<44} median {statistics.median(walls):.3f}s wall, {statistics.median(cpus):.3f}s cpu "
            f"(wall runs: {', '.join(f'{t:.3f}' for t in walls)})")
    if data:
        s = data["summary"]
        line += (f"; {data['verdict']} by {data['method']}, hunks {s['present']}/{s['present_after_churn']}/{s['missing']}/{s['unknown']} "
                 f"present/present-after-churn/missing/unknown, exit {last.returncode}")
    elif last.returncode:
        line += f"; failed: {last.stderr.strip()[-300:]}"
    print(line)
    return statistics.median(walls), data


def decide_in_process(fork: Path, merge: str, ref: str, runs: int) -> float:
    """Median seconds of `converge.decide` alone (the git work and hunk checks), imports excluded."""
    from porttrack.converge.verify import MergedPR, decide
    from porttrack.git.repo import GitRepo

    repo, pr = GitRepo(fork), MergedPR(PR, "bench", merge, None, "recorded")
    decide(repo, pr, fork_ref=ref, upstream_base="upstream/main")  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        decide(repo, pr, fork_ref=ref, upstream_base="upstream/main")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=20000)
    ap.add_argument("--fork-commits", type=int, default=8000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="porttrack-bench-") as tmp, isolated_environ(Path(tmp) / "home"):
        root = Path(tmp)
        t0 = time.perf_counter()
        built = build(root, args.commits, args.fork_commits)
        fork = Path(built["fork"])
        print(f"built in {time.perf_counter() - t0:.1f}s: upstream main {git(fork, 'rev-list', '--count', 'upstream/main')} commits; "
              f"fork branch 'rebased' {git(fork, 'rev-list', '--count', 'rebased')}, 'old' {git(fork, 'rev-list', '--count', 'old')}; "
              f"{git(fork, 'rev-list', '--count', '--all')} commits in the fork checkout")
        print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

        ws = make_workspace(root / "ws", {"sparse-indexer-skip": track([PR])}, fork=fork, token=None)
        (ws.root / "state").mkdir()
        (ws.root / "state" / "upstream.json").write_text(json.dumps(recorded_state(built["merge"])))
        env = ws.env(PYTHONDONTWRITEBYTECODE=None)  # byte-compiled, as pip leaves an installed package
        cmd = [sys.executable, "-m", "porttrack", "verify-converged", str(PR), "--json", "--fork-ref"]

        print(f"whole command, subprocess ({sys.executable}), merge commit recorded by status, no token, median of {args.runs}:")
        floor, _ = measure("`python -m porttrack --version` (start-up floor)", [sys.executable, "-m", "porttrack", "--version"], env, ws.root, args.runs)
        ancestry, _ = measure("ancestry (fork ref 'rebased')", cmd + ["rebased"], env, ws.root, args.runs)
        forget = (ws.root / ".porttrack" / "validated-config.json").unlink
        measure("ancestry, tracks.yaml changed since last run", cmd + ["rebased"], env, ws.root, args.runs, before_each=forget)
        ours, old = measure("non-ancestor: patch-id + per-hunk ('old')", cmd + ["old"], env, ws.root, args.runs)
        core = {ref: decide_in_process(fork, built["merge"], ref, args.runs) for ref in ("rebased", "old")}
        print(f"  converge.decide() alone, in-process (git work + hunk checks): ancestry {core['rebased']:.3f}s, "
              f"non-ancestor {core['old']:.3f}s")
        with running_emulator() as fake:
            fake.add_repo("vllm-project/vllm", default_branch="main")
            fake.put_pull("vllm-project/vllm", PR, title="[Attention] Skip sparse indexer scoring", merged=True,
                          merge_commit_sha=built["merge"], head_sha=built["merge"], base_ref="main")
            live = {**env, "GITHUB_TOKEN": DEFAULT_TOKEN, "GITHUB_API_URL": fake.base_url}
            measure("ancestry, recorded merge, with a token", cmd + ["rebased"], live, ws.root, args.runs)
            state_file = ws.root / "state" / "upstream.json"
            recorded = state_file.read_text()
            before_merge = recorded_state(built["merge"])
            before_merge["prs"][str(PR)].update(state="open", merged_at=None, merge_commit_sha=None)
            state_file.write_text(json.dumps(before_merge))
            measure("ancestry, merge not recorded: GitHub asked", cmd + ["rebased"], live, ws.root, args.runs)
            state_file.write_text(recorded)

        subprocess.run(["git", "commit-graph", "write", "--reachable"], cwd=fork, check=True)
        print("the same after `git commit-graph write --reachable` in the fork checkout (what gc/maintenance leave):")
        measure("ancestry (fork ref 'rebased')", cmd + ["rebased"], env, ws.root, args.runs)
        measure("non-ancestor: patch-id + per-hunk ('old')", cmd + ["old"], env, ws.root, args.runs)
        graph = {ref: decide_in_process(fork, built["merge"], ref, args.runs) for ref in ("rebased", "old")}
        print(f"  converge.decide() alone, in-process: ancestry {graph['rebased']:.3f}s, non-ancestor {graph['old']:.3f}s")
        os.unlink(fork / ".git" / "objects" / "info" / "commit-graph")

        base = old["commits"]["merge_base"]
        count = git(fork, "rev-list", "--count", f"{base}..old")
        pipeline = f"git log -p {base}..old | git patch-id --stable > /dev/null"
        naive = []
        for _ in range(max(1, min(args.runs, 3))):
            t0 = time.perf_counter()
            subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], cwd=fork, check=True)
            naive.append(time.perf_counter() - t0)
        print(f"naive `git log -p <merge-base>..old | git patch-id --stable` over the same {count} commits: "
              f"median {statistics.median(naive):.3f}s (runs: {', '.join(f'{t:.3f}' for t in naive)})")
        print(f"  ratio naive pass / whole non-ancestor command: {statistics.median(naive) / ours:.1f}x; "
              f"naive pass / decide() alone: {statistics.median(naive) / core['old']:.1f}x "
              f"(the command computed patch-ids of {old['patch_id']['candidates'] if old.get('patch_id') else 0} candidate commit(s)); "
              f"ancestry target < 0.5 s: {ancestry:.3f}s; non-ancestor target < 3 s: {ours:.3f}s; start-up floor {floor:.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
