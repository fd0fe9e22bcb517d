"""Issue 31, items 3, 4, 6 and 7, in real subprocesses on the stand-ins (testing/standins/): every
kind of JIT after warmup the probe covers is caught and named (never 0), a CUDA graph captured
after warmup counts, thousands of replayed graphs are counted whole, and eager work in a graphed
region reaches the gate. The same on real hardware: proofs/probe_gpu_jit_kinds.py."""

from __future__ import annotations

import pytest

from porttrack.jobs.cells import probe_fields
from porttrack.probe import jit_kinds
from tests.probe.test_instruments import run_program, summary_of

WARM = """
    from porttrack import probe
    probe.install()
    import torch, triton
    {setup}
    probe.mark(probe.WARMUP_DONE)
    {late}
"""

KINDS = {
    "nvrtc-jiterator": ("f = torch.cuda.jiterator._create_jit_fn('template <typename T> T scale(T x) {{ return 2 * x; }}')\n"
                        "    f(torch.Tensor('float32'))",
                        "f(torch.Tensor('float32'))\n    f(torch.Tensor('float16'))", "scale"),
    "cupy": ("import cupy\n    k = cupy.RawKernel('extern \"C\" __global__ void saxpy(float* x) {{}}', 'saxpy')\n"
             "    k((1,), (1,), ())",
             "k((1,), (1,), ())\n    cupy.RawKernel('extern \"C\" __global__ void late_add(float* x) {{}}', 'late_add')((1,), (1,), ())",
             "late_add"),
    "cpp-extension": ("from torch.utils.cpp_extension import load_inline\n    load_inline('warm_ext', 'int f() {{ return 1; }}')",
                      "load_inline('late_ext', 'int g() {{ return 2; }}')", "late_ext"),
    "cutedsl": ("import cutlass.cute as cute\n    def gemm(): pass\n    cute.compile(gemm)",
                "def late_gemm(): pass\n    cute.compile[('opt',)](late_gemm)", "late_gemm"),
    "tilelang": ("import tilelang\n    @tilelang.jit\n    def matmul(a): pass\n    matmul(1)",
                 "matmul(1)\n    matmul(1.5)", "matmul"),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("late", [False, True])
def test_each_jit_kind_after_warmup_is_caught_and_named(tmp_path, kind: str, late: bool) -> None:
    setup, after, name = KINDS[kind]
    body = WARM.format(setup=setup, late=after if late else "pass")
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda", "jit_kinds")
    s = summary_of(log)
    assert s.jit_kinds[kind].startswith("watched: "), s.jit_kinds
    assert not s.problems, s.problems
    if late:
        assert s.jit_compiles_after_warmup == 1, s.jit_after_warmup
        assert (s.jit_after_warmup[0].kind, s.jit_after_warmup[0].kernel) == (kind, name)
    else:
        assert s.jit_compiles_after_warmup == 0


def test_a_jit_kind_whose_instrument_fails_is_not_measured_never_zero(tmp_path) -> None:
    body = WARM.format(setup="import cupy.cuda.compiler as c\n    print(c)", late="pass")
    # a CuPy whose compiler module lacks both entry points: the kind cannot be watched
    (tmp_path / "cupy" / "cuda").mkdir(parents=True)
    (tmp_path / "cupy" / "__init__.py").write_text("")
    (tmp_path / "cupy" / "cuda" / "__init__.py").write_text("")
    (tmp_path / "cupy" / "cuda" / "compiler.py").write_text("def something_else(): pass\n")
    _, log = run_program(tmp_path, "import sys; sys.path.insert(0, %r)\n" % str(tmp_path) + body.replace("\n    ", "\n"),
                         "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup is None
    assert s.jit_kinds["cupy"].startswith("not measured: ")


def test_the_summary_names_every_kind_covered_and_not() -> None:
    assert set(jit_kinds.JIT_KINDS) >= {"triton", "triton-autotune", "dynamo", "inductor", "cuda-graph-capture",
                                          "nvrtc-jiterator", "cupy", "cpp-extension", "cutedsl", "tilelang", "vllm-jit-monitor"}
    assert any("ATen" in line for line in jit_kinds.JIT_NOT_COVERED)


GRAPHS = """
    from porttrack import probe
    probe.install()
    import torch, triton
    graphs = []
    for b in range({n}):
        g = torch.cuda.CUDAGraph(); g.capture_begin(); g.capture_end(); graphs.append(g)
    probe.mark(probe.WARMUP_DONE)
    for g in graphs:
        with probe.graphed_region("decode"):
            g.replay()
    {late}
"""


def test_a_graph_captured_after_warmup_fails(tmp_path) -> None:
    late = "g = torch.cuda.CUDAGraph(); g.capture_begin(); g.capture_end()\n    g.replay()"
    _, log = run_program(tmp_path, GRAPHS.format(n=4, late=late), "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.graph_captures_after_warmup == 1 and s.jit_compiles_after_warmup == 1
    assert s.jit_after_warmup[0].kind == "cuda-graph-capture"
    fields, _ = probe_fields(s)
    assert fields is not None and fields["jit_compiles_after_warmup"] == 1


def test_thousands_of_replayed_graphs_are_counted_whole(tmp_path) -> None:
    _, log = run_program(tmp_path, GRAPHS.format(n=3500, late="pass"), "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert not s.problems, s.problems
    assert s.graph_replays == 3500 and s.graph_captures == 3500 and s.graphed_region_entries == 3500
    assert max(len(line) for line in log.read_bytes().splitlines()) <= 64 << 10
    assert probe_fields(s)[0] == {"graph_replays": 3500, "jit_compiles_after_warmup": 0, "graphed_regions_eager": 0}


def test_eager_work_in_a_graphed_region_after_one_replay_reaches_the_cell(tmp_path) -> None:
    late = ("@triton.jit\n    def decode_kernel(): pass\n    decode_kernel.launch('warm')\n"
            "    for _ in range(3):\n        with probe.graphed_region('decode'):\n            decode_kernel.launch('warm')")
    body = GRAPHS.format(n=1, late=late).replace("    probe.mark(probe.WARMUP_DONE)\n",
                                                  "    probe.mark(probe.WARMUP_DONE)\n")
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.graph_replays == 1 and s.graphed_regions_not_replayed == 3
    fields, _ = probe_fields(s)
    assert fields is not None and fields["graphed_regions_eager"] == 3 + s.eager_triton_launches_in_graphed_regions
