"""The program under test in the GPU demo's fork (`demo/serve.py` there): a decode server in
miniature. It warms up every batch shape it serves, captures the decode step into a CUDA graph,
marks warmup done, serves requests by graph replay, and compares its output with the torch
float32 reference.

    python3 demo/serve.py --context C --batch B --output OUT.json

Writes {"metrics": {"first_request_ms", "decode_step_us"}, "numerics": {...}} for
`porttrack.jobs.cells`. `SIDE_REQUEST_DTYPE` is what the demo's planted patch changes: serving a
request in a dtype warmup never saw (a compile after warmup); `SIDE_GATHER_WIDTH` what its autotune
variant changes: a gather of a row width warmup never saw (autotuning after warmup, no compile).
`LATE` is what proofs/probe_gpu_jit_kinds.py's planted patches set (issue 31): one JIT of
another kind after warmup ("jiterator", "cupy", "cpp-extension", "cutedsl", "tilelang"), a graph
captured after warmup ("late-capture"), a graphed step run eagerly after it replayed
("eager-after-replay"), or a probe-log line cut by a short write ("damaged-log"). `GRAPHS` more
small graphs are captured in warmup and each replayed every step (thousands make the counts long).
"""

from __future__ import annotations

import argparse
import json
import time

STARTED = time.perf_counter()

from porttrack import probe  # noqa: E402

probe.install()

import kernels  # noqa: E402  (demo/kernels.py: the Triton kernels)
import torch  # noqa: E402
import triton  # noqa: E402

HEADS, DIM = 8, 128
SIDE_REQUEST_DTYPE = None  # None: every request is served in the warmed-up dtype
SIDE_GATHER_WIDTH = None  # None: every gather has the warmed-up row width (the autotuner's key)
LATE = None  # None: nothing after warmup but graph replays
GRAPHS = 0  # extra small graphs captured in warmup, each replayed in every decode step


def late(kind: str, step) -> None:
    """One thing after warmup that the gate must refuse."""
    if kind == "jiterator":  # NVRTC, compiled at the first call
        code = "template <typename T> T late_scale(T x) { return x * T(3); }"
        torch.cuda.jiterator._create_jit_fn(code)(torch.ones(256, device="cuda"))
    elif kind == "cupy":
        import cupy

        kernel = cupy.RawKernel(r'extern "C" __global__ void late_add(float* x) { x[threadIdx.x] += 1.0f; }', "late_add")
        kernel((1,), (32,), (cupy.zeros(32, dtype=cupy.float32),))
    elif kind == "cpp-extension":
        from torch.utils.cpp_extension import load_inline

        load_inline("late_ext", cpp_sources="int answer() { return 42; }", functions=["answer"])
    elif kind == "cutedsl":
        import cutlass.cute as cute

        @cute.jit
        def late_cute():
            pass

        cute.compile(late_cute)
    elif kind == "tilelang":
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def late_tile(n: int = 256, dtype: str = "float32"):
            @T.prim_func
            def main(a: T.Tensor((n,), dtype)):
                with T.Kernel(1, threads=128):
                    pass
            return main

        late_tile()
    elif kind == "late-capture":  # cudagraph trees at a new batch size do this
        step.capture()
        step.replay()
    elif kind == "eager-after-replay":
        with probe.graphed_region("decode"):
            step.eager()
    elif kind == "damaged-log":
        import atexit
        import os

        # runs before the probe's exit snapshot (atexit: last in, first out): half a line, no newline
        atexit.register(lambda: open(os.environ["PORTTRACK_PROBE"], "ab").write(b'{"t": 1.0, "pid": 1, "kind": "triton-com'))
    else:
        raise SystemExit(f"serve: unknown LATE {kind!r}")
    torch.cuda.synchronize()


def backend_used() -> dict:
    """What the decode step's attention ran, read from the kernel object it launches (not from what
    the cell claims): a Triton kernel is "TRITON", anything else its type's name."""
    fn = kernels.decode_attention_kernel
    ran = "TRITON" if isinstance(fn, triton.runtime.jit.JITFunction) else type(fn).__name__
    return {"attention": {"DecodeStep": [ran]}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    step = kernels.DecodeStep(args.batch, HEADS, args.context, DIM, torch.float16)
    with probe.graphed_region("decode"):
        step.capture()
        step.replay()
    small, pool, counter = [], None, torch.zeros(1, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # many graphs, as an engine with many captured sizes and pieces has
        for _ in range(GRAPHS):  # (capture_begin/end directly: torch.cuda.graph() collects garbage per capture)
            graph = torch.cuda.CUDAGraph()
            graph.capture_begin(pool=pool)
            counter.add_(1.0)
            graph.capture_end()
            pool = graph.pool()
            small.append(graph)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    first_request_ms = (time.perf_counter() - STARTED) * 1e3
    probe.mark(probe.WARMUP_DONE)

    began = time.perf_counter()
    for _ in range(100):
        with probe.graphed_region("decode"):
            out = step.replay()
    torch.cuda.synchronize()
    decode_step_us = (time.perf_counter() - began) / 100 * 1e6
    for graph in small:
        with probe.graphed_region("decode"):
            graph.replay()
    if LATE is not None:
        late(LATE, step)
    if SIDE_REQUEST_DTYPE is not None:
        kernels.DecodeStep(1, HEADS, args.context, DIM, getattr(torch, SIDE_REQUEST_DTYPE)).eager()
        torch.cuda.synchronize()
    if SIDE_GATHER_WIDTH is not None:  # a row width warmup never saw: the autotuner benchmarks its configs again
        kernels.gather_rows(torch.randn((4096, SIDE_GATHER_WIDTH), device="cuda", dtype=torch.float16), step.idx)
        torch.cuda.synchronize()

    ref = step.reference()
    err = (out.float() - ref).abs()
    nonzero = ref != 0
    result = {
        "backend_used": backend_used(),
        "metrics": {"first_request_ms": round(first_request_ms, 3), "decode_step_us": round(decode_step_us, 3)},
        "numerics": {"reference_backend": "torch-fp32", "max_abs_err": float(err.max()),
                     "max_rel_err": float((err[nonzero] / ref[nonzero].abs()).max()), "samples": int(ref.numel())},
    }
    with open(args.output, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
