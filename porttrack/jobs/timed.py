"""A gate job for any fork (tracks.yaml profile neutral): time a command, write the results.

    python -m porttrack.jobs.timed --cwd {workdir} [--results PATH] [--metric NAME]
        [--axis NAME=VALUE ...] [--repeat N] [--timeout S] -- PROGRAM ARGS...

Runs PROGRAM (no shell) in `--cwd` (give `{workdir}`: the tree porttrack built for the ref under
test; a gate job itself starts in the workspace) `--repeat`
times and writes one `porttrack/results/v2` cell (`porttrack.runner.results`): its coordinates are the
`--axis` values (a value of digits only is an integer, as YAML reads it in `matrix.axes`), its
metric NAME (default `wall_time`, seconds) the fastest run — the least noisy estimate of what the
code costs. The machine fingerprint (arch, os, python) is what a baseline must share.

PROGRAM runs through the one local job runner (`porttrack.runner.local`: no shell, its own process
group, stopped after `--timeout`); its output tail is shown when it fails.

The code measured is the worktree's. PROGRAM runs with the worktree's `src/` (a src-layout
project) and the worktree itself first on PYTHONPATH, so `python -m pytest` there imports the
worktree's package, not a copy installed in the environment; and with porttrack's import record
(`porttrack/jobs/importwatch/sitecustomize.py`) also on it, every Python process that loads it
says so at start and records at exit the files each measured package (`--package`, default: the
packages and modules in `src/` (namespace packages too), else the worktree's top-level packages)
and its submodules were imported from. Every process must vouch: the Pythons PROGRAM starts by
name through PATH (`python`, `python3`, `python3.N`, also inside `sh -c`) and PROGRAM itself when
it is a Python run through a start shim that records the process's id, and a started process that
never loaded the record (`python -I`, `-E`, `-S`), or that ended without writing what it imported
(killed, `os._exit`), leaves which copy ran unknown. Such a run, one that imported a package from
outside the worktree, or one where no process recorded importing it, is refused (exit 6, nothing
written): the gate would time code the ref does not have. Where the packages were imported from is
written in the results' job notes; with no package to watch (not a Python project; give
`--package`) the notes say that which code ran was not checked, never that it was the worktree's.
Not seen: a Python started by an absolute path from inside a script PROGRAM runs (only PROGRAM's
own first word is shimmed), or one started with a PATH that drops the shims.

Fails closed: when PROGRAM fails (a failing test suite), nothing is written and this exits with
PROGRAM's exit code, so `gate check` reads the cell as missing, never as a pass. porttrack's
environment (PORTTRACK_TRACK, PORTTRACK_REF, ...; see `porttrack.runner.results`) says what is tested.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from porttrack.common.errors import ConfigError, ExitCode, InputError
from porttrack.runner.local import run_job
from porttrack.runner.results import Results, detect_machine

_INTEGER = re.compile(r"^-?[0-9]+$")
IMPORT_WATCH = Path(__file__).resolve().parent / "importwatch"  # holds porttrack's sitecustomize.py
RECORD_ENV, PACKAGES_ENV = "PORTTRACK_IMPORT_RECORD", "PORTTRACK_IMPORT_PACKAGES"
NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "benchmarks", "examples", "scripts", "build", "dist"}


def _axis(text: str) -> tuple[str, str | int]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, int(value) if _INTEGER.match(value) else value


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m porttrack.jobs.timed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cwd", default=".", help="where PROGRAM runs: {workdir}, the built tree (default: here)")
    parser.add_argument("--results", help="where to write (default: $PORTTRACK_RESULTS)")
    parser.add_argument("--metric", default="wall_time", help="the metric's name in the gate (seconds)")
    parser.add_argument("--axis", action="append", type=_axis, default=[], metavar="NAME=VALUE")
    parser.add_argument("--repeat", type=int, default=1, help="runs; the fastest is reported")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it is stopped")
    parser.add_argument("--package", action="append", default=[], metavar="NAME",
                        help="a package whose import must come from the worktree (default: those in src/, else at the top)")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.program[:1] == ["--"]:
        args.program = args.program[1:]
    if not args.program:
        parser.error("no program to run (give it after --)")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def worktree_packages(tree: Path) -> list[str]:
    """What a src-layout tree keeps in src/: its packages, namespace packages (a folder of Python
    files with no `__init__.py`) and single modules (`src/name.py`); else the tree's own top-level
    packages (with an `__init__.py`: a top-level folder or script is not taken for one)."""
    src = tree / "src"
    base = src if src.is_dir() else tree
    found = set()
    for p in base.iterdir():
        name = p.stem if p.is_file() else p.name
        if p.is_symlink() or name in NOT_PACKAGES or not name.isidentifier():
            continue
        if p.is_dir() and ((p / "__init__.py").is_file() or (base is src and _has_python(p))):
            found.add(name)
        elif base is src and p.is_file() and p.suffix == ".py":
            found.add(name)
    return sorted(found)


def _has_python(folder: Path, depth: int = 3) -> bool:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    return any(e.suffix == ".py" and e.is_file() for e in entries) or (
        depth > 0 and any(e.is_dir() and not e.is_symlink() and _has_python(e, depth - 1) for e in entries))


PYTHON_NAMES = ("python", "python3", *(f"python3.{n}" for n in range(6, 21)))
_SHIM = """#!/bin/sh
# porttrack.jobs.timed: record this Python's start (its pid survives exec), then run the real one.
me=${0##*/}
printf '{"pid": %s, "started": "%s"}\n' "$$" "$me" >> "$PORTTRACK_IMPORT_RECORD"
here=@HERE@
IFS=:
for d in $PATH; do
  [ "$d" = "$here" ] && continue
  [ -n "$d" ] && [ -x "$d/$me" ] && [ ! -d "$d/$me" ] && exec "$d/$me" "$@"
done
echo "porttrack: no $me on PATH after the start shims" >&2
exit 127
"""
_START = """#!/bin/sh
# porttrack.jobs.timed: record the start of the Python named in $1 (its pid survives exec), then run it.
printf '{"pid": %s, "started": "%s"}\n' "$$" "${1##*/}" >> "$PORTTRACK_IMPORT_RECORD"
exec "$@"
"""


def start_shims(folder: Path) -> Path:
    """`python`, `python3`, `python3.N` shims in `folder` (first on PATH) and a `start` wrapper for
    PROGRAM itself: each records the pid of the Python it starts, before exec'ing it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PYTHON_NAMES:
        (folder / name).write_text(_SHIM.replace("@HERE@", shlex.quote(str(folder))))
        (folder / name).chmod(0o755)
    (folder / "start").write_text(_START)
    (folder / "start").chmod(0o755)
    return folder


def is_python(word: str) -> bool:
    return Path(word).name in PYTHON_NAMES or bool(re.fullmatch(r"python3(\.[0-9]+)?[dmt]*(\.exe)?", Path(word).name))


def import_env(tree: Path, packages: Sequence[str], record: Path, shims: Path | None = None) -> dict[str, str]:
    """PYTHONPATH with the import record, the worktree's src/ and the worktree first; PATH with
    the start shims first."""
    first = [str(IMPORT_WATCH)] + ([str(tree / "src")] if (tree / "src").is_dir() else []) + [str(tree)]
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(first + rest), RECORD_ENV: str(record), PACKAGES_ENV: ",".join(packages)}
    if shims is not None:
        env["PATH"] = os.pathsep.join([str(shims)] + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p])
    return env


def _entries(record: Path) -> list[dict]:
    if not record.is_file():
        return []
    entries = []
    for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def imported_from(record: Path) -> dict[str, set[str]]:
    """package -> the files its processes imported it (and its submodules) from."""
    found: dict[str, set[str]] = {}
    for entry in _entries(record):
        for name, where in dict(entry.get("imported") or {}).items():
            for w in [where] if isinstance(where, str) else where if isinstance(where, list) else []:
                if isinstance(w, str):
                    found.setdefault(name, set()).add(w)
    return found


def unvouched(record: Path) -> list[str]:
    """The processes that cannot vouch for what they imported: a Python a shim started that never
    loaded the import record, and one that loaded it but ended without writing its imports."""
    started: dict[int, str] = {}
    hello: set[int] = set()
    ended: set[int] = set()
    for entry in _entries(record):
        pid = entry.get("pid")
        if not isinstance(pid, int):
            continue
        if "started" in entry:
            started.setdefault(pid, str(entry["started"])[:80])
        if entry.get("hello"):
            hello.add(pid)
        if "imported" in entry:
            ended.add(pid)
    said = [f"{name} (pid {pid}) started without porttrack's import record (python -I, -E or -S?)"
            for pid, name in sorted(started.items()) if pid not in hello]
    said += [f"pid {pid} loaded the import record but ended without writing what it imported (killed, or os._exit?)"
             for pid in sorted(hello - ended)]
    return said


def outside(tree: Path, imported: Mapping[str, set[str]]) -> dict[str, list[str]]:
    root = tree.resolve()
    return {name: sorted(w for w in wheres if not Path(w).resolve().is_relative_to(root))
            for name, wheres in imported.items() if any(not Path(w).resolve().is_relative_to(root) for w in wheres)}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The runner fills {placeholders}: braces in PROGRAM's own arguments are doubled to stay literal.
    tree = Path(args.cwd).resolve()
    packages = args.package or (worktree_packages(tree) if tree.is_dir() else [])
    times = []
    imported: dict[str, set[str]] = {}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="porttrack-timed-") as tmp:
            record = Path(tmp) / "imports.jsonl"
            shims = start_shims(Path(tmp) / "bin")
            program = ([str(shims / "start")] if is_python(args.program[0]) else []) + list(args.program)
            command = shlex.join(arg.replace("{", "{{").replace("}", "}}") for arg in program)
            try:
                ran = run_job(command, {}, cwd=Path(args.cwd), timeout_s=args.timeout,
                              env=import_env(tree, packages, record, shims), what="timed program")
            except ConfigError as exc:
                print(f"timed: {exc}; nothing written", file=sys.stderr)
                return 127
            for name, wheres in imported_from(record).items():
                imported.setdefault(name, set()).update(wheres)
            silent = unvouched(record) if packages else []
        if ran.exit_code != 0:
            said = "timed out" if ran.timed_out else f"exited {ran.exit_code}"
            print("\n".join(ran.output_tail), file=sys.stderr)
            print(f"timed: {args.program[0]} {said}; nothing written (the cell stays missing)", file=sys.stderr)
            return ran.exit_code or 124
        times.append(ran.duration_s)
        if silent:
            print(f"timed: refused (process-not-vouched): {'; '.join(silent[:5])}; which copy of "
                  f"{', '.join(packages)} it ran is unknown, so nothing is written", file=sys.stderr)
            return int(ExitCode.PRECONDITION)
        unseen = [name for name in packages if name not in imported]
        if unseen:
            print(f"timed: refused (import-not-recorded): no process of the program recorded importing {', '.join(unseen)} "
                  "(did it drop PYTHONPATH, e.g. `python -I`, or not import it?); which copy ran is unknown, so nothing is "
                  "written (give --package for the packages it does measure)", file=sys.stderr)
            return int(ExitCode.PRECONDITION)
        elsewhere = outside(tree, imported)
        if elsewhere:
            said = "; ".join(f"{name} from {', '.join(wheres)}" for name, wheres in sorted(elsewhere.items()))
            print(f"timed: refused (imported-outside-worktree): the program imported {said}, not the worktree {tree}'s copy; "
                  "nothing written (install the worktree, e.g. `pip install -e .`, or give --package)", file=sys.stderr)
            return int(ExitCode.PRECONDITION)
    where = "; ".join(f"{name} from {', '.join(sorted(str(Path(w).resolve().relative_to(tree)) for w in imported[name])[:20])}"
                      for name in packages)
    notes = (f"measured the worktree's code: {where}" if packages else
             "which code ran was not checked: no Python package or module found in the worktree (give --package NAME)")
    try:
        results = Results.from_env()
        results.machine(**detect_machine())
        results.add_axes_cell(axes=dict(args.axis), metrics={args.metric: round(min(times), 6)}, duration_s=round(sum(times), 6))
        results.job(runner="porttrack.jobs.timed", notes=notes[:2000])
        written = results.write(args.results)
    except InputError as exc:
        print(f"timed: {exc}", file=sys.stderr)
        return 2
    print(f"timed: {args.metric} {min(times):.3f} s (best of {len(times)}); wrote {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
