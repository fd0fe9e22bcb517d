"""`porttrack.probe`: event log, instruments, summary and the vLLM plugin, in real subprocesses.

CI has no GPU, torch or Triton: the programs here import the stand-ins in testing/standins/
(Triton 3.6's hook protocol, an older Triton's, one with no hooks, torch's CUDA-graph surface,
vLLM's worker). The GPU proof is benchmarks/probe_gpu.py and its committed result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from porttrack.probe import events as events_mod
from porttrack.probe.summary import summarize, to_fields

ROOT = Path(__file__).resolve().parent.parent
STANDINS = ROOT / "testing" / "standins"


def run_program(tmp_path: Path, body: str, *standins: str, probe: bool = True, cache: Path | None = None,
                log_name: str = "events.jsonl") -> tuple[subprocess.CompletedProcess[str], Path]:
    log = tmp_path / log_name
    paths = [str(STANDINS / s) for s in standins] + [str(ROOT)]
    env = {k: v for k, v in os.environ.items() if k != events_mod.ENV}
    env.update(PYTHONPATH=os.pathsep.join(paths), TRITON_CACHE_DIR=str(cache or tmp_path / "triton-cache"))
    if probe:
        env[events_mod.ENV] = str(log)
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc, log


def summary_of(log: Path):
    return summarize(events_mod.read(log))


KERNELS = """
    from porttrack import probe
    probe.install()
    import triton

    @triton.jit
    def gather_kernel():
        pass

    for key in ("fp16,N=128", "fp16,N=256"):
        gather_kernel.launch(key)
    probe.mark(probe.WARMUP_DONE)
    gather_kernel.launch("fp16,N=128")
"""


def test_warmup_covering_every_shape_gives_zero_compiles_after_warmup(tmp_path: Path) -> None:
    _, log = run_program(tmp_path, KERNELS, "triton_3_6")
    s = summary_of(log)
    assert s.instruments["triton-jit"].startswith("triton.knobs.runtime")
    assert (s.jit_compiles_after_warmup, s.compiles_before_warmup) == (0, 2)
    assert to_fields(s)["jit_compiles_after_warmup"] == 0


def test_a_shape_first_seen_after_warmup_is_caught_and_named(tmp_path: Path) -> None:
    _, log = run_program(tmp_path, KERNELS + "    gather_kernel.launch('fp32,N=512')\n", "triton_3_6")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup == 1
    assert [(o.kernel, o.key) for o in s.jit_after_warmup] == [("gather_kernel", "fp32,N=512")]


def test_the_older_jitfunction_hook_is_used_and_named(tmp_path: Path) -> None:
    _, log = run_program(tmp_path, KERNELS + "    gather_kernel.launch('fp32,N=512')\n", "triton_old")
    s = summary_of(log)
    assert s.instruments["triton-jit"].startswith("triton.runtime.jit.JITFunction")
    assert s.jit_compiles_after_warmup == 1


def test_no_hook_in_triton_is_reported_as_not_measurable_never_zero(tmp_path: Path) -> None:
    body = "from porttrack import probe\nprobe.install()\nimport triton\nprobe.mark(probe.WARMUP_DONE)\n"
    _, log = run_program(tmp_path, body, "triton_none")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup is None
    assert "triton-jit" in s.missing and "neither" in s.missing["triton-jit"]
    assert to_fields(s)["jit_compiles_after_warmup"] is None


def test_compiles_without_a_warmup_mark_fail_closed(tmp_path: Path) -> None:
    _, log = run_program(tmp_path, KERNELS.replace("    probe.mark(probe.WARMUP_DONE)\n", ""), "triton_3_6")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup is None
    assert any("never marked" in p for p in s.problems)


def test_without_the_variable_the_probe_is_inert_and_imports_nothing(tmp_path: Path) -> None:
    body = """
        import sys
        from porttrack import probe
        from porttrack.probe import vllm_plugin
        vllm_plugin.register()
        print(probe.active(), sorted(m for m in ("triton", "torch") if m in sys.modules), len(sys.meta_path))
    """
    proc, log = run_program(tmp_path, body, "triton_3_6", probe=False)
    assert proc.stdout.split()[0:2] == ["False", "[]"]
    assert not log.exists()


def test_the_probe_never_imports_torch_or_triton_itself(tmp_path: Path) -> None:
    body = """
        import sys
        from porttrack import probe
        probe.install()
        probe.mark(probe.WARMUP_DONE)
        print(sorted(m for m in ("triton", "torch") if m in sys.modules))
    """
    proc, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    assert proc.stdout.strip() == "[]"
    assert summary_of(log).jit_compiles_after_warmup is None  # Triton never loaded: nothing to judge by


def test_graph_replays_are_counted_and_an_eager_fallback_is_caught(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import torch, triton

        @triton.jit
        def decode_step():
            pass

        decode_step.launch("B=8")                 # warm-up launch
        graph = torch.cuda.CUDAGraph()
        with probe.graphed_region("decode"):
            graph.capture_begin(); decode_step.launch("B=8"); graph.capture_end()
        probe.mark(probe.WARMUP_DONE)
        for _ in range(5):
            with probe.graphed_region("decode"):
                graph.replay()
        with probe.graphed_region("decode"):      # the fallback: launched eagerly, not replayed
            decode_step.launch("B=8")
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert (s.graph_captures, s.graph_replays) == (1, 5)
    assert s.eager_launches_in_graphed_regions == 1 and s.eager_kernels == ("decode_step",)
    assert s.jit_compiles_after_warmup == 0


def test_cold_compiles_write_the_cache_and_warm_ones_are_served_from_it(tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    cold_dir, warm_dir = tmp_path / "cold", tmp_path / "warm"
    cold_dir.mkdir()
    warm_dir.mkdir()
    _, cold = run_program(cold_dir, KERNELS, "triton_3_6", cache=cache)
    _, warm = run_program(warm_dir, KERNELS, "triton_3_6", cache=cache)
    c, w = summary_of(cold), summary_of(warm)
    assert (c.compiles_before_warmup, c.cache_entries_written, c.served_from_cache) == (2, 2, 0)
    assert (w.compiles_before_warmup, w.cache_entries_written, w.served_from_cache) == (2, 0, 2)


def test_dynamo_recompiles_after_warmup_count_with_their_reason(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import triton, torch, torch._dynamo as dynamo
        dynamo.compile_frame("forward")
        probe.mark(probe.WARMUP_DONE)
        dynamo.compile_frame("forward", recompile_reason="tensor 'x' size mismatch at index 0. expected 8, actual 16")
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup == 1
    assert "size mismatch" in s.jit_after_warmup[0].key
    counters = [e for e in events_mod.read(log) if e["kind"] == "dynamo-counters"]
    assert counters[-1]["frames_total"] == 2


def test_the_vllm_plugin_marks_warmup_when_the_worker_step_returns(tmp_path: Path) -> None:
    body = """
        from porttrack.probe import vllm_plugin
        vllm_plugin.register()
        vllm_plugin.register()                    # vLLM may load plugins more than once
        from vllm.v1.worker.gpu_worker import Worker
        vllm_plugin.register()
        w = Worker()
        w.compile_or_warm_up_model()
        w.execute_model("fp16,B=8")               # warm: no compile
        w.execute_model("fp16,B=3")               # a batch size warmup did not cover
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "vllm_worker")
    events = list(events_mod.read(log))
    assert sum(e["kind"] == "probe-start" for e in events) == 1
    assert sum(e["kind"] == "mark" for e in events) == 1  # wrapped once
    s = summarize(events)
    assert s.jit_compiles_after_warmup == 1 and s.jit_after_warmup[0].key == "fp16,B=3"


def test_the_entry_point_is_declared_for_vllm() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points."vllm.general_plugins"]' in text
    line = next(line for line in text.split('[project.entry-points."vllm.general_plugins"]')[1].splitlines() if "=" in line)
    target = line.split("=", 1)[1].strip().strip('"')
    module, _, attr = target.partition(":")
    assert callable(getattr(__import__(module, fromlist=[attr]), attr))


def test_processes_share_one_log_without_mixing_lines(tmp_path: Path) -> None:
    body = """
        import os
        from porttrack import probe
        probe.install()
        for child in range(4):
            if os.fork() == 0:
                for i in range(300):
                    probe.mark(f"child-{child}-{i}-" + "x" * 300)
                os._exit(0)
        for _ in range(4):
            os.wait()
    """
    _, log = run_program(tmp_path, body)
    events = list(events_mod.read(log))
    assert not [e for e in events if e["kind"] == "probe-error"]
    assert sum(e["kind"] == "mark" for e in events) == 1200


def test_a_damaged_line_is_reported_not_skipped(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text('{"t": 1, "pid": 1, "kind": "mark", "name": "warmup-done"}\n{"t": 2, "pid"\n')
    s = summary_of(log)
    assert any("line 2" in p for p in s.problems)


@pytest.mark.parametrize("missing", ["triton-jit", "cuda-graphs"])
def test_summary_fields_are_none_when_their_instrument_is_missing(missing: str) -> None:
    installed = {"triton-jit": "api", "cuda-graphs": "api"}
    installed.pop(missing)
    events = [{"t": 1, "pid": 7, "kind": "probe-instruments", "instruments": installed, "missing": {missing: "why"}},
              {"t": 2, "pid": 7, "kind": "mark", "name": "warmup-done"}]
    fields = to_fields(summarize(events))
    assert fields["jit_compiles_after_warmup" if missing == "triton-jit" else "graph_replays"] is None
