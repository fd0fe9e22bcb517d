"""The vLLM gate job: vLLM's own benchmark per matrix cell, cold and warm, with the probe inside.

    python -m porttrack.jobs.vllm --gate TRACK --target {target} --results {results} --ref {ref}

For the gate (a track, or a proof) it reads from the workspace's tracks.yaml which cells are
required on this target (the eligible models × contexts × batches, the phases), each model's
attention backend there, and the named reference backend. Flags override each of them, so the
job can run where no workspace is (`--models --contexts --batches --phases --reference-backend
--backend MODEL=BACKEND`).

Each cell is measured by `porttrack.jobs.cells` (cold: fresh, empty vLLM, Triton and Inductor
cache folders; warm: the same folders, filled by the cold run; `PORTTRACK_PROBE` set, so vLLM
loads `porttrack.probe` as a `vllm.general_plugins` plugin in the engine and every worker). The
program it runs per cell and phase is this module's `cell` step, which

1. runs `vllm bench latency --model PATH --input-len CONTEXT --batch-size BATCH --output-len N
   --num-iters K --num-iters-warmup 0 --output-json FILE --attention-backend BACKEND` (the model's
   backend, asked for the way the installed vLLM reads it: see "The backend" below), and records
   from it and from the probe's log:
   - `first_request_latency` (ms): the first batch after start-up (no warmup iteration runs
     before it, on purpose);
   - `startup_time` (s): from launching vLLM to its last worker's "warmup-done" mark (the probe's
     plugin marks it when `Worker.compile_or_warm_up_model` returns); without a mark, the run's
     wall time less its measured batches, an upper bound;
   - `median_latency`, `avg_latency` (ms, whole batches after the first), `request_throughput`
     (req/s), `decode_throughput` (tok/s) and `median_itl` (ms per output token) derived from them:
     batch latencies include the prefill, so the last two are per-token averages of a whole
     batch, compared like for like against the baseline measured the same way;
   - the probe's compile counts: `compiles_before_warmup`, `compile_seconds_before_warmup`,
     `cache_entries_written` (compiles the cold caches had to make) and `served_from_cache`;
2. numerics: runs this module's `logprobs` step twice, through vLLM's `LLM` with greedy sampling on
   the same fixed prompts, once with the model's backend and once with the gate's reference
   backend, and compares the logprob of each generated token (up to the first token where the two
   greedy outputs differ) → `max_abs_err`, `max_rel_err`, `samples`. The gate's tolerance judges
   them (`porttrack gate check`).

The backend. Before measuring, the job asks the installed vLLM (in this Python, as the numerics
runs import it) for its version and the interface it offers: the engine argument
`attention_backend` (`--attention-backend`, `LLM(attention_backend=...)`: vLLM since the
AttentionConfig), else the environment variable `VLLM_ATTENTION_BACKEND` (older vLLM; removed
upstream 2026-01-21, #32812), and its `AttentionBackendEnum`. A model whose backend cannot be
asked for that way (no interface, or a name the enum lacks) is refused: its cells are not
measured, the reason said as kind and detail, never run on whatever vLLM would pick. Then
every run records, from inside its own processes (`porttrack.probe.engine_record`, through the
probe's vLLM plugin), the backend the engine selected per attention layer kind and vLLM's
version. A cell is refused when its run did not record it, or recorded a backend other than the
one claimed; the numerics are refused when the reference run did not run the reference backend,
or when both runs ran the same backends while the gate's reference is another one (a backend
compared with itself). The cell keeps the record (`backend_used`, `numerics.backends_used`).

Model weights: tracks.yaml names models (GLM-5.2); what vLLM loads is the machine's business:
`--model-path NAME=PATH`, or `PORTTRACK_VLLM_MODELS` (a JSON object, name → path or hub id) set
on the machine; otherwise the name itself is passed. The vLLM measured is the `vllm` on PATH
(`--vllm`); its version is recorded in the environment fingerprint's `extra` beside the fork
commit and the patch set porttrack passes in. A cell whose run failed, or whose probe could not
count compiles after warmup or graph replays, is not written (named on stderr); with no cell
measured at all, no results file is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from porttrack.common.errors import ConfigError, InputError, PorttrackError
from porttrack.jobs import cells as cells_mod
from porttrack.probe import WARMUP_DONE, engine_record, events
from porttrack.probe.summary import summarize
from porttrack.runner import local as runner
from porttrack.runner.results import ENV_VARS, Results, detect_environment

MODELS_ENV = "PORTTRACK_VLLM_MODELS"
BACKEND_ENV = "VLLM_ATTENTION_BACKEND"  # the interface of vLLM before #32812 (2026-01-21)
BY_ARGUMENT = "engine-argument"
BY_ENVIRONMENT = "environment-variable"
PROMPT_SEED = 20260  # the numerics prompts: the same token ids for candidate and reference


@dataclass(frozen=True)
class Plan:
    """What to measure on this target."""

    models: tuple[str, ...]
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    phases: tuple[str, ...]
    reference_backend: str
    backends: Mapping[str, str]  # model -> the attention backend under test on this target
    arch: str | None = None  # the target's arch in tracks.yaml, when read from the workspace


@dataclass(frozen=True)
class Bench:
    """How each cell is run."""

    vllm: str = "vllm"
    output_len: int = 128
    num_iters: int = 5
    numerics_tokens: int = 16
    numerics_prompts: int = 4
    engine_args: tuple[str, ...] = ()
    timeout_s: float = 1800.0
    paths: Mapping[str, str] = field(default_factory=dict)  # model -> what vLLM loads
    ask_by: str = BY_ARGUMENT  # how the installed vLLM is asked for a backend


@dataclass(frozen=True)
class Interface:
    """What the installed vLLM offers for choosing the attention backend (`interface` step)."""

    version: str
    engine_argument: bool  # EngineArgs has `attention_backend`
    environment_variable: bool  # vllm.envs still reads VLLM_ATTENTION_BACKEND
    backends: tuple[str, ...] | None  # AttentionBackendEnum's members; None when it has none


@dataclass(frozen=True)
class Refusal:
    """Why a cell is not measured: a kind to act on and the detail to read."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


# -- the job: plan, then one `cell` program per cell through porttrack.jobs.cells ---------------

def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    steps = {"cell": cell_main, "logprobs": logprobs_main, "interface": interface_main}
    if argv and argv[0] in steps:
        return steps[argv[0]](argv[1:])
    try:
        return job_main(argv)
    except PorttrackError as exc:
        print(f"porttrack.jobs.vllm: {exc}", file=sys.stderr)
        return int(exc.exit_code)


def job_main(argv: list[str]) -> int:
    args = _job_parser().parse_args(argv)
    env = dict(os.environ)
    for key, value in (("target", args.target), ("ref_under_test", args.ref), ("results", args.results)):
        if value:
            env[ENV_VARS[key]] = value
    results = Results.from_env(env)
    gate = args.gate or results.document["track"]
    if gate != results.document["track"]:
        raise ConfigError(f"asked for the gate of {gate}, but porttrack is running the gate of {results.document['track']}")
    target = results.document["target"]
    plan = make_plan(args, gate, target)
    bench = Bench(vllm=args.vllm, output_len=args.output_len, num_iters=args.num_iters, numerics_tokens=args.numerics_tokens,
                  numerics_prompts=args.numerics_prompts, engine_args=tuple(shlex.split(args.engine_args or "")),
                  timeout_s=args.timeout, paths=model_paths(args.model_path, env))
    started = time.monotonic()
    version = vllm_version(bench.vllm)
    offered = same_vllm(bench.vllm, version, vllm_interface(vllm_python(bench.vllm)))
    refusals = {m: how_to_ask(offered, plan.backends[m]) for m in plan.models}
    ways = {r for r in refusals.values() if not isinstance(r, Refusal)}
    bench = dataclasses.replace(bench, ask_by=ways.pop() if ways else BY_ARGUMENT)
    results.environment(**fingerprint(plan), extra={"vllm": version, "reference_backend": plan.reference_backend,
                                                    "backends": " ".join(f"{m}={b}" for m, b in sorted(plan.backends.items()))})
    refused = measure(results, plan, bench, {m: r for m, r in refusals.items() if isinstance(r, Refusal)})
    said = "; ".join(f"{m}: {r}" for m, r in refusals.items() if isinstance(r, Refusal))
    results.job(runner="porttrack.jobs.vllm", duration_s=round(time.monotonic() - started, 3),
                notes=(f"vllm {version} (backend by {bench.ask_by}); {len(results.document['cells'])} cells written, "
                       f"{refused} not measured" + (f"; refused {said}" if said else ""))[:2000])
    if not results.document["cells"]:
        print("porttrack.jobs.vllm: no cell was measured; no results written", file=sys.stderr)
        return 3
    path = results.write(env.get(ENV_VARS["results"]))
    print(f"porttrack.jobs.vllm: wrote {path} ({len(results.document['cells'])} cells, {refused} not measured)", file=sys.stderr)
    return 0


def _job_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="porttrack.jobs.vllm", description=__doc__.splitlines()[0])
    parser.add_argument("--gate", help="the track (or proof) whose gate to run [PORTTRACK_TRACK]")
    parser.add_argument("--target", help="target id [PORTTRACK_TARGET]")
    parser.add_argument("--ref", help="commit under test [PORTTRACK_REF]")
    parser.add_argument("--results", help="where to write [PORTTRACK_RESULTS]")
    parser.add_argument("--workdir", help="work tree of the ref under test (recorded only: the `vllm` on PATH is measured)")
    parser.add_argument("--workspace", type=Path, default=Path("."), help="the tracking workspace holding tracks.yaml [.]")
    parser.add_argument("--models", type=_names)
    parser.add_argument("--contexts", type=cells_mod._ints)
    parser.add_argument("--batches", type=cells_mod._ints)
    parser.add_argument("--phases", type=_phases)
    parser.add_argument("--reference-backend")
    parser.add_argument("--backend", action="append", default=[], metavar="MODEL=BACKEND")
    parser.add_argument("--model-path", action="append", default=[], metavar="MODEL=PATH")
    parser.add_argument("--vllm", default="vllm", help="the vLLM command to measure [vllm]")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--num-iters", type=int, default=5, help="batches measured after the first [5]")
    parser.add_argument("--numerics-tokens", type=int, default=16)
    parser.add_argument("--numerics-prompts", type=int, default=4)
    parser.add_argument("--engine-args", help="more `vllm bench latency` engine arguments, one string")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per vLLM run")
    return parser


def make_plan(args: argparse.Namespace, gate: str, target: str) -> Plan:
    """The workspace's plan for `gate` on `target`, with any flag given taking its place."""
    explicit = [args.models, args.contexts, args.batches, args.reference_backend]
    tracks_file = args.workspace / "tracks.yaml"
    if all(v is not None for v in explicit) and not tracks_file.is_file():
        base = Plan(tuple(args.models), tuple(args.contexts), tuple(args.batches), ("cold", "warm"), args.reference_backend, {})
    else:
        if not tracks_file.is_file():
            raise ConfigError(f"no tracks.yaml in {args.workspace.resolve()}: give --workspace, or --models --contexts --batches --reference-backend")
        base = plan_from_workspace(args.workspace, gate, target)
    backends = dict(base.backends)
    backends.update(_pairs(args.backend, "--backend"))
    plan = Plan(tuple(args.models or base.models), tuple(args.contexts or base.contexts), tuple(args.batches or base.batches),
                tuple(args.phases or base.phases), args.reference_backend or base.reference_backend, backends, base.arch)
    unset = [m for m in plan.models if not plan.backends.get(m)]
    if unset:
        raise ConfigError(f"no attention backend on {target} for {', '.join(unset)}: add it to the model's backends, or pass --backend MODEL=BACKEND")
    return plan


def plan_from_workspace(root: Path, gate: str, target: str) -> Plan:
    """The cells `gate check` will require on `target` (eligibility decides a track's models)."""
    from porttrack.prove import gates
    from porttrack.tracks.file import load_config
    from porttrack.workspace.files import Workspace

    ws = Workspace(root.resolve())
    config = load_config(ws.tracks_file)
    if gate in config.proofs:
        subject = gates.proof_subject(config, gate)
    elif gate in config.tracks:
        subject = gates.GateSubject("patch", gate, gate, config.tracks[gate].gate)
    else:
        raise ConfigError(f"no track or proof {gate!r} in {ws.tracks_file}")
    if subject.gate is None:
        raise ConfigError(f"{gate} has no gate in {ws.tracks_file}")
    required = gates.required(config, subject, gates.proofs_passed(ws, config))
    if target not in required.targets:
        raise ConfigError(f"target {target} is not one of the gate's targets ({', '.join(required.targets)})")
    backends = {m: config.models[m].backends[target] for m in required.models if m in config.models and target in config.models[m].backends}
    arch = config.targets[target].arch if target in config.targets else None
    reference = subject.gate.reference_backend
    if reference is None:  # a measurement-only gate may omit it; this job measures numerics against it
        raise ConfigError(f"{gate} names no reference_backend, which porttrack.jobs.vllm measures numerics against")
    return Plan(required.models, required.contexts, required.batches, required.phases, reference, backends, arch)


def model_paths(pairs: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    paths: dict[str, str] = {}
    if env.get(MODELS_ENV):
        try:
            paths.update({str(k): str(v) for k, v in dict(json.loads(env[MODELS_ENV])).items()})
        except (ValueError, TypeError):
            raise ConfigError(f"{MODELS_ENV} is not a JSON object of model name -> path") from None
    paths.update(_pairs(pairs, "--model-path"))
    return paths


def fingerprint(plan: Plan) -> dict[str, Any]:
    """The machine as torch reports it. torch says `sm_121` for a GB10 whose target is `sm_121a`
    (the arch-specific feature set of the same device): the target's own name is recorded then."""
    found = detect_environment()
    if plan.arch and found["arch"].startswith("sm_") and plan.arch.startswith(found["arch"]):
        found["arch"] = plan.arch
    return found


def vllm_version(vllm: str) -> str:
    with tempfile.TemporaryDirectory(prefix="porttrack-vllm-") as tmp:
        run = runner.run_job("{vllm} --version", {"vllm": vllm}, cwd=Path(tmp), timeout_s=300, what="vllm --version")
    lines = [line.strip() for line in run.output_tail if line.strip()]
    if run.exit_code != 0 or not lines:
        raise ConfigError(f"`{vllm} --version` {'timed out' if run.timed_out else f'exited {run.exit_code}'}: is vLLM installed here?")
    return lines[-1][:200]


def vllm_python(vllm: str) -> str:
    """The Python the `--vllm` command runs: its script's `#!` interpreter (`#!/usr/bin/env python3`
    is looked up on PATH), else this Python. The interface is asked there, not of whatever vLLM the
    Python porttrack runs in can import."""
    words = shlex.split(vllm)
    found = shutil.which(words[0]) if words else None
    try:
        first = Path(found).read_bytes()[:512].split(b"\n", 1)[0].decode("utf-8", "replace") if found else ""
    except OSError:
        first = ""
    if first.startswith("#!") and "python" in first:
        parts = first[2:].split()
        if parts and Path(parts[0]).name == "env" and len(parts) > 1:
            return shutil.which(parts[1]) or sys.executable
        if parts:
            return parts[0]
    return sys.executable


def same_vllm(command: str, version: str, offered: Interface) -> Interface:
    """The interface, when the vLLM asked is the one `command` runs (its `--version`); else refused."""
    if offered.version not in version:
        raise ConfigError(f"`{command} --version` says {version}, but the vLLM asked for its interface (in "
                          f"{vllm_python(command)}) is {offered.version}: which vLLM runs is unclear, so nothing is measured")
    return offered


def vllm_interface(python: str | None = None) -> Interface:
    """Ask the vLLM that `python` imports (the `interface` step; porttrack on its path) what it offers."""
    python = python or sys.executable
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join([package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    with tempfile.TemporaryDirectory(prefix="porttrack-vllm-") as tmp:
        out = Path(tmp) / "interface.json"
        run = runner.run_job("{python} -m porttrack.jobs.vllm interface --output {out}", {"python": python, "out": str(out)},
                             cwd=Path(tmp), timeout_s=600, env={events.ENV: "", engine_record.ENV: "", "PYTHONPATH": path},
                             what="vllm interface")
        if run.exit_code != 0 or not out.is_file():
            raise ConfigError(f"cannot import vllm in {python} to ask which attention backends it offers: {' | '.join(run.output_tail[-3:])}")
        data = json.loads(out.read_text(encoding="utf-8"))
    backends = data.get("backends")
    return Interface(str(data["version"]), bool(data["engine_argument"]), bool(data["environment_variable"]),
                     None if backends is None else tuple(backends))


def how_to_ask(offered: Interface, backend: str) -> "str | Refusal":
    """How to ask this vLLM for `backend` (BY_ARGUMENT or BY_ENVIRONMENT), or why it cannot be."""
    if offered.backends is not None and backend not in offered.backends:
        return Refusal("unknown-backend", f"{backend} is not an attention backend of vLLM {offered.version} "
                                          f"(its AttentionBackendEnum has {', '.join(offered.backends)})")
    if offered.engine_argument:
        return BY_ARGUMENT
    if offered.environment_variable:
        return BY_ENVIRONMENT
    return Refusal("no-backend-interface", f"vLLM {offered.version} has neither the engine argument attention_backend nor "
                                           f"the environment variable {BACKEND_ENV}: the backend cannot be chosen, so it is not measured")


def interface_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="porttrack.jobs.vllm interface")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    import vllm  # type: ignore[import-not-found]
    from vllm import envs  # type: ignore[import-not-found]
    from vllm.engine.arg_utils import EngineArgs  # type: ignore[import-not-found]

    try:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum  # type: ignore[import-not-found]
        backends: list[str] | None = list(AttentionBackendEnum.__members__)
    except ImportError:
        backends = None
    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    Path(args.output).write_text(json.dumps({
        "version": str(vllm.__version__), "engine_argument": "attention_backend" in fields,
        "environment_variable": BACKEND_ENV in getattr(envs, "environment_variables", {}), "backends": backends}), encoding="utf-8")
    return 0


def measure(results: Results, plan: Plan, bench: Bench, refusals: Mapping[str, Refusal] | None = None) -> int:
    """Every cell through porttrack.jobs.cells; returns how many phases were not measured. A model
    in `refusals` is not run: each of its phases is named with the reason."""
    refused = 0
    with tempfile.TemporaryDirectory(prefix="porttrack-vllm-") as tmp:
        for index, cell in enumerate(cells_mod.cells(plan.models, plan.contexts, plan.batches)):
            if cell.model in (refusals or {}):
                refused += len(plan.phases)
                print(f"porttrack.jobs.vllm: not measuring {cell.model} ctx={cell.context} batch={cell.batch}: refused ({refusals[cell.model]})", file=sys.stderr)  # type: ignore[index]
                continue
            work = Path(tmp) / f"cell-{index}"
            work.mkdir()
            program = cell_program(cell, plan, bench)
            for measured in cells_mod.measure_cell(cell, program, plan.phases, work, bench.timeout_s * 4):
                if measured.fields is None:
                    refused += 1
                    print(f"porttrack.jobs.vllm: not writing {cell.model} ctx={cell.context} batch={cell.batch} {measured.phase}: {measured.why_not}", file=sys.stderr)
                    continue
                results.add_cell(model=cell.model, context=cell.context, batch=cell.batch, phase=measured.phase,
                                 backend=plan.backends[cell.model], **measured.fields)
    return refused


def cell_program(cell: cells_mod.Cell, plan: Plan, bench: Bench) -> list[str]:
    """The per-cell program line; jobs.cells fills {context} {batch} {phase} {output}."""
    literal = [sys.executable, "-m", "porttrack.jobs.vllm", "cell", "--model", bench.paths.get(cell.model, cell.model),
               "--backend", plan.backends[cell.model], "--reference-backend", plan.reference_backend,
               "--vllm", bench.vllm, "--output-len", str(bench.output_len), "--num-iters", str(bench.num_iters),
               "--numerics-tokens", str(bench.numerics_tokens), "--numerics-prompts", str(bench.numerics_prompts),
               "--timeout", str(bench.timeout_s), "--engine-args", shlex.join(bench.engine_args), "--ask-by", bench.ask_by]
    placed = ["--context", "{context}", "--batch", "{batch}", "--phase", "{phase}", "--output", "{output}"]
    return [_literal(part) for part in literal] + placed


# -- the `cell` step: one model × context × batch in one phase --------------------------------

def cell_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="porttrack.jobs.vllm cell")
    for name in ("--model", "--backend", "--reference-backend", "--output", "--phase"):
        parser.add_argument(name, required=True)
    for name in ("--context", "--batch"):
        parser.add_argument(name, required=True, type=int)
    parser.add_argument("--vllm", default="vllm")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--num-iters", type=int, default=5)
    parser.add_argument("--numerics-tokens", type=int, default=16)
    parser.add_argument("--numerics-prompts", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--engine-args", default="")
    parser.add_argument("--ask-by", choices=(BY_ARGUMENT, BY_ENVIRONMENT), default=BY_ARGUMENT)
    args = parser.parse_args(argv)
    work = Path(args.output).parent
    try:
        metrics, used = bench_latency(args, work)
        numerics = compare_numerics(args, work)
    except InputError as exc:
        print(f"porttrack.jobs.vllm cell: {exc}", file=sys.stderr)
        return 3
    Path(args.output).write_text(json.dumps({"metrics": metrics, "numerics": numerics, "backend_used": used}), encoding="utf-8")
    return 0


BENCH_COMMAND = ("{vllm} bench latency --model {model} --input-len {context} --batch-size {batch} --output-len {output_len} "
                 "--num-iters {iters} --num-iters-warmup 0 --output-json {json}")
BENCH_JSON_FIELDS = ("latencies",)  # what the job reads from `--output-json`


def asking(ask_by: str, backend: str) -> tuple[str, dict[str, str]]:
    """The argument text and environment that ask vLLM for `backend`."""
    if ask_by == BY_ENVIRONMENT:
        return "", {BACKEND_ENV: backend}
    return " --attention-backend {backend}", {}


def bench_latency(args: argparse.Namespace, work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    output = work / f"{args.phase}.latency.json"
    record = work / f"{args.phase}.latency.engine.jsonl"
    ask, ask_env = asking(args.ask_by, args.backend)
    command = BENCH_COMMAND + ask + " " + _literal(args.engine_args)
    values = {"vllm": args.vllm, "model": args.model, "context": str(args.context), "batch": str(args.batch),
              "output_len": str(args.output_len), "iters": str(args.num_iters + 1), "json": str(output), "backend": args.backend}
    launched = time.time()
    run = runner.run_job(command, values, cwd=work, timeout_s=args.timeout, env={**ask_env, engine_record.ENV: str(record)},
                         log=work / f"{args.phase}.latency.log", what="vllm bench latency")
    if run.exit_code != 0:
        raise InputError(f"vllm bench latency {'timed out' if run.timed_out else f'exited {run.exit_code}'}: {' | '.join(run.output_tail[-3:])}")
    try:
        latencies = [float(x) for x in json.loads(output.read_text(encoding="utf-8"))["latencies"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"vllm bench latency wrote no readable {output.name} ({type(exc).__name__}: {exc})") from None
    if len(latencies) < 2 or not all(math.isfinite(x) and x > 0 for x in latencies):
        raise InputError(f"vllm bench latency reported {len(latencies)} latencies; expected {args.num_iters + 1} positive ones")
    used = ran_backend(record, args.backend, "vllm bench latency")
    return latency_metrics(latencies, args.batch, args.output_len) | startup_metrics(launched, run.duration_s, latencies), used


def ran_backend(record: Path, claimed: str, what: str) -> dict[str, Any]:
    """What the engine of one run selected, from its own record; refused (InputError) when it did
    not record it or selected another backend than `claimed`."""
    entries = engine_record.read(record)
    errors = [str(e["error"]) for e in entries if e.get("error")]
    if not entries or errors:
        why = f"could not read its engine ({errors[0]})" if errors else "recorded nothing (is porttrack's vLLM plugin loaded, PORTTRACK_VLLM_RECORD passed on?)"
        raise InputError(f"refused (backend-not-recorded): {what} {why}: the backend it ran is unknown")
    attention = engine_record.merged(entries)
    versions = sorted({str(e.get("vllm")) for e in entries})
    if claimed not in engine_record.backends_in(attention):
        raise InputError(f"refused (backend-mismatch): {what} asked for {claimed}, but vLLM {', '.join(versions)} ran "
                         + ", ".join(f"{kind} on {'+'.join(names)}" for kind, names in attention.items()))
    classes = engine_record.merged_classes(entries)
    return {"attention": attention, "vllm": ", ".join(versions), **({"attention_classes": classes} if classes else {})}


def latency_metrics(latencies: Sequence[float], batch: int, output_len: int) -> dict[str, float]:
    """The first batch (the first request after start-up) apart; the rest as steady state."""
    steady = latencies[1:]
    median = statistics.median(steady)
    return {
        "first_request_latency": round(latencies[0] * 1000, 3),
        "median_latency": round(median * 1000, 3),
        "avg_latency": round(statistics.fmean(steady) * 1000, 3),
        "request_throughput": round(batch / median, 4),
        "decode_throughput": round(batch * output_len / median, 3),
        "median_itl": round(median * 1000 / output_len, 4),
    }


def startup_metrics(launched: float, wall_s: float, latencies: Sequence[float]) -> dict[str, float]:
    """Start-up and the compile counts, from the probe's log of this run (PORTTRACK_PROBE)."""
    log = os.environ.get(events.ENV)
    evts = list(events.read(log)) if log and Path(log).is_file() else []
    marks = [e["t"] for e in evts if e["kind"] == "mark" and e.get("name") == WARMUP_DONE]
    startup = max(marks) - launched if marks else wall_s - sum(latencies)
    out = {"startup_time": round(max(startup, 0.0), 3)}
    if evts:
        summary = summarize(evts)
        out.update(compiles_before_warmup=summary.compiles_before_warmup,
                   compile_seconds_before_warmup=summary.compile_seconds_before_warmup)
        if summary.cache_entries_written is not None:
            out.update(cache_entries_written=summary.cache_entries_written, served_from_cache=summary.served_from_cache)
    return out


def compare_numerics(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    candidate = _logprobs(args, work, args.backend, "candidate")
    reference = _logprobs(args, work, args.reference_backend, "reference")
    used = {role: ran_backend(work / f"{args.phase}.logprobs.{role}.engine.jsonl", backend, f"the {role} numerics run")["attention"]
            for role, backend in (("candidate", args.backend), ("reference", args.reference_backend))}
    if used["candidate"] == used["reference"] and args.backend != args.reference_backend:
        raise InputError(f"refused (same-backend): both numerics runs ran {used['candidate']}, but the gate's reference is "
                         f"{args.reference_backend} and the cell's backend {args.backend}: a backend compared with itself")
    return numerics_errors(candidate, reference, args.reference_backend) | {"backends_used": used}


def numerics_errors(candidate: Mapping[str, Any], reference: Mapping[str, Any], reference_backend: str) -> dict[str, Any]:
    """Logprobs of the greedy tokens, position by position, while both outputs agree so far."""
    abs_err = rel_err = 0.0
    samples = 0
    for c_tok, c_lp, r_tok, r_lp in zip(candidate["token_ids"], candidate["logprobs"], reference["token_ids"], reference["logprobs"]):
        for ct, cl, rt, rl in zip(c_tok, c_lp, r_tok, r_lp):
            diff = abs(float(cl) - float(rl))
            abs_err = max(abs_err, diff)
            if rl != 0:
                rel_err = max(rel_err, diff / abs(float(rl)))
            samples += 1
            if ct != rt:  # past here the two continue different texts: nothing comparable
                break
    if samples == 0:
        raise InputError("the numerics runs generated no tokens to compare")
    return {"reference_backend": reference_backend, "max_abs_err": round(abs_err, 9), "max_rel_err": round(rel_err, 9), "samples": samples}


def _logprobs(args: argparse.Namespace, work: Path, backend: str, role: str) -> dict[str, Any]:
    out = work / f"{args.phase}.logprobs.{role}.json"
    ask, ask_env = asking(args.ask_by, backend)
    command = ("{python} -m porttrack.jobs.vllm logprobs --model {model} --context {context} --prompts {prompts} "
               "--tokens {tokens} --output {out}" + ask)
    values = {"python": sys.executable, "model": args.model, "context": str(min(args.context, 512)),
              "prompts": str(args.numerics_prompts), "tokens": str(args.numerics_tokens), "out": str(out), "backend": backend}
    record = work / f"{args.phase}.logprobs.{role}.engine.jsonl"
    # no probe here: these runs are not what the gate's compile and graph checks are about; the
    # engine's own record of its backend is
    run = runner.run_job(command, values, cwd=work, timeout_s=args.timeout, env={**ask_env, events.ENV: "", engine_record.ENV: str(record)},
                         log=work / f"{args.phase}.logprobs.{role}.log", what=f"numerics run ({role})")
    if run.exit_code != 0:
        raise InputError(f"the {role} numerics run ({backend}) {'timed out' if run.timed_out else f'exited {run.exit_code}'}: {' | '.join(run.output_tail[-3:])}")
    try:
        return json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"the {role} numerics run wrote no readable {out.name} ({exc})") from None


# -- the `logprobs` step: greedy outputs through vLLM's LLM, in its own process ----------------

def logprobs_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="porttrack.jobs.vllm logprobs")
    parser.add_argument("--model", required=True)
    parser.add_argument("--output", required=True)
    for name in ("--context", "--prompts", "--tokens"):
        parser.add_argument(name, required=True, type=int)
    parser.add_argument("--attention-backend", help="LLM(attention_backend=...); left out when asked by the environment")
    args = parser.parse_args(argv)
    from vllm import LLM, SamplingParams  # type: ignore[import-not-found]  # only on the GPU machine

    asked = {} if args.attention_backend is None else {"attention_backend": args.attention_backend}
    llm = LLM(model=args.model, seed=0, **asked)
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, logprobs=1)
    prompts = [{"prompt_token_ids": ids} for ids in prompt_ids(args.prompts, args.context)]
    token_ids, logprobs = [], []
    for output in llm.generate(prompts, params, use_tqdm=False):
        completion = output.outputs[0]
        ids = list(completion.token_ids)
        token_ids.append(ids)
        logprobs.append([float(step[tok].logprob) for tok, step in zip(ids, completion.logprobs)])
    Path(args.output).write_text(json.dumps({"token_ids": token_ids, "logprobs": logprobs}), encoding="utf-8")
    return 0


def prompt_ids(count: int, length: int) -> list[list[int]]:
    """Fixed pseudo-random token ids (a linear congruential sequence: no numpy needed)."""
    state, prompts = PROMPT_SEED, []
    for _ in range(count):
        ids = []
        for _ in range(max(1, length)):
            state = (state * 1103515245 + 12345) % (1 << 31)
            ids.append(100 + state % 10000)
        prompts.append(ids)
    return prompts


# -- small parsers ------------------------------------------------------------------------------

def _literal(text: str) -> str:
    """`text` as a runner argument that holds no placeholder (a path or JSON may hold braces)."""
    return text.replace("{", "{{").replace("}", "}}")


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, what = value.partition("=")
        if not sep or not name or not what:
            raise ConfigError(f"{flag} {value!r}: expected NAME=VALUE")
        out[name] = what
    return out


def _names(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    if not names:
        raise argparse.ArgumentTypeError("expected names separated by commas")
    return names


def _phases(text: str) -> list[str]:
    phases = [p for p in text.split(",") if p]
    if not phases or set(phases) - set(cells_mod.PHASES):
        raise argparse.ArgumentTypeError(f"expected phases among {','.join(cells_mod.PHASES)}, got {text!r}")
    return phases


if __name__ == "__main__":
    sys.exit(main())
