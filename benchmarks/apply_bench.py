"""Benchmark `porttrack apply --staging` on a large generated repository.

A fork of 20,000 commits / 5,000 files (testing.gitfixtures.generate_history), a queue holding one
`git format-patch` of an upstream PR that touches 20 files with 10 hunks each (200 hunks), and
three upstream bases it is applied to:

  clean   the base the PR was cut from: every hunk applies where it says;
  offset  upstream inserted lines at the top of each file: every hunk moved;
  3-way   upstream changed a line inside every hunk's context: plain apply fails for every file,
          and the patch is merged 3-way (its pre-image blobs are in the repository).

The workspace builds from `upstream/main` (fork.build_base), which each row points at its base;
each row asserts the outcome it exists to measure (clean / offset / 3-way), for the patch and for
every hunk — a row whose path was not taken stops the benchmark instead of printing a figure.

For each, the build is timed in-process (`porttrack.apply.apply`: the core, without Python start-up)
and as the user runs it (`python -m porttrack apply --staging`, a separate process), with the git
processes it started counted (testing/gitcount.py); and the plumbing floor: what the same build
costs done by hand in a scratch index (`read-tree`, `apply --cached [--3way]`, `write-tree`,
`commit-tree`, `update-ref`: 5 processes). The branch is deleted between repetitions so every run
builds, creates the ref and records the run. Figures: median [min–max] of --repeat runs.
Target (issue 3): apply under 2 s; issue 25: closer to the plumbing floor.

    python benchmarks/apply_bench.py [--commits 20000] [--files 5000] [--repeat 5] [--json FILE]

World: generated history (testing.gitfixtures.generate_history), not vLLM's; --json writes the
figures (seconds per run, medians, ratios, git processes) with that said. CPU seconds (user +
system of the command and its git processes) beside wall, for the CLI and the floor: on a shared,
loaded machine they swing much less. `--baseline DIR` (a checkout of other code): its CLI run
after each of this checkout's, on the same row, the figures of both printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from porttrack import apply as apply_mod  # noqa: E402
from porttrack.diff.hunks import parse_diff  # noqa: E402
from porttrack.git.repo import GitRepo  # noqa: E402
from porttrack.queue import manifest as queue_mod  # noqa: E402
from porttrack.queue.manifest import HunkRef, Patch, Revision, patch_file_name  # noqa: E402
from porttrack.tracks.file import load_config  # noqa: E402
from porttrack.workspace.files import Workspace  # noqa: E402
from testing.gitcount import GitCounter, describe  # noqa: E402
from testing.gitfixtures import generate_history, git, git_bytes, isolated_environ, write_files  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402

PR_FILES, HUNKS_PER_FILE, FILE_LINES, SPACING = 20, 10, 400, 37
STAGING = "refs/heads/porttrack/staging"


def big_file(n: int, changed: dict[int, str] | None = None, top: int = 0) -> str:
    lines = [f"line_{n}_{i} = {i * n}\n" for i in range(1, FILE_LINES + 1)]
    for lineno, text in (changed or {}).items():
        lines[lineno - 1] = text + "\n"
    return "".join([f"# inserted upstream {i}\n" for i in range(top)] + lines)


def hunk_lines() -> list[int]:
    return [20 + k * SPACING for k in range(HUNKS_PER_FILE)]


def commit(fork: Path, files: dict[str, str], message: str) -> str:
    write_files(fork, files)
    git(fork, "add", "-A")
    git(fork, "commit", "-q", "-m", message)
    return git(fork, "rev-parse", "HEAD")


def setup(root: Path, commits: int, files: int) -> tuple[Path, Workspace, dict[str, str]]:
    fork = root / "fork"
    t0 = time.perf_counter()
    generate_history(fork, commits=commits, files=files)
    print(f"generated {commits} commits / {files} files in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    names = [f"src/pr/file_{n:02d}.py" for n in range(PR_FILES)]
    base = commit(fork, {name: big_file(n) for n, name in enumerate(names)}, "Add the files the PR touches")
    # the PR: 10 separated one-line changes in each of 20 files
    git(fork, "checkout", "-q", "-b", "pr")
    head = commit(fork, {name: big_file(n, {ln: f"line_{n}_{ln} = 'changed by the PR'" for ln in hunk_lines()})
                         for n, name in enumerate(names)}, "The PR")
    message = f"Speculative decoding: warm up kernels\n\nPorttrack-PR: 46849\nPorttrack-Upstream-Head: {head}\n"
    mail = git(fork, "commit-tree", f"{head}^{{tree}}", "-p", base, "-m", message)
    data = git_bytes(fork, "format-patch", "-1", "--stdout", mail)
    git(fork, "checkout", "-q", "main")
    # upstream bases: the PR's own base, one where every hunk moved, one needing a 3-way merge
    bases = {"clean": base}
    git(fork, "checkout", "-q", "-b", "up-offset", base)
    bases["offset"] = commit(fork, {name: big_file(n, top=7) for n, name in enumerate(names)}, "Upstream inserts lines")
    git(fork, "checkout", "-q", "-b", "up-3way", base)
    bases["3-way"] = commit(fork, {name: big_file(n, {ln + 2: f"line_{n}_{ln + 2} = 'changed upstream'" for ln in hunk_lines()})
                                   for n, name in enumerate(names)}, "Upstream edits near every hunk")
    git(fork, "checkout", "-q", "main")
    git(fork, "branch", "-q", "-D", "pr", "up-offset", "up-3way")

    handle = make_workspace(root / "ws", {"spec": track([46849])}, fork=fork, token=None,
                            fork_options={"build_base": "upstream/main"})
    ws = Workspace(handle.root)
    hunks = tuple(HunkRef(h.id, h.path, h.kind) for fd in parse_diff(data) for h in fd.hunks)
    assert len(hunks) == PR_FILES * HUNKS_PER_FILE, len(hunks)
    name = "0001-pr46849-warm-up-kernels"
    patch = Patch(name=name, file=patch_file_name(name, data), sha256=hashlib.sha256(data).hexdigest(), track="spec",
                  pr=46849, upstream="vllm-project/vllm", title="warm up kernels", revision=Revision(head=head, base=base),
                  hunks_taken=hunks, hunks_left_out=(), depends_on=(), state="queued", gate="spec")
    queue_mod.save(ws, queue_mod.Queue((patch,)), new_files={patch.file: data})
    return fork, ws, bases


EXPECTED = {"clean": "clean", "offset": "offset", "3-way": "3-way"}  # row -> the path it must take


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def floor(fork: Path, base: str, patch: Path, threeway: bool, repeat: int) -> tuple[list[float], list[float]]:
    """The same build by hand with git plumbing, in a scratch index: the least any tool can do
    (wall seconds and CPU seconds of each run)."""
    index = patch.parent / "floor-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    times, cpus = [], []
    for _ in range(repeat):
        git(fork, "update-ref", "-d", "refs/heads/floor", check=False)
        t0, c0 = time.perf_counter(), cpu_children()
        subprocess.run(["git", "read-tree", base], cwd=fork, env=env, check=True)
        subprocess.run(["git", "apply", "--cached", *(["--3way"] if threeway else []), str(patch)], cwd=fork, env=env,
                       check=True, capture_output=True)
        tree = subprocess.run(["git", "write-tree"], cwd=fork, env=env, check=True, capture_output=True, text=True).stdout.strip()
        commit = subprocess.run(["git", "commit-tree", tree, "-p", base, "-m", "floor"], cwd=fork, env=env, check=True,
                                capture_output=True, text=True).stdout.strip()
        subprocess.run(["git", "update-ref", "refs/heads/floor", commit], cwd=fork, env=env, check=True)
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_children() - c0)
    index.unlink(missing_ok=True)
    return times, cpus


def bench(fork: Path, ws: Workspace, base: str, repeat: int, label: str, counter: GitCounter,
          baseline: Path | None = None) -> dict[str, object]:
    git(fork, "update-ref", "refs/remotes/upstream/main", base)
    config = load_config(ws.tracks_file, fork_override=str(fork))
    assert config.fork.build_from() == "upstream/main", "the rows move upstream/main: the build must start there"
    core, cli, run = [], [], None
    for _ in range(repeat):
        git(fork, "update-ref", "-d", STAGING, check=False)
        t0 = time.perf_counter()
        run = apply_mod.apply(ws, config, GitRepo.open(fork), target="staging")
        core.append(time.perf_counter() - t0)
    env = {**os.environ, "PORTTRACK_WORKSPACE": str(ws.root), "PORTTRACK_FORK": str(fork),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    counted = {**env, **counter.env(env)}
    base_env = None if baseline is None else {**env, "PYTHONPATH": str(baseline)}
    cli_cpu: list[float] = []
    base_cli: list[float] = []
    base_cpu: list[float] = []

    def one(run_env: dict) -> tuple[float, float]:
        git(fork, "update-ref", "-d", STAGING, check=False)
        t0, c0 = time.perf_counter(), cpu_children()
        proc = subprocess.run([sys.executable, "-m", "porttrack", "apply", "--staging", "--json"],
                              env=run_env, capture_output=True, text=True, cwd=ws.root)
        wall, cpu = time.perf_counter() - t0, cpu_children() - c0
        if proc.returncode != 0:
            raise SystemExit(f"apply failed ({proc.returncode}): {proc.stderr}")
        report = json.loads(proc.stdout)
        assert report["outcome"] == "created" and report["new"] == run.new, "builds are reproducible"
        return wall, cpu

    for k in range(repeat + 1):  # the last run counts git processes (the wrapper costs a little)
        counter.reset()
        wall, cpu = one(counted if k == repeat else env)
        if k < repeat:
            cli.append(wall)
            cli_cpu.append(cpu)
            if base_env is not None:  # interleaved: the same load for both
                wall, cpu = one(base_env)
                base_cli.append(wall)
                base_cpu.append(cpu)
    assert run is not None
    hunk_outcomes: dict[str, int] = {}
    for h in run.patches[0].hunks:
        hunk_outcomes[h.outcome] = hunk_outcomes.get(h.outcome, 0) + 1
    want = EXPECTED[label]
    assert run.patches[0].outcome == want and set(hunk_outcomes) <= {want, "clean"} and want in hunk_outcomes, (
        f"row {label!r} must measure the {want} path; it took {run.patches[0].outcome} ({hunk_outcomes})")
    patch_file = ws.root / "patches" / (load_patch_file(ws))
    floors, floor_cpus = floor(fork, base, patch_file, want == "3-way", repeat)
    return {"outcome": run.patches[0].outcome, "hunks": hunk_outcomes, "core": core, "cli": cli, "cli_cpu": cli_cpu,
            "git": counter.summary(), "floor": floors, "floor_cpu": floor_cpus,
            **({"baseline_cli": base_cli, "baseline_cli_cpu": base_cpu} if base_env is not None else {})}


def cpu_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def load_patch_file(ws: Workspace) -> str:
    (patch,) = queue_mod.load(ws).patches
    return patch.file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=20000)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--baseline", type=Path, help="a checkout of other code: its CLI runs interleaved with this one's")
    args = parser.parse_args()
    rows: dict[str, dict] = {}
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="porttrack-apply-bench-") as tmp, isolated_environ(Path(tmp) / "home"):
        fork, ws, bases = setup(Path(tmp), args.commits, args.files)
        print(f"repository: {args.commits} commits, {args.files + PR_FILES} files; queue: 1 patch, "
              f"{PR_FILES} files, {PR_FILES * HUNKS_PER_FILE} hunks; {args.repeat} runs each")
        counter = GitCounter(Path(tmp) / "gitcount")
        print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("seconds: median [min-max]")
        print(f"{'base':<7} {'patch':<7} {'hunks':<24} {'core':<22} {'CLI':<22} {'floor':<22} {'CLI/floor':>9}  git processes (CLI)")
        worst = 0.0
        for label, base in bases.items():
            r = bench(fork, ws, base, args.repeat, label, counter, args.baseline.resolve() if args.baseline else None)
            hunks = ", ".join(f"{n} {o}" for o, n in r["hunks"].items())
            ratio = statistics.median(r["cli"]) / statistics.median(r["floor"])
            cpu_ratio = statistics.median(r["cli_cpu"]) / statistics.median(r["floor_cpu"])
            print(f"{label:<7} {r['outcome']:<7} {hunks:<24} {spread(r['core']):<22} {spread(r['cli']):<22} "
                  f"{spread(r['floor']):<22} {ratio:>8.1f}x  {describe(r['git'])}", flush=True)
            print(f"        CPU: CLI {spread(r['cli_cpu'])}, floor {spread(r['floor_cpu'])}: {cpu_ratio:.1f}x", flush=True)
            if "baseline_cli" in r:
                b_ratio = statistics.median(r["baseline_cli"]) / statistics.median(r["floor"])
                b_cpu = statistics.median(r["baseline_cli_cpu"]) / statistics.median(r["floor_cpu"])
                print(f"        baseline ({args.baseline.name}), interleaved: CLI {spread(r['baseline_cli'])} ({b_ratio:.1f}x), "
                      f"CPU {spread(r['baseline_cli_cpu'])} ({b_cpu:.1f}x)", flush=True)
                r["baseline_ratio_to_floor"], r["baseline_cpu_ratio_to_floor"] = round(b_ratio, 2), round(b_cpu, 2)
            r["cli_cpu_ratio_to_floor"] = round(cpu_ratio, 2)
            if label == "clean":
                worst = statistics.median(r["cli"])
            rows[label] = {**r, "cli_median": statistics.median(r["cli"]), "core_median": statistics.median(r["core"]),
                           "floor_median": statistics.median(r["floor"]), "cli_ratio_to_floor": round(ratio, 2)}
        print("floor: read-tree, apply --cached [--3way], write-tree, commit-tree, update-ref in a scratch index (5 git processes)")
        print(f"target: apply --staging under 2 s -> {'met' if worst < 2 else 'MISSED'} ({worst:.3f} s, CLI median, clean base)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"world": f"generated history ({args.commits} commits, {args.files} files), not vLLM",
                                         "machine": {"cpus": os.cpu_count(), "load_at_start": [round(x, 2) for x in load],
                                                     "load_at_end": [round(x, 2) for x in os.getloadavg()]},
                                         "repeat": args.repeat, "baseline": None if not args.baseline else args.baseline.name,
                                         "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
