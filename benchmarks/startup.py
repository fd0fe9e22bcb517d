#!/usr/bin/env python3
"""Start-up of every porttrack command against the interpreter's own: `porttrack --help`,
`porttrack <command> --help` for each top-level command, and `porttrack status --offline`, each
beside `python -c pass` run by the same interpreter (issue 34: every command's start-up <= 60 ms
above it).

World: no git history. `--help` reads nothing; `status --offline` reads the repository's own
recorded state (tracks.yaml and state/upstream.json at the checkout's root, as `sh setup.sh tool`
shows it; no fork checkout), so its figure is start-up plus reading that state.

The tree's porttrack is byte-compiled first (as pip installs it). Each round runs every case once, the order rotated from round to round (interleaved), so a change
of the machine's load reaches every case alike. Per case: the median wall time, the median CPU time
(user + system of the child, which load inflates less than wall), and the median "above python -c
pass" (case median - baseline median), in ms; and the modules the command imports (total, and
porttrack's own) in sys.modules when it exits, from one more run. The load average is printed at the start and
the end. Results go to benchmarks/results/startup.json (or --json).

    python benchmarks/startup.py [--rounds 21] [--tree DIR] [--json PATH]

--tree DIR runs another checkout's porttrack (PYTHONPATH=DIR ahead of the installed one, DIR as the
workspace), e.g. an export of main (`git archive main | tar -x -C DIR`), to compare before/after
with the same interpreter.
"""

from __future__ import annotations

import argparse
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
GOAL_MS = 60.0
COMMANDS = ["apply", "demote", "doctor", "drop", "eligibility", "evidence", "gate", "import", "init", "promote",
            "queue", "refresh", "report", "status", "verify-converged"]


def cases(script: str) -> dict[str, list[str]]:
    py = sys.executable
    out = {"python -c pass": [py, "-c", "pass"], "porttrack --help": [py, script, "--help"]}
    out.update({f"porttrack {c} --help": [py, script, c, "--help"] for c in COMMANDS})
    out["porttrack status --offline"] = [py, script, "status", "--offline"]
    return out


def run_once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall ms, CPU ms of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return wall, cpu


COUNT_MODULES = ("import atexit, os, sys\n"
                 "def _count():\n"
                 "    own = sum(1 for m in sys.modules if m == 'porttrack' or m.startswith('porttrack.'))\n"
                 "    os.write(2, f'\\nMODULES {len(sys.modules)} {own}\\n'.encode())\n"
                 "atexit.register(_count)\n")


def imported(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, int]:
    """(modules in sys.modules when the command exits, of them porttrack's own). `-X importtime`
    would not do: it misses what `importlib.import_module` loads (the lazy command table's)."""
    proc = subprocess.run([argv[0], "-c", COUNT_MODULES + f"sys.argv = {argv[1:]!r}\n" + f"exec(open({argv[1]!r}).read())",
                           *argv[2:]] if argv[1] != "-c" else [argv[0], "-c", COUNT_MODULES],
                          env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    total, own = proc.stderr.rsplit("MODULES ", 1)[1].split()
    return int(total), int(own)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--tree", type=Path, help="run this checkout's porttrack instead (PYTHONPATH)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    args = parser.parse_args()

    tree = (args.tree or ROOT).resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "PORTTRACK_WORKSPACE",
                                                             "PORTTRACK_FORK", "COLUMNS", "LINES")}
    env.update(PORTTRACK_NO_GH_CLI="1", GITHUB_API_URL="http://127.0.0.1:9", NO_COLOR="1")  # nothing may be asked
    if args.tree:
        env["PYTHONPATH"] = str(tree)
    # the console script pip writes: `from porttrack.cli import main; sys.exit(main())`
    scratch = Path(tempfile.mkdtemp(prefix="porttrack-startup-"))
    script = scratch / "porttrack"
    script.write_text("import sys\nfrom porttrack.cli import main\nsys.exit(main())\n")
    try:
        runs = cases(str(script))
        load_start = os.getloadavg()
        print(f"world: no git history; status --offline reads {tree}'s tracks.yaml and state/upstream.json")
        print(f"python {sys.version.split()[0]} ({sys.executable}); porttrack from {tree}; {args.rounds} rounds, "
              f"interleaved; load average {load_start[0]:.2f} at the start")
        # byte-compiled first, as pip installs it (PYTHONDONTWRITEBYTECODE would otherwise leave a
        # tree compiling every module on every run)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "porttrack")], check=True,
                       stdout=subprocess.DEVNULL)
        for argv in runs.values():  # warm the page cache
            run_once(argv, env, tree)
        wall: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                w, c = run_once(runs[name], env, tree)
                wall[name].append(w)
                cpu[name].append(c)
        modules = {name: imported(argv, env, tree) for name, argv in runs.items()}
    finally:
        shutil.rmtree(scratch)
    load_end = os.getloadavg()

    base_wall = statistics.median(wall["python -c pass"])
    base_cpu = statistics.median(cpu["python -c pass"])
    results = {}
    print(f"\n{'case':<36} {'wall ms':>8} {'above':>7} {'cpu ms':>7} {'above':>7} {'modules':>8} {'own':>4}")
    for name in runs:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        total, own = modules[name]
        results[name] = {"wall_ms": round(w, 1), "wall_above_ms": round(w - base_wall, 1), "cpu_ms": round(c, 1),
                         "cpu_above_ms": round(c - base_cpu, 1), "wall_ms_all": [round(x, 1) for x in wall[name]],
                         "modules": total, "porttrack_modules": own}
        print(f"{name:<36} {w:>8.1f} {w - base_wall:>7.1f} {c:>7.1f} {c - base_cpu:>7.1f} {total:>8} {own:>4}")
    startup = {n: r for n, r in results.items() if n.endswith("--help")}
    worst = max(startup, key=lambda n: startup[n]["wall_above_ms"])
    print(f"\nload average {load_end[0]:.2f} at the end")
    print(f"worst --help: {worst}, {startup[worst]['wall_above_ms']:.1f} ms above python -c pass (goal <= {GOAL_MS:.0f}): "
          f"{'met' if startup[worst]['wall_above_ms'] <= GOAL_MS else 'NOT met'}")
    print(f"status --offline: {results['porttrack status --offline']['wall_above_ms']:.1f} ms above python -c pass "
          f"(start-up plus reading the recorded state)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "world": "no git history; status --offline reads the checkout's own tracks.yaml and state/upstream.json",
        "tree": str(tree), "python": sys.version.split()[0], "rounds": args.rounds,
        "load_average": {"start": load_start[0], "end": load_end[0]}, "goal_ms_above_python": GOAL_MS,
        "results": results}, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
