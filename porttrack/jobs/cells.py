"""A gate job that measures each cell of the gate's matrix, cold and warm, with the probe inside.

    python -m porttrack.jobs.cells --model M --contexts 1024,8192 --batches 1,8 \\
        [--phases cold,warm] [--backend M=BACKEND] [--timeout S] -- PROGRAM ARGS...

For every model × context × batch it runs PROGRAM twice, each as a fresh process:

- **cold**: fresh, empty cache folders for Triton, Inductor and vLLM (`TRITON_CACHE_DIR`,
  `TORCHINDUCTOR_CACHE_DIR`, `VLLM_CACHE_ROOT`), as `vllm bench startup` isolates them;
- **warm**: the same folders again, now filled by the cold run.

`{model}`, `{context}`, `{batch}`, `{phase}` and `{output}` in PROGRAM's arguments are replaced
(each argument separately, no shell). Each run has `PORTTRACK_PROBE` set to its own event log, so
`porttrack.probe` (loaded by the program, or by vLLM as a plugin) records compiles and graph
replays from inside; the program writes `{output}`:

    {"metrics": {"ttft_ms": 812.0, ...},
     "numerics": {"reference_backend": "TRITON_MLA", "max_abs_err": 0.002, "max_rel_err": 0.01, "samples": 4096},
     "backend_used": {"attention": {"MLAAttention": ["FLASHMLA_SPARSE"]}}}   # optional

`backend_used` is what the program says it ran, from inside (vLLM's engine record, see
`porttrack.probe.engine_record`); `--backend M=BACKEND` is what each cell of M claims. Both are
kept in the cell; `gate check` shows them and refuses a claim the record does not show.

The job writes one `porttrack/results/v1` file (`porttrack.runner.results`) with the environment
fingerprint. It refuses to write a cell it did not measure: a run that failed, wrote no output,
or whose probe could not count compiles after warmup or graph replays is left out and named on
stderr, so `gate check` reads that cell as missing (fail closed), never as a pass. When no cell
was measured it writes nothing and exits 1.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from porttrack.probe import events
from porttrack.probe.summary import Summary, summarize
from porttrack.runner import local as runner
from porttrack.runner.results import Results, detect_environment

CACHE_VARIABLES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT")
PHASES = ("cold", "warm")


@dataclass(frozen=True)
class Cell:
    model: str
    context: int
    batch: int


@dataclass(frozen=True)
class Measured:
    cell: Cell
    phase: str
    fields: dict[str, Any] | None  # the results cell's fields, None when not measured
    why_not: str = ""
    seconds: float = 0.0


def cells(models: Sequence[str], contexts: Sequence[int], batches: Sequence[int]) -> list[Cell]:
    return [Cell(m, c, b) for m in models for c in contexts for b in batches]


def cache_env(root: Path) -> dict[str, str]:
    """The cache folders of one cell: the same for its cold and warm runs, and no other cell's."""
    env = {}
    for name in CACHE_VARIABLES:
        folder = root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    return env


def measure_cell(cell: Cell, program: Sequence[str], phases: Sequence[str], work: Path, timeout_s: float) -> list[Measured]:
    """Cold, then warm, in one cell's own cache folders. A warm phase always follows a cold run
    (made even when only warm is asked for), so "warm" means caches filled by this build."""
    caches = cache_env(work / "caches")
    out: list[Measured] = []
    for phase in PHASES:
        if phase not in phases and not (phase == "cold" and "warm" in phases):
            continue
        log, output = work / f"{phase}.probe.jsonl", work / f"{phase}.json"
        values = {"model": cell.model, "context": str(cell.context), "batch": str(cell.batch), "phase": phase, "output": str(output)}
        # The one job runner's rule (porttrack.runner.local): placeholders filled per argument, no shell.
        finished = runner.run_job(shlex.join(program), values, cwd=work, timeout_s=timeout_s,
                                  env={**caches, events.ENV: str(log)}, log=work / f"{phase}.log", what="program under test")
        measured = _read(cell, phase, finished, log, output)
        if phase in phases:
            out.append(measured)
    return out


def _read(cell: Cell, phase: str, finished: runner.JobRun, log: Path, output: Path) -> Measured:
    seconds = finished.duration_s
    if finished.exit_code != 0:
        why = "timed out" if finished.timed_out else f"exited {finished.exit_code}"
        tail = " | ".join(finished.output_tail[-3:])
        return Measured(cell, phase, None, f"the program {why}: {tail}", seconds)
    try:
        data = json.loads(output.read_text(encoding="utf-8"))
        metrics, numerics = dict(data["metrics"]), dict(data["numerics"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Measured(cell, phase, None, f"no readable {output.name} ({type(exc).__name__}: {exc})", seconds)
    if not log.is_file():
        return Measured(cell, phase, None, "the probe wrote no event log (is porttrack.probe loaded by the program?)", seconds)
    summary = summarize(events.read(log))
    fields, why = probe_fields(summary)
    if fields is None:
        return Measured(cell, phase, None, why, seconds)
    fields = {"metrics": metrics, "numerics": numerics, **fields, "duration_s": seconds}
    if isinstance(data.get("backend_used"), dict):  # what the engine ran, as the program recorded it
        fields["backend_used"] = data["backend_used"]
    if summary.jit_after_warmup:
        offenders = ", ".join(f"{o.kernel} [{o.key}] ({o.kind})" for o in summary.jit_after_warmup[:5])
        print(f"cells: {cell.model} {cell.context}x{cell.batch} {phase}: compiled after warmup: {offenders}", file=sys.stderr)
    return Measured(cell, phase, fields, "", seconds)


def probe_fields(summary: Summary) -> tuple[dict[str, Any] | None, str]:
    """The probe's figures for a results cell, or None and why the cell is not measured: a damaged
    log (a line that does not parse, a value out of range, a missing exit snapshot), any problem
    the summary names, or a figure it could not measure. Never a pass from a log it cannot trust."""
    eager = None
    if summary.graphed_regions_not_replayed is not None and summary.eager_triton_launches_in_graphed_regions is not None:
        eager = summary.graphed_regions_not_replayed + summary.eager_triton_launches_in_graphed_regions
    figures = {"graph_replays": summary.graph_replays, "jit_compiles_after_warmup": summary.jit_compiles_after_warmup,
               "graphed_regions_eager": eager}
    missing = [name for name, value in figures.items() if value is None]
    if summary.problems or missing:
        what = f"the probe could not measure {', '.join(missing)}" if missing else "the probe's log has problems"
        return None, f"{what}: {'; '.join(summary.problems) or 'no events'}"[:2000]
    return figures, ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("cells: give the program after --", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="porttrack.jobs.cells", description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True)
    parser.add_argument("--contexts", required=True, type=_ints)
    parser.add_argument("--batches", required=True, type=_ints)
    parser.add_argument("--phases", default="cold,warm", type=lambda v: [p for p in v.split(",") if p])
    parser.add_argument("--backend", action="append", default=[], metavar="MODEL=BACKEND",
                        help="the backend each cell of MODEL claims (recorded as the cell's `backend`)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run of the program")
    parser.add_argument("--results", help="where to write [PORTTRACK_RESULTS]")
    args = parser.parse_args(argv[:split])
    program = argv[split + 1:]
    if not program or set(args.phases) - set(PHASES):
        parser.error("a program after --, and phases among cold,warm")
    backends = dict(b.split("=", 1) for b in args.backend if "=" in b)
    results = Results.from_env()
    results.environment(**detect_environment())
    refused: list[str] = []
    with tempfile.TemporaryDirectory(prefix="porttrack-cells-") as tmp:
        for index, cell in enumerate(cells(args.model, args.contexts, args.batches)):
            work = Path(tmp) / f"cell-{index}"
            work.mkdir()
            for measured in measure_cell(cell, program, args.phases, work, args.timeout):
                if measured.fields is None:
                    refused.append(f"{cell.model} {cell.context}x{cell.batch} {measured.phase}: {measured.why_not}")
                    print(f"cells: not writing {refused[-1]}", file=sys.stderr)
                    continue
                results.add_cell(model=cell.model, context=cell.context, batch=cell.batch, phase=measured.phase,
                                 backend=backends.get(cell.model), **measured.fields)
    if not results.document["cells"]:
        print("cells: no cell was measured; no results written (porttrack records nothing: cannot evaluate)", file=sys.stderr)
        return 1
    notes = f"not measured, so not written: {'; '.join(refused)}"[:2000] if refused else "every cell measured"
    results.job(runner="porttrack.jobs.cells", notes=notes)
    path = results.write(args.results)
    print(f"cells: wrote {path} ({len(results.document['cells'])} cells, {len(refused)} not measured)", file=sys.stderr)
    return 0


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


if __name__ == "__main__":
    sys.exit(main())
