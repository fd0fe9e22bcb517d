#!/usr/bin/env python3
"""Collisions at scale (issue 32, item 4): a fork queue of --patches patches (one per upstream file,
each rewriting two lines of it) against --open open upstream PRs, with a token, over generated
history: the queue imported against an older base (upstream then moved every file's lines).
Every tenth open PR touches a queued file (half of those the queued lines, half far away); the
rest touch files of their own.

Measured with the real CLI as a subprocess against the GitHub emulator on loopback:
  first   the first `status` ever (no ETags, no collision cache, no open-PR head in the checkout)
  still   the next `status`, nothing moved upstream
  moved   a `status` after --moved open PRs were pushed again
wall time and the peak RSS of porttrack's process (and of the git processes it waited for: the
kernel's wait4 figure is the largest of them), with the git processes each started (from -v).
Goals: first <= 10 s and <= 500 MB; still <= 1.0 s; cost growing with what moved.

    python benchmarks/collision_scale.py [--patches 50] [--open 400] [--moved 10] [--latency 0.0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing import openprs  # noqa: E402
from testing.gitfixtures import git, isolated_git_env  # noqa: E402
from testing.github_emulator import DEFAULT_TOKEN, running_emulator  # noqa: E402
from testing.queueing import queue_mail  # noqa: E402
from testing.text import edit, numbered  # noqa: E402
from testing.workspace import make_workspace, track  # noqa: E402
from testing.world import World  # noqa: E402


def cpu_of_children() -> float:
    """User + system CPU seconds of every finished child so far (and the git processes they waited
    for): on a loaded machine the difference across one run says its work, where wall time also
    says the queue for the CPUs."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, peak RSS in MB (wait4), and the finished process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=600)
    wall = time.perf_counter() - started
    rss = 0.0
    try:
        _pid, _status, usage = os.wait4(proc.pid, os.WNOHANG)
        rss = usage.ru_maxrss / 1024
    except ChildProcessError:  # already reaped by communicate: fall back to the children's figure
        import resource

        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, rss, subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def bytecode_env(env: dict[str, str]) -> dict[str, str]:
    """As an installed porttrack runs: with compiled bytecode (a shell's PYTHONDONTWRITEBYTECODE=1
    made every run compile ~100 modules again, ~0.3 s; the cache goes to a folder of its own)."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "porttrack-bench-pycache")
    return out


def build(tmp: Path, fake, patches: int, open_prs: int):
    w = World(tmp, fake)
    files = {f"s/f{k:03d}.py": numbered(f"f{k}", 200) for k in range(patches)}
    w.upstream.commit(files, "project files")
    git(w.fork, "pull", "-q", "--ff-only", "upstream", "main")
    base = w.upstream.tip()
    tracks = {}
    ws = make_workspace(tmp / "ws", {"t0": track([1000])}, api_url=fake.base_url, fork=w.fork, token=DEFAULT_TOKEN)
    for k in range(patches):
        n = 1000 + k
        path = f"s/f{k:03d}.py"
        head = w.open_pr(n, {path: edit(files[path], {100: f"f{k}_100 = 'queued'", 101: f"f{k}_101 = 'queued'"})}, f"queued {k}")
        mail = git(w.upstream.path, "format-patch", "-1", "--stdout", head).encode() + b"\n"
        queue_mail(ws.root, mail, name=f"{k + 1:04d}-pr{n}-queued-{k}", track=f"t{k}", pr=n, title=f"queued {k}", head=head, base=base)
        tracks[f"t{k}"] = track([n], f"track {k}")
    ws = make_workspace(tmp / "ws", tracks, api_url=fake.base_url, fork=w.fork, token=DEFAULT_TOKEN)
    # upstream moves every queued file's lines: ten lines above everything
    w.upstream.commit({p: numbered("head", 10) + text for p, text in files.items()}, "headers everywhere")
    now = w.upstream.tip()
    moved_files = {p: numbered("head", 10) + text for p, text in files.items()}
    prs = {}
    for i in range(open_prs):
        n = 50000 + i
        if i % 10 == 0:
            k = (i // 10) % patches
            path = f"s/f{k:03d}.py"
            line = 111 if (i // 10) % 2 == 0 else 30  # the queued line 101 is 111 now; or far away
            prs[n] = {path: edit(moved_files[path], {line: f"upstream = {n}"})}
        else:
            prs[n] = {f"o/o{n}.py": f"open {n}\n"}
    openprs.seed(w, prs, now)
    return w, ws, prs, moved_files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patches", type=int, default=50)
    ap.add_argument("--open", type=int, default=400)
    ap.add_argument("--moved", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--still", type=int, default=1, help="runs where nothing moved (their median is shown too)")
    ap.add_argument("--baseline", action="store_true", help="interleave each nothing-moved run with one whose kept coverage "
                    "(.porttrack/coverage/) was removed first: the cost before coverage was kept, in the same run")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON (e.g. benchmarks/results/collision_scale.json)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="porttrack-collide-"))
    saved = dict(os.environ)
    os.environ.update(isolated_git_env(tmp / "home"))
    try:
        with running_emulator() as fake:
            t0 = time.perf_counter()
            w, ws, prs, moved_files = build(tmp, fake, args.patches, args.open)
            print(f"built in {time.perf_counter() - t0:.1f} s: {args.patches} queued patches, {args.open} open PRs, "
                  f"machine: {os.cpu_count()} cpus, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            load_before = os.getloadavg()
            fake.latency_s = args.latency
            env = {**bytecode_env(ws.env()), "GITHUB_TOKEN": DEFAULT_TOKEN, "PORTTRACK_SEARCH_LIMIT": "400"}
            subprocess.run([sys.executable, "-m", "porttrack", "--help"], env=env, cwd=ws.root, capture_output=True)
            cmd = [sys.executable, "-m", "porttrack", "-v", "status", "--json"]
            rows = []
            cpus: dict[str, float] = {}
            labels = ["first", *(["still"] if args.still == 1 else [f"still{i + 1}" for i in range(args.still)]), "moved"]
            if args.baseline:
                labels = ["first", *(x for i in range(args.still) for x in (f"still{i + 1}", f"recompute{i + 1}")), "moved"]
            for label in labels:
                if label.startswith("recompute"):
                    shutil.rmtree(ws.root / ".porttrack" / "coverage", ignore_errors=True)
                if label == "moved":
                    bump = {n: files for n, files in list(prs.items())[: args.moved]}
                    openprs.seed(w, {n: {p: c.replace("open", "moved") if c else c for p, c in f.items()} for n, f in bump.items()},
                                 w.upstream.tip())
                prof = os.environ.get("COLLISION_SCALE_PROFILE")
                cpu0 = cpu_of_children()
                wall, rss, proc = run([sys.executable, "-m", "cProfile", "-o", f"{prof}.{label}", *cmd[1:]] if prof else cmd, env, ws.root)
                if proc.returncode != 0:
                    raise SystemExit(f"status failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
                import json

                found = json.loads(proc.stdout)["findings"]["collisions"]
                if os.environ.get("COLLISION_SCALE_TRACE"):
                    Path(os.environ["COLLISION_SCALE_TRACE"] + f".{label}").write_text(proc.stderr)
                gits = [line for line in proc.stderr.splitlines() if line.startswith("porttrack: git ")]
                kinds: dict[str, int] = {}
                for line in gits:
                    verb = line.split()[2]
                    kinds[verb] = kinds.get(verb, 0) + 1
                cpus[label] = cpu_of_children() - cpu0
                rows.append((label, wall, rss, found["compared_open_prs"], found["open_prs"], found["compared_through_git"],
                             len(found["collisions"]), len(gits), kinds))
            print(f"{'run':>10} {'wall s':>7} {'cpu s':>6} {'peak MB':>8} {'compared':>10} {'by git':>7} {'collisions':>10} {'git procs':>9}  by verb")
            for label, wall, rss, compared, total, by_git, found, procs, kinds in rows:
                print(f"{label:>10} {wall:7.2f} {cpus[label]:6.2f} {rss:8.0f} {f'{compared}/{total}':>10} {by_git:>7} {found:>10} {procs:>9}  "
                      + " ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
            still = sorted(row[1] for row in rows if row[0].startswith("still"))
            still_cpu = sorted(cpus[row[0]] for row in rows if row[0].startswith("still"))
            print(f"etags.json: {(ws.root / '.porttrack' / 'etags.json').stat().st_size / 1e6:.2f} MB")
            print(f"nothing moved: median {still[len(still) // 2]:.2f} s [{still[0]:.2f}..{still[-1]:.2f}] of {len(still)} runs "
                  f"(goal <= 1.0 s), cpu {still_cpu[len(still_cpu) // 2]:.2f} s; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            again = sorted(row[1] for row in rows if row[0].startswith("recompute"))
            again_cpu = sorted(cpus[row[0]] for row in rows if row[0].startswith("recompute"))
            if again:
                print(f"nothing moved, coverage recomputed (before it was kept): median {again[len(again) // 2]:.2f} s "
                      f"[{again[0]:.2f}..{again[-1]:.2f}], cpu {again_cpu[len(again_cpu) // 2]:.2f} s; ratio kept/recomputed: "
                      f"wall {still[len(still) // 2] / again[len(again) // 2]:.2f}, "
                      f"cpu {still_cpu[len(still_cpu) // 2] / again_cpu[len(again_cpu) // 2]:.2f}")
            if args.json:
                import json

                Path(args.json).write_text(json.dumps({
                    "world": "generated (testing/openprs.py), GitHub emulator on loopback", "args": vars(args),
                    "load_before": load_before, "load": os.getloadavg(),
                    "etags_json_bytes": (ws.root / ".porttrack" / "etags.json").stat().st_size, "still_median_s": still[len(still) // 2],
                    "recomputed_median_s": again[len(again) // 2] if again else None,
                    "still_cpu_median_s": still_cpu[len(still_cpu) // 2],
                    "recomputed_cpu_median_s": again_cpu[len(again_cpu) // 2] if again_cpu else None,
                    "rows": [{"run": r[0], "wall_s": round(r[1], 3), "cpu_s": round(cpus[r[0]], 3), "peak_mb": round(r[2]), "compared": r[3], "open": r[4],
                              "through_git": r[5], "collisions": r[6], "git_processes": r[7], "by_verb": r[8]} for r in rows]}, indent=1) + "\n")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if not os.environ.get("COLLISION_SCALE_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept: {tmp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
