"""A gate job for any fork (tracks.yaml profile neutral): time a command, write the results.

    python -m porttrack.jobs.timed --cwd {workdir} [--results PATH] [--metric NAME]
        [--axis NAME=VALUE ...] [--repeat N] [--timeout S] -- PROGRAM ARGS...

Runs PROGRAM (no shell) in `--cwd` (give `{workdir}`: the tree porttrack built for the ref under
test; a gate job itself starts in the workspace) `--repeat`
times and writes one `porttrack/results/v2` cell (`porttrack.results`): its coordinates are the
`--axis` values (a value of digits only is an integer, as YAML reads it in `matrix.axes`), its
metric NAME (default `wall_time`, seconds) the fastest run — the least noisy estimate of what the
code costs. The machine fingerprint (arch, os, python) is what a baseline must share.

PROGRAM runs through the one local job runner (`porttrack.jobs.runner`: no shell, its own process
group, stopped after `--timeout`); its output tail is shown when it fails.

Fails closed: when PROGRAM fails (a failing test suite), nothing is written and this exits with
PROGRAM's exit code, so `gate check` reads the cell as missing, never as a pass. porttrack's
environment (PORTTRACK_TRACK, PORTTRACK_REF, ...; see `porttrack.results`) says what is tested.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path
from typing import Sequence

from porttrack.errors import ConfigError, InputError
from porttrack.jobs.runner import run_job
from porttrack.results import Results, detect_machine

_INTEGER = re.compile(r"^-?[0-9]+$")


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
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.program[:1] == ["--"]:
        args.program = args.program[1:]
    if not args.program:
        parser.error("no program to run (give it after --)")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The runner fills {placeholders}: braces in PROGRAM's own arguments are doubled to stay literal.
    command = shlex.join(arg.replace("{", "{{").replace("}", "}}") for arg in args.program)
    times = []
    for _ in range(args.repeat):
        try:
            ran = run_job(command, {}, cwd=Path(args.cwd), timeout_s=args.timeout, what="timed program")
        except ConfigError as exc:
            print(f"timed: {exc}; nothing written", file=sys.stderr)
            return 127
        if ran.exit_code != 0:
            said = "timed out" if ran.timed_out else f"exited {ran.exit_code}"
            print("\n".join(ran.output_tail), file=sys.stderr)
            print(f"timed: {args.program[0]} {said}; nothing written (the cell stays missing)", file=sys.stderr)
            return ran.exit_code or 124
        times.append(ran.duration_s)
    try:
        results = Results.from_env()
        results.machine(**detect_machine())
        results.add_axes_cell(axes=dict(args.axis), metrics={args.metric: round(min(times), 6)}, duration_s=round(sum(times), 6))
        written = results.write(args.results)
    except InputError as exc:
        print(f"timed: {exc}", file=sys.stderr)
        return 2
    print(f"timed: {args.metric} {min(times):.3f} s (best of {len(times)}); wrote {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
