"""The probe on a real GPU: five properties, each shown by a separate process under test.

    python3 proofs/probe_gpu.py [--out proofs/results/probe_gpu.json]

Needs a CUDA GPU with torch and Triton (the borrowed H200; CI has none: this script is the GPU
proof, and its committed result in proofs/results/ is the record). Each scenario runs
`probe_gpu.py --scenario NAME` as its own process with PORTTRACK_PROBE set, then summarises the
event log with `porttrack.probe.summary`:

1. warm-all: warmup covers every shape → jit_compiles_after_warmup == 0
2. new-shape: a dtype first seen after warmup → caught, with the kernel and key named
3. graph: a captured decode step replayed N times → N replays counted; the same step run eagerly
   inside the graphed region → its Triton launches caught, kernels named, the region counted as not
   replayed (every CUDA kernel: not measured, None)
4. cold/warm: two processes sharing a fresh TRITON_CACHE_DIR → cold compiles and writes cache
   entries (its compile time reported), warm compiles are served from the cache (no writes)
5. numerics: every shape against the torch float32 reference within tolerance; a planted 10 %
   error in the attention kernel is caught

Prints one line per property (PASS/FAIL with figures) and writes the JSON with the machine's
fingerprint. Exits 1 if any property fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

WARM_SHAPES = [(1, 256), (4, 256), (4, 1024)]  # (batch, context); 8 heads of 128
HEADS, DIM = 8, 128
TOLERANCE = {"abs": 4e-3, "rel": 5e-3}  # passes when either holds (porttrack's gate rule)


# -- the processes under test ---------------------------------------------------------------------

def scenario(name: str, out: Path) -> None:
    from porttrack import probe

    probe.install()
    import probe_gpu_kernels as k
    import torch

    report: dict = {}
    steps = {}
    first = time.perf_counter()
    for batch, context in WARM_SHAPES:
        steps[(batch, context)] = k.DecodeStep(batch, HEADS, context, DIM, torch.float16)
        steps[(batch, context)].eager()
    torch.cuda.synchronize()
    report["warmup_s"] = round(time.perf_counter() - first, 4)
    if name == "graph":
        step = steps[(4, 1024)]
        with probe.graphed_region("decode"):
            step.capture()
    probe.mark(probe.WARMUP_DONE)

    if name in ("warm-all", "cold", "warm"):
        for _ in range(10):
            for step in steps.values():
                step.eager()
    elif name == "new-shape":
        k.DecodeStep(4, HEADS, 256, DIM, torch.bfloat16).eager()  # bf16: a specialization warmup never saw
    elif name == "graph":
        step = steps[(4, 1024)]
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(50):
            with probe.graphed_region("decode"):
                step.replay()
        torch.cuda.synchronize()
        report["replay_step_us"] = round((time.perf_counter() - began) / 50 * 1e6, 2)
        with probe.graphed_region("decode"):  # the fallback: the same step, launched eagerly
            step.eager()
    elif name == "numerics":
        report["cells"] = []
        for bug in (False, True):
            for (batch, context), step in steps.items():
                step.bug = bug
                got = step.eager().float()
                ref = step.reference()
                err = (got - ref).abs()
                nonzero = ref != 0
                report["cells"].append({
                    "batch": batch, "context": context, "planted_bug": bug, "samples": int(ref.numel()),
                    "max_abs_err": float(err.max()), "max_rel_err": float((err[nonzero] / ref[nonzero].abs()).max()),
                })
            if not bug:  # the planted kernel is another specialization: a compile after warmup, expected here
                probe.mark("planted-bug")
    torch.cuda.synchronize()
    out.write_text(json.dumps(report))


# -- the orchestrator -------------------------------------------------------------------------------

def run_scenario(name: str, work: Path, cache: Path) -> tuple[dict, object]:
    from porttrack.probe import events
    from porttrack.probe.summary import summarize

    log, out = work / f"{name}.jsonl", work / f"{name}.json"
    env = {**os.environ, events.ENV: str(log), "TRITON_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__)), "--scenario", name, "--scenario-out", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"scenario {name} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    report = json.loads(out.read_text())
    report["process_wall_s"] = round(wall, 3)
    return report, summarize(events.read(log))


def fingerprint() -> dict:
    from porttrack.runner.results import detect_environment

    env = detect_environment()
    env["host_cpu_count"] = os.cpu_count()
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario")
    parser.add_argument("--scenario-out", type=Path)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "probe_gpu.json")
    args = parser.parse_args()
    if args.scenario:
        scenario(args.scenario, args.scenario_out)
        return 0

    work = Path(tempfile.mkdtemp(prefix="probe-gpu-"))
    props: dict[str, dict] = {}

    def show(name: str, passed: bool, figures: dict) -> None:
        props[name] = {"passed": bool(passed), **figures}
        print(f"{'PASS' if passed else 'FAIL'}  {name}: {json.dumps(figures, sort_keys=True, default=str)}", flush=True)

    rep, s = run_scenario("warm-all", work, work / "cache-warm-all")
    show("1 warmup covers every shape: no JIT after warmup", s.jit_compiles_after_warmup == 0,
         {"jit_compiles_after_warmup": s.jit_compiles_after_warmup, "compiles_before_warmup": s.compiles_before_warmup,
          "instruments": s.instruments, "problems": list(s.problems)})

    rep, s = run_scenario("new-shape", work, work / "cache-new-shape")
    named = [{"kernel": o.kernel, "key": o.key} for o in s.jit_after_warmup]
    show("2 a shape first seen after warmup is caught and named",
         bool(s.jit_compiles_after_warmup) and any(o["kernel"] == "decode_attention_kernel" for o in named),
         {"jit_compiles_after_warmup": s.jit_compiles_after_warmup, "offenders": named})

    rep, s = run_scenario("graph", work, work / "cache-graph")
    show("3 graph replays counted; an eager fallback is caught",
         s.graph_replays == 50 and s.graph_captures == 1 and (s.eager_triton_launches_in_graphed_regions or 0) >= 2
         and {"gather_rows_kernel", "decode_attention_kernel"} <= set(s.eager_kernels)
         and s.graphed_regions_not_replayed == 1 and s.eager_launches_in_graphed_regions is None,
         {"graph_captures": s.graph_captures, "graph_replays": s.graph_replays,
          "eager_launches_in_graphed_regions": s.eager_launches_in_graphed_regions, "eager_kernels": list(s.eager_kernels),
          "eager_triton_launches_in_graphed_regions": s.eager_triton_launches_in_graphed_regions,
          "graphed_regions_not_replayed": s.graphed_regions_not_replayed,
          "replay_step_us": rep.get("replay_step_us"), "jit_compiles_after_warmup": s.jit_compiles_after_warmup})

    shared = work / "cache-cold-warm"
    cold_rep, cold = run_scenario("cold", work, shared)
    warm_rep, warm = run_scenario("warm", work, shared)
    show("4 cold vs warm with isolated caches",
         cold.compiles_before_warmup > 0 and (cold.cache_entries_written or 0) > 0
         and warm.cache_entries_written == 0 and warm.served_from_cache == warm.compiles_before_warmup,
         {"cold": {"compiles": cold.compiles_before_warmup, "compile_seconds": cold.compile_seconds_before_warmup,
                   "cache_entries_written": cold.cache_entries_written, "warmup_s": cold_rep["warmup_s"],
                   "process_wall_s": cold_rep["process_wall_s"]},
          "warm": {"compiles": warm.compiles_before_warmup, "compile_seconds": warm.compile_seconds_before_warmup,
                   "cache_entries_written": warm.cache_entries_written, "served_from_cache": warm.served_from_cache,
                   "warmup_s": warm_rep["warmup_s"], "process_wall_s": warm_rep["process_wall_s"]}})

    rep, s = run_scenario("numerics", work, work / "cache-numerics")
    good = [c for c in rep["cells"] if not c["planted_bug"]]
    bad = [c for c in rep["cells"] if c["planted_bug"]]

    def within(c: dict) -> bool:
        return c["max_abs_err"] <= TOLERANCE["abs"] or c["max_rel_err"] <= TOLERANCE["rel"]

    show("5 numerics within tolerance of the torch reference; a planted error is caught",
         all(within(c) for c in good) and not any(within(c) for c in bad),
         {"tolerance": TOLERANCE, "reference_backend": "torch float32", "cells": rep["cells"]})

    passed = all(p["passed"] for p in props.values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"schema": "porttrack/probe-gpu/v1", "passed": passed,
                                    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "machine": fingerprint(), "properties": props}, indent=2, sort_keys=True) + "\n")
    print(f"{'all five properties hold' if passed else 'a property FAILED'}; wrote {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
