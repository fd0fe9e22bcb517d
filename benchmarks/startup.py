#!/usr/bin/env python3
"""Start-up of every porttrack command against the interpreter's own: `porttrack --help`,
`porttrack <command> --help` for each top-level command, every command's start-up, and the whole
of `porttrack status --offline`, each beside `python -c pass` run by the same interpreter (issue 34:
every command's start-up <= 60 ms above it).

A command's start-up is what runs before its body: the interpreter, the imports, parsing the
command line, up to the moment click calls the command's function (leaf command; for a group,
its subcommand's), where the run ends (`os._exit`, from a wrapper around `click.Command.invoke`
in the timed script, the only change to what runs). Each command is given a command line that
parses (`STARTUP_ARGV`); nothing of the command itself runs, so no workspace is read. What the body
imports later (function-local imports) is not start-up: the `status --offline` whole-run case shows
it, with the work.

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


# a command line that parses, per command (leaf): its start-up is timed up to its body
STARTUP_ARGV = {
    "apply": ["apply", "--staging", "--dry-run"], "demote": ["demote", "1234", "--reason", "slower"],
    "doctor": ["doctor"], "drop": ["drop", "1234", "--reason", "merged", "--dry-run"], "eligibility": ["eligibility"],
    "evidence list": ["evidence", "list", "1234"], "evidence supersede": ["evidence", "supersede", "abc", "--reason", "wrong"],
    "gate check": ["gate", "check", "1234"], "gate ingest": ["gate", "ingest", "1234", "--target", "t", "--results", "r.json"],
    "gate run": ["gate", "run", "1234"], "import": ["import", "1234", "--dry-run"],
    "init": ["init", "work", "--upstream", "o/n", "--fork", "y/n"], "promote": ["promote", "1234", "--dry-run"],
    "queue": ["queue"], "refresh": ["refresh", "1234"], "report weekly": ["report", "weekly", "--dry-run"],
    "status": ["status", "--offline"], "verify-converged": ["verify-converged", "1234", "--dry-run"],
}
# the timed script for start-up: the console script, ended where click would call the command's body
STARTUP_SCRIPT = """import os, sys
import click

_invoke = click.Command.invoke


def _at_the_body(self, ctx):
    if isinstance(self, click.Group):
        return _invoke(self, ctx)
    if os.environ.get("STARTUP_COUNT_MODULES"):
        own = sum(1 for m in sys.modules if m == "porttrack" or m.startswith("porttrack."))
        os.write(2, f"\\nMODULES {len(sys.modules)} {own}\\n".encode())
    os._exit(0)  # the command's body would begin here


click.Command.invoke = _at_the_body
from porttrack.cli import main
sys.exit(main())
"""


def deferred_imports(module_path: str, tree: Path) -> list[str]:
    """The modules a command module imports inside its functions (its core, loaded when a command
    body runs): what its start-up would also load if it imported them at the top (STYLE.md 17)."""
    import ast

    source = tree / (module_path.replace(".", "/") + ".py")
    found: list[str] = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found += [alias.name for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                    found.append(inner.module)
                    for alias in inner.names:  # `from porttrack.converge import verify`: a module, too
                        name = f"{inner.module}.{alias.name}"
                        where = tree / name.replace(".", "/")
                        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
                            found.append(name)
    return sorted(set(found))


def cases(script: str, startup_script: str, tree: Path | None = None) -> dict[str, list[str]]:
    py = sys.executable
    out = {"python -c pass": [py, "-c", "pass"], "porttrack --help": [py, script, "--help"]}
    out.update({f"porttrack {c} --help": [py, script, c, "--help"] for c in COMMANDS})
    out.update({f"start-up: {name}": [py, startup_script, *argv] for name, argv in STARTUP_ARGV.items()})
    out["porttrack status --offline"] = [py, script, "status", "--offline"]
    if tree is not None:  # what start-up would be with every command module's core imported at its top
        from porttrack.cli import COMMANDS as TABLE

        for module in sorted({info.module_path for info in TABLE.values()}):
            code = "import porttrack.cli, " + ", ".join([module, *deferred_imports(module, tree)])
            out[f"core at the top: {module.rsplit('.', 1)[1]}"] = [py, "-c", code]
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
    if argv[1] != "-c" and "STARTUP_COUNT_MODULES" in Path(argv[1]).read_text():  # ends at the body: it counts there
        proc = subprocess.run(argv, env={**env, "STARTUP_COUNT_MODULES": "1"}, cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=120)
        total, own = proc.stderr.rsplit("MODULES ", 1)[1].split()
        return int(total), int(own)
    proc = subprocess.run([argv[0], "-c", COUNT_MODULES + f"sys.argv = {argv[1:]!r}\n" + f"exec(open({argv[1]!r}).read())",
                           *argv[2:]] if argv[1] != "-c" else [argv[0], "-c", COUNT_MODULES + argv[2]],
                          env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    total, own = proc.stderr.rsplit("MODULES ", 1)[1].split()
    return int(total), int(own)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--tree", type=Path, help="run this checkout's porttrack instead (PYTHONPATH)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    parser.add_argument("--core-at-top", action="store_true", help="also time each command module with the modules its "
                                                                    "functions import loaded up front (this tree's table)")
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
    startup_script = scratch / "porttrack-startup"
    startup_script.write_text(STARTUP_SCRIPT)
    try:
        runs = cases(str(script), str(startup_script), tree if args.core_at_top else None)
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
    print(f"\nload average {load_end[0]:.2f} at the end")
    for kind, picked in (("--help", lambda n: n.endswith("--help")), ("start-up", lambda n: n.startswith("start-up: "))):
        group = {n: r for n, r in results.items() if picked(n)}
        worst = max(group, key=lambda n: group[n]["wall_above_ms"])
        print(f"worst {kind}: {worst}, {group[worst]['wall_above_ms']:.1f} ms above python -c pass (goal <= {GOAL_MS:.0f}): "
              f"{'met' if group[worst]['wall_above_ms'] <= GOAL_MS else 'NOT met'}")
    print(f"status --offline: {results['porttrack status --offline']['wall_above_ms']:.1f} ms above python -c pass "
          f"(start-up plus reading the recorded state)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "world": "no git history; status --offline reads the checkout's own tracks.yaml and state/upstream.json",
        "start_up": "process start to the moment click calls the command's function (leaf), the run ended there",
        "tree": "this checkout" if tree == ROOT else "another checkout (--tree)", "python": sys.version.split()[0], "rounds": args.rounds,
        "load_average": {"start": load_start[0], "end": load_end[0]}, "goal_ms_above_python": GOAL_MS,
        "results": results}, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
