"""The Python work the probe adds to a Triton launch, in and out of a graphed region, counted on CPU.

    python3 benchmarks/probe_launch_steps.py [--variant NAME=ROOT ...] [--out benchmarks/results/probe_launch_steps.json]

World: no GPU; testing/standins/triton_3_6 (Triton 3.6's launch protocol: a LazyDict-like object
handed to `knobs.runtime.launch_enter_hook`, a HookChain) and testing/standins/torch_cuda. The
stand-in's launch is a few steps where the real one is hundreds, so the figures are what the probe
adds, not ratios: the GPU figure is proofs/probe_gpu_overhead.py's.

The same four loops as the GPU benchmark (`out`, `in`, `inert`, `region_only`), each run in a fresh
process per variant: `off` (this tree's probe installed, inactive), `on` (this tree's, active) and
any `--variant NAME=ROOT` (another checkout's, active). Counted with `sys.settrace`: Python
functions entered and bytecode steps executed per iteration. Deterministic: no timing, no noise,
so it can say which change removed what before a GPU is at hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STANDINS = ROOT / "testing" / "standins"
LOOPS = ("out", "in", "inert", "region_only")

CHILD = """
import json, sys
from porttrack import probe
probe.install()
import torch, triton
from porttrack.probe import _INERT

@triton.jit
def bump_kernel():
    pass

bump_kernel.launch("fp32")
graph = torch.cuda.CUDAGraph()
with probe.graphed_region("decode"):
    graph.capture_begin(); bump_kernel.launch("fp32"); graph.capture_end()
graph.replay()
probe.mark(probe.WARMUP_DONE)

def out(n):
    for _ in range(n):
        bump_kernel.launch("fp32")

def inside(n):
    for _ in range(n):
        with probe.graphed_region("decode"):
            bump_kernel.launch("fp32")

def inert(n):
    for _ in range(n):
        with _INERT:
            bump_kernel.launch("fp32")

def region_only(n):
    for _ in range(n):
        with probe.graphed_region("decode"):
            pass

def count(fn, n=100):
    fn(5)
    seen = {"calls": 0, "steps": 0}
    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "call":
            seen["calls"] += 1
        elif event == "opcode":
            seen["steps"] += 1
        return trace
    sys.settrace(trace)
    fn(n)
    sys.settrace(None)
    return {k: round(v / n, 2) for k, v in seen.items()}

print(json.dumps({"probe": probe.active(), "module": probe.__file__,
                  "loops": {"out": count(out), "in": count(inside), "inert": count(inert), "region_only": count(region_only)}}))
"""


def run(root: Path, active: bool, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PORTTRACK_PROBE"}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDINS / "triton_3_6"), str(STANDINS / "torch_cuda"), str(root)]),
               TRITON_CACHE_DIR=str(work / "triton"), PYTHONSAFEPATH="1")
    if active:
        env["PORTTRACK_PROBE"] = str(work / f"events-{root.name}-{active}.jsonl")
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120, cwd=work)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    if row["probe"] != active:
        raise SystemExit(f"{root}: probe active {row['probe']}, expected {active}")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", default=[], help="NAME=ROOT: another checkout's probe, active")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "probe_launch_steps.json")
    args = parser.parse_args()
    variants: dict[str, tuple[Path, bool]] = {"off": (ROOT, False), "on": (ROOT, True)}
    for spec in args.variant:
        name, _, root = spec.partition("=")
        variants[name] = (Path(root).resolve(), True)
    work = Path(tempfile.mkdtemp(prefix="probe-steps-"))
    rows = {name: run(root, active, work) for name, (root, active) in variants.items()}
    off = rows["off"]["loops"]
    table = {}
    for name, row in rows.items():
        if name == "off":
            continue
        table[name] = {loop: {"calls": row["loops"][loop]["calls"], "steps": row["loops"][loop]["steps"],
                              "added_calls": round(row["loops"][loop]["calls"] - off[loop]["calls"], 2),
                              "added_steps": round(row["loops"][loop]["steps"] - off[loop]["steps"], 2)} for loop in LOOPS}
        for loop in LOOPS:
            v = table[name][loop]
            print(f"{name} {loop}: +{v['added_calls']} Python calls, +{v['added_steps']} bytecode steps per iteration "
                  f"(off {off[loop]['calls']} calls, {off[loop]['steps']} steps)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "schema": "porttrack/probe-launch-steps/v1", "world": "CPU; the Triton 3.6 and torch stand-ins in testing/standins",
        "python": sys.version.split()[0], "off": off, "table": table,
        "variants": {n: {"root": "<this tree>" if r == ROOT else f"<{n} checkout>", "probe_active": a} for n, (r, a) in variants.items()},
    }, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
