"""The probe fails closed and stays out of the way, on a real GPU (issue 22, item 5).

    python3 proofs/probe_gpu_failclosed.py [--out proofs/results/probe_gpu_failclosed.json]

Needs a CUDA GPU with torch and Triton (the borrowed H200; CI runs the same cases on stand-ins in
tests/probe/test_instruments.py). Each case is its own process under test with PORTTRACK_PROBE set, summarised
with `porttrack.probe.summary`:

- autotune: an autotuned kernel called with a key warmup never saw → counted after warmup, named;
- torch-logs / set-logs: a torch.compile recompile after warmup with TORCH_LOGS set, or with
  `torch._logging.set_logs(...)` called by the program → counted from dynamo's counters;
- inductor: inductor's generated Triton kernels compiled after warmup → named;
- replaced-hook: another library replaces Triton's post-compile hook → "not measured" (None);
- torch-eager-region: a graphed region that ran torch ops eagerly → every-kernel count None, the
  region counted as not replayed;
- two-threads: two threads in graphed regions at once → no exception, exact counts, hook restored.

Then the overhead table: probe off and on, alternating processes, medians: `CUDAGraph.replay()`
bare and inside `graphed_region`, a launch-bound loop of Triton launches (autotuned gather + plain
kernel) and of torch ops, and the log's growth per minute of steady state. Writes the JSON with the
machine's fingerprint; exits 1 if a case or an overhead goal fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

GOAL_PCT = 5.0
LOG_GOAL_BYTES_PER_MIN = 1 << 20


# -- the processes under test ---------------------------------------------------------------------

def case(name: str, out: Path) -> None:
    from porttrack import probe

    probe.install()
    import torch

    report: dict = {}
    if name in ("torch-logs", "set-logs", "inductor"):
        import torch._dynamo

        if name == "set-logs":
            torch._logging.set_logs(graph_breaks=True)  # the program's own logging, set after the probe's

        @torch.compile(dynamic=False)
        def mlp(x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x * 2.0 + 1.0).sum(dim=-1)

        mlp(torch.randn(8, 64, device="cuda"))
        torch.cuda.synchronize()
        probe.mark(probe.WARMUP_DONE)
        began = time.perf_counter()
        mlp(torch.randn(16, 96, device="cuda"))  # a shape warmup never saw: dynamo recompiles, inductor compiles
        torch.cuda.synchronize()
        report["recompile_s"] = round(time.perf_counter() - began, 4)
        report["dynamo_counters"] = {k: dict(v) for k, v in torch._dynamo.utils.counters.items()
                                     if k in ("frames", "stats", "recompiles")}
        out.write_text(json.dumps(report))
        return

    import probe_gpu_kernels as k
    import triton

    table = torch.randn((4096, 128), device="cuda", dtype=torch.float16)
    idx = torch.randint(0, 4096, (32,), device="cuda", dtype=torch.int32)
    step = k.DecodeStep(4, 8, 256, 128, torch.float16)
    step.eager()
    k.gather_rows(table, idx)
    torch.cuda.synchronize()
    if name == "autotune":
        probe.mark(probe.WARMUP_DONE)
        began = time.perf_counter()
        k.gather_rows(table, idx)
        torch.cuda.synchronize()
        report["warm_call_ms"] = round((time.perf_counter() - began) * 1e3, 3)
        wide = torch.randn((4096, 192), device="cuda", dtype=torch.float16)  # D=192: a key warmup never saw
        began = time.perf_counter()
        k.gather_rows(wide, idx)
        torch.cuda.synchronize()
        report["new_key_call_ms"] = round((time.perf_counter() - began) * 1e3, 3)
    elif name == "replaced-hook":
        triton.knobs.runtime.jit_post_compile_hook = lambda **kw: None  # as tritonparse / NVSHMEM: not chained
        probe.mark(probe.WARMUP_DONE)
        k.DecodeStep(4, 8, 256, 128, torch.bfloat16).eager()  # a compile the probe can no longer see
    elif name == "torch-eager-region":
        w = torch.randn((256, 256), device="cuda")
        x = torch.randn((64, 256), device="cuda")

        def torch_step() -> torch.Tensor:
            return torch.relu(x @ w).add_(1.0).sum()

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with probe.graphed_region("step"):
            with torch.cuda.graph(graph):
                torch_step()
        probe.mark(probe.WARMUP_DONE)
        for _ in range(5):
            with probe.graphed_region("step"):
                graph.replay()
        with probe.graphed_region("step"):  # the fallback: torch ops launched one by one, no Triton
            torch_step()
    elif name == "two-threads":
        probe.mark(probe.WARMUP_DONE)
        knob_before = triton.knobs.runtime.launch_enter_hook
        barrier, errors = threading.Barrier(2), []

        def worker() -> None:
            out = torch.empty_like(step.q)
            try:
                for _ in range(200):
                    with probe.graphed_region("decode"):
                        barrier.wait()
                        k.decode_attention(step.q, step.k, step.v, out)
                        barrier.wait()
            except Exception as exc:  # what the old probe raised: RecursionError
                errors.append(repr(exc)[:300])

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        torch.cuda.synchronize()
        report["errors"] = errors
        report["launch_knob_as_before"] = triton.knobs.runtime.launch_enter_hook is knob_before
        report["launch_knob"] = type(knob_before).__name__
    torch.cuda.synchronize()
    out.write_text(json.dumps(report))


def overhead(out: Path, steady_s: float) -> None:
    """One process's timings (probe on or off, by PORTTRACK_PROBE): medians of 7 repetitions."""
    from porttrack import probe

    probe.install()
    import probe_gpu_kernels as k
    import torch

    step = k.DecodeStep(1, 8, 256, 128, torch.float16)
    with probe.graphed_region("decode"):
        step.capture()
    table = torch.randn((4096, 128), device="cuda", dtype=torch.float16)
    idx = torch.randint(0, 4096, (8,), device="cuda", dtype=torch.int32)
    a = torch.zeros((64,), device="cuda")
    k.gather_rows(table, idx)
    torch.cuda.synchronize()
    probe.mark(probe.WARMUP_DONE)

    def timed(body, n: int) -> float:
        samples = []
        for _ in range(7):
            torch.cuda.synchronize()
            began = time.perf_counter()
            body(n)
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - began) / n * 1e6)
        return statistics.median(samples)

    def replay(n: int) -> None:
        for _ in range(n):
            step.graph.replay()

    def replay_region(n: int) -> None:
        for _ in range(n):
            with probe.graphed_region("decode"):
                step.graph.replay()

    def triton_launches(n: int) -> None:
        for _ in range(n):
            k.gather_rows(table, idx)
            k.decode_attention(step.q, step.k, step.v, step.out)

    def torch_launches(n: int) -> None:
        for _ in range(n):
            a.add_(1.0)

    report = {"replay_us": timed(replay, 5000), "replay_in_region_us": timed(replay_region, 5000),
              "triton_launch_pair_us": timed(triton_launches, 2000), "torch_op_us": timed(torch_launches, 5000)}
    log = os.environ.get("PORTTRACK_PROBE")
    before = os.path.getsize(log) if log else 0
    began = time.perf_counter()
    while time.perf_counter() - began < steady_s:  # steady state: a decode server replaying its graph
        replay_region(200)
        triton_launches(20)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - began
    report["steady_s"] = round(elapsed, 2)
    report["log_bytes_per_min"] = round(((os.path.getsize(log) if log else 0) - before) / elapsed * 60, 1)
    out.write_text(json.dumps(report))


# -- the orchestrator -------------------------------------------------------------------------------

def run(args: list[str], work: Path, tag: str, probe_on: bool, extra_env: dict | None = None) -> tuple[dict, object, Path]:
    from porttrack.probe import events
    from porttrack.probe.summary import summarize

    log, out = work / f"{tag}.jsonl", work / f"{tag}.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(work / f"cache-{tag}"), "TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor-{tag}"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]), **(extra_env or {})}
    env.pop(events.ENV, None)
    env.pop("TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK", None)
    if probe_on:
        env[events.ENV] = str(log)
    proc = subprocess.run([sys.executable, str(Path(__file__)), *args, "--child-out", str(out)],
                          env=env, capture_output=True, text=True, timeout=400)
    if proc.returncode != 0:
        raise SystemExit(f"{tag} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(out.read_text()), (summarize(events.read(log)) if probe_on else None), log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case")
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--steady-s", type=float, default=20.0)
    parser.add_argument("--child-out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "probe_gpu_failclosed.json")
    args = parser.parse_args()
    if args.case:
        case(args.case, args.child_out)
        return 0
    if args.overhead:
        overhead(args.child_out, args.steady_s)
        return 0

    work = Path(tempfile.mkdtemp(prefix="probe-failclosed-"))
    cases: dict[str, dict] = {}

    def show(name: str, passed: bool, figures: dict) -> None:
        cases[name] = {"passed": bool(passed), **figures}
        print(f"{'PASS' if passed else 'FAIL'}  {name}: {json.dumps(figures, sort_keys=True, default=str)}", flush=True)

    def offenders(s) -> list[dict]:
        return [{"kernel": o.kernel, "key": o.key[:160], "kind": o.kind} for o in s.jit_after_warmup]

    rep, s, _ = run(["--case", "autotune"], work, "autotune", True)
    show("autotune: a new key after warmup is counted and named", s.jit_compiles_after_warmup is not None
         and any(o.kind == "triton-autotune" and o.kernel == "gather_rows_kernel" for o in s.jit_after_warmup),
         {"jit_compiles_after_warmup": s.jit_compiles_after_warmup, "offenders": offenders(s), **rep})

    for name, extra in (("torch-logs", {"TORCH_LOGS": "graph_breaks"}), ("set-logs", {}), ("inductor", {})):
        rep, s, _ = run(["--case", name], work, name, True, extra)
        dyn = [o for o in s.jit_after_warmup if o.kind == "dynamo"]
        kernels = [o for o in s.jit_after_warmup if o.kind == "triton" and o.kernel.startswith("triton_")]
        ok = bool(s.jit_compiles_after_warmup) and bool(dyn) and (name != "inductor" or bool(kernels))
        show(f"{name}: a recompile after warmup is counted", ok,
             {"jit_compiles_after_warmup": s.jit_compiles_after_warmup, "dynamo_offenders": len(dyn),
              "inductor_kernels_after_warmup": sorted({o.kernel for o in kernels}), "offenders": offenders(s)[:8],
              "instruments": s.instruments, **rep})

    rep, s, _ = run(["--case", "replaced-hook"], work, "replaced-hook", True)
    show("replaced-hook: not measured", s.jit_compiles_after_warmup is None,
         {"jit_compiles_after_warmup": s.jit_compiles_after_warmup, "problems": list(s.problems)})

    rep, s, _ = run(["--case", "torch-eager-region"], work, "torch-eager-region", True)
    show("torch-eager-region: every-kernel count not measured, the region seen as not replayed",
         s.eager_launches_in_graphed_regions is None and s.graphed_regions_not_replayed == 1 and s.graph_replays == 5,
         {"eager_launches_in_graphed_regions": s.eager_launches_in_graphed_regions,
          "eager_triton_launches_in_graphed_regions": s.eager_triton_launches_in_graphed_regions,
          "graphed_region_entries": s.graphed_region_entries, "graphed_regions_not_replayed": s.graphed_regions_not_replayed,
          "graph_replays": s.graph_replays})

    rep, s, _ = run(["--case", "two-threads"], work, "two-threads", True)
    show("two-threads: no error, exact counts, launch hook restored",
         not rep["errors"] and rep["launch_knob_as_before"] and s.eager_triton_launches_in_graphed_regions == 400
         and s.graphed_region_entries == 400,
         {**rep, "eager_triton_launches_in_graphed_regions": s.eager_triton_launches_in_graphed_regions,
          "graphed_region_entries": s.graphed_region_entries})

    rows: dict[str, list[dict]] = {"off": [], "on": []}
    for r in range(args.rounds):
        for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
            rep, s, _ = run(["--overhead", "--steady-s", str(args.steady_s)], work, f"overhead-{mode}-{r}", mode == "on")
            rows[mode].append(rep)
            print(f"  overhead round {r} probe {mode}: {json.dumps(rep)}", flush=True)
    table = {}
    for metric in ("replay_us", "replay_in_region_us", "triton_launch_pair_us", "torch_op_us"):
        off = statistics.median(x[metric] for x in rows["off"])
        on = statistics.median(x[metric] for x in rows["on"])
        table[metric] = {"off": round(off, 3), "on": round(on, 3), "overhead_pct": round((on - off) / off * 100, 2)}
    log_rate = max(x["log_bytes_per_min"] for x in rows["on"])
    table["log_bytes_per_min"] = {"on": log_rate, "goal": LOG_GOAL_BYTES_PER_MIN}
    goals = all(v["overhead_pct"] <= GOAL_PCT for key, v in table.items() if "overhead_pct" in v) and log_rate <= LOG_GOAL_BYTES_PER_MIN
    show(f"overhead: <= {GOAL_PCT} % on replay and launch loops, log <= 1 MB/min", goals, {"table": table})

    from porttrack.runner.results import detect_environment

    passed = all(c["passed"] for c in cases.values())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"schema": "porttrack/probe-gpu-failclosed/v1", "passed": passed,
                                    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "machine": detect_environment(), "cases": cases, "overhead_rounds": rows},
                                   indent=2, sort_keys=True) + "\n")
    print(f"{'every case holds' if passed else 'a case FAILED'}; wrote {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
