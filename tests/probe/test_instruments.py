"""`porttrack.probe`: event log, instruments, summary and the vLLM plugin, in real subprocesses.

CI has no GPU, torch or Triton: the programs here import the stand-ins in testing/standins/
(Triton 3.6's hook protocol, an older Triton's, one with no hooks, torch's CUDA-graph surface,
vLLM's worker). The GPU proof is proofs/probe_gpu.py and its committed result.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from porttrack.probe import events as events_mod
from porttrack.probe.summary import summarize, to_fields

ROOT = Path(__file__).resolve().parents[2]
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
    assert s.eager_triton_launches_in_graphed_regions == 1 and s.eager_kernels == ("decode_step",)
    assert (s.graphed_region_entries, s.graphed_regions_not_replayed) == (6, 1)
    assert s.eager_launches_in_graphed_regions is None  # every CUDA kernel: not measured, never 0
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
    counters = [e for e in events_mod.read(log) if e["kind"] == "probe-counts"]
    assert counters[-1]["when"] == "exit" and counters[-1]["dynamo"]["frames_total"] == 2


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


VLLM_STEP = """
    from porttrack.probe import vllm_plugin
    vllm_plugin.register()
    import triton
    from vllm.v1.worker.gpu_worker import Worker
    w = Worker()
    w.compile_or_warm_up_model()              # ends by activating vLLM's JIT monitor, then the mark
    import vllm.utils.jit_monitor as monitor
    assert monitor.is_active() and triton.knobs.runtime.jit_post_compile_hook.__name__ == "_on_jit_compile"
    w.execute_model("fp16,B=8")               # warm: no compile
"""


@pytest.mark.parametrize("late", [False, True])
def test_vllms_jit_monitor_chaining_to_the_probe_keeps_the_figure(tmp_path: Path, late: bool) -> None:
    """Item 1 of issue 31: vLLM's monitor replaces Triton's post-compile knob with a function that
    calls the previous hook (the probe's): a clean step is 0, not None; a late compile is 1, named,
    and the monitor's own finding of it is read too without counting it twice."""
    body = VLLM_STEP + ('    w.execute_model("fp16,B=3")\n' if late else "")
    _, log = run_program(tmp_path, body, "triton_3_6", "vllm_worker")
    s = summary_of(log)
    assert "_on_jit_compile" in s.hooks_chained["triton-jit"]
    assert not s.problems, s.problems
    if late:
        assert s.jit_compiles_after_warmup == 1
        assert [(o.kernel, o.key, o.kind) for o in s.jit_after_warmup] == [("decode_kernel", "fp16,B=3", "triton")]
        assert [e["kernel"] for e in events_mod.read(log) if e["kind"] == "vllm-jit-monitor"] == ["decode_kernel"]
    else:
        assert s.jit_compiles_after_warmup == 0
    assert s.jit_kinds["vllm-jit-monitor"].startswith("watched: logging handler")


def test_a_monitor_finding_the_probe_did_not_see_is_counted(tmp_path: Path) -> None:
    # a kernel only vLLM's monitor reported (here: a CuTeDSL-like backend the probe has no hook for
    # in this process): the second source counts it
    body = VLLM_STEP + """
    monitor._found("CuTeDSL", "JIT compilation", "fused_moe_cute")
"""
    _, log = run_program(tmp_path, body, "triton_3_6", "vllm_worker")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup == 1
    assert (s.jit_after_warmup[0].kernel, s.jit_after_warmup[0].kind) == ("fused_moe_cute", "vllm-jit-monitor")


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


# -- failing closed and staying out of the way (issue 22) -------------------------------------------

AUTOTUNED = """
    from porttrack import probe
    probe.install()
    import triton

    @triton.autotune(configs=[triton.Config({"BLOCK_D": 64}), triton.Config({"BLOCK_D": 128}),
                              triton.Config({"BLOCK_D": 256})], key=["D"])
    @triton.jit
    def gather_rows_kernel():
        pass

    gather_rows_kernel.run("fp16", D=128)
    gather_rows_kernel.run("fp16", D=128)
    probe.mark(probe.WARMUP_DONE)
    gather_rows_kernel.run("fp16", D=128)
"""


def test_autotuning_a_key_first_seen_after_warmup_counts_like_a_compile(tmp_path: Path) -> None:
    # D=192 reuses the three configs' compiled kernels (no compile at all) but benchmarks all three
    _, log = run_program(tmp_path, AUTOTUNED + "    gather_rows_kernel.run('fp16', D=192)\n", "triton_3_6")
    s = summary_of(log)
    assert s.instruments["triton-autotune"].startswith("triton.runtime.autotuner")
    assert s.jit_compiles_after_warmup == 1
    (offender,) = s.jit_after_warmup
    assert (offender.kernel, offender.kind, offender.key) == ("gather_rows_kernel", "triton-autotune", "(192,)")
    assert s.autotunes_before_warmup == 1 and s.compiles_before_warmup == 3


def test_autotuning_only_during_warmup_gives_zero(tmp_path: Path) -> None:
    _, log = run_program(tmp_path, AUTOTUNED, "triton_3_6")
    assert summary_of(log).jit_compiles_after_warmup == 0


RECOMPILE = """
    from porttrack import probe
    probe.install()
    import triton, torch, torch._dynamo as dynamo
    {setup}
    dynamo.compile_frame("forward")
    probe.mark(probe.WARMUP_DONE)
    dynamo.compile_frame("forward", recompile_reason="tensor 'x' size mismatch at index 0. expected 8, actual 16")
"""


@pytest.mark.parametrize("setup, env", [
    ("torch._logging.set_logs(graph_breaks=True)", {}),    # the program sets its own logging after the probe
    ("", {"TORCH_LOGS": "graph_breaks"}),                   # TORCH_LOGS set: torch ignores the probe's set_logs
], ids=["set_logs", "TORCH_LOGS"])
def test_dynamo_recompiles_are_counted_whatever_the_logging_settings(tmp_path: Path, setup: str, env: dict,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _, log = run_program(tmp_path, RECOMPILE.format(setup=setup), "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert not any(e["kind"] == "dynamo-recompile" for e in events_mod.read(log))  # the reason was not logged
    assert s.jit_compiles_after_warmup == 1
    assert s.jit_after_warmup[0].kind == "dynamo" and "reason not logged" in s.jit_after_warmup[0].key


def test_inductor_kernels_compiled_after_warmup_are_seen(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import triton, torch, torch._inductor as inductor
        inductor.compile_kernel("triton_poi_fused_add_0", "xnumel=1024")
        probe.mark(probe.WARMUP_DONE)
        inductor.compile_kernel("triton_poi_fused_add_0", "xnumel=2048")
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.instruments["inductor-kernels"] == "torch._inductor.config.run_jit_post_compile_hook"
    assert s.jit_compiles_after_warmup == 1 and s.jit_after_warmup[0].kernel == "triton_poi_fused_add_0"


@pytest.mark.parametrize("when", ["before warmup", "after warmup"])
def test_a_hook_replaced_without_chaining_turns_the_figure_into_not_measured(tmp_path: Path, when: str) -> None:
    replace = "    triton.knobs.runtime.jit_post_compile_hook = lambda **kw: None  # e.g. tritonparse, not chained\n"
    body = KERNELS.replace("    probe.mark(probe.WARMUP_DONE)\n", (replace if when == "before warmup" else "")
                           + "    probe.mark(probe.WARMUP_DONE)\n" + (replace if when == "after warmup" else ""))
    _, log = run_program(tmp_path, body + "    gather_kernel.launch('fp32,N=512')\n", "triton_3_6")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup is None
    assert any("triton-jit not measured" in p and "jit_post_compile_hook" in p for p in s.problems)


def test_a_hook_wrapped_by_another_library_that_calls_it_is_still_measured(tmp_path: Path) -> None:
    chain = """
    previous = triton.knobs.runtime.jit_post_compile_hook
    def another_library(**kw):
        return previous(**kw)
    triton.knobs.runtime.jit_post_compile_hook = another_library
    """
    _, log = run_program(tmp_path, KERNELS.replace("    import triton\n", "    import triton\n" + chain)
                         + "    gather_kernel.launch('fp32,N=512')\n", "triton_3_6")
    # another library set the knob after install to a function that still calls the probe's hook
    # (through a module global): the probe's hook is still reached, so the figure stands
    s = summary_of(log)
    assert s.jit_compiles_after_warmup == 1 and s.jit_after_warmup[0].kernel == "gather_kernel"
    assert "another_library" in s.hooks_chained["triton-jit"]


def test_a_chain_that_drops_the_call_is_caught_at_run_time(tmp_path: Path) -> None:
    # holds the probe's hook (so it looks chained) but never calls it: the cache hook counted a
    # compile the post-compile hook never saw
    chain = """
    previous = triton.knobs.runtime.jit_post_compile_hook
    def another_library(**kw):
        if False:
            return previous(**kw)
    triton.knobs.runtime.jit_post_compile_hook = another_library
    """
    _, log = run_program(tmp_path, KERNELS.replace("    import triton\n", "    import triton\n" + chain)
                         + "    gather_kernel.launch('fp32,N=512')\n", "triton_3_6")
    s = summary_of(log)
    assert s.jit_compiles_after_warmup is None
    assert any("reached the probe's hook for 0 of 3 compiles" in p for p in s.problems), s.problems


def test_a_torch_only_eager_step_in_a_graphed_region_is_not_reported_as_zero(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import torch, triton
        graph = torch.cuda.CUDAGraph()
        with probe.graphed_region("decode"):
            graph.capture_begin(); graph.capture_end()
        probe.mark(probe.WARMUP_DONE)
        for _ in range(3):
            with probe.graphed_region("decode"):
                graph.replay()
        with probe.graphed_region("decode"):
            pass                                  # torch ops only: no Triton launch, no replay
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.eager_launches_in_graphed_regions is None
    assert (s.eager_triton_launches_in_graphed_regions, s.graphed_region_entries, s.graphed_regions_not_replayed) == (0, 4, 1)


@pytest.mark.parametrize("knob", ["hookchain", "plain"])
def test_two_threads_in_graphed_regions_at_once(tmp_path: Path, knob: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if knob == "plain":
        monkeypatch.setenv("STANDIN_TRITON_PLAIN_LAUNCH_HOOK", "1")
    body = """
        import threading
        from porttrack import probe
        probe.install()
        import torch, triton

        @triton.jit
        def decode_step():
            pass

        decode_step.launch("B=8")
        probe.mark(probe.WARMUP_DONE)
        knob_before = triton.knobs.runtime.launch_enter_hook
        both_inside, errors = threading.Barrier(2), []

        def worker(n):
            try:
                for _ in range(50):
                    with probe.graphed_region(f"decode-{n}"):
                        both_inside.wait()
                        decode_step.launch("B=8")
                        both_inside.wait()
            except Exception as exc:
                errors.append(repr(exc))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(errors, triton.knobs.runtime.launch_enter_hook is knob_before)
    """
    proc, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    assert proc.stdout.strip() == "[] True"  # no RecursionError; the launch knob as it was
    s = summary_of(log)
    assert s.eager_triton_launches_in_graphed_regions == 100 and s.graphed_region_entries == 100


CALLS_PER_LAUNCH = """
    import sys, triton
    from porttrack import probe
    chain = triton.knobs.runtime.launch_enter_hook
    calls_list, order = chain.calls, []
    chain.add(lambda md: order.append("before"))   # another library's hook, there before the probe
    probe.install()
    import torch
    chain.add(lambda md: order.append("after"))    # and one added after it
    @triton.jit
    def decode_step():
        pass
    decode_step.launch("B=8")
    probe.mark(probe.WARMUP_DONE)

    def python_calls(fn, n=50):
        fn()   # the first entry of a region makes its object: once, not per launch
        seen = []
        sys.setprofile(lambda frame, event, arg: seen.append(frame.f_code.co_name) if event == "call" else None)
        for _ in range(n):
            fn()
        sys.setprofile(None)
        return f"{len(seen) / n:g}"   # Python functions entered per launch, fn itself included
    def out():
        decode_step.launch("B=8")
    def inside():
        with probe.graphed_region("decode"):
            decode_step.launch("B=8")
    def raised_in_a_new_thread(n=20):   # a thread that never enters a region: no exception per launch
        import threading
        seen = []
        def body():
            decode_step.launch("B=8")
            def trace(frame, event, arg):
                if event == "exception":
                    seen.append(frame.f_code.co_name)
                return trace
            sys.settrace(trace)
            for _ in range(n):
                decode_step.launch("B=8")
            sys.settrace(None)
        thread = threading.Thread(target=body)
        thread.start(); thread.join()
        return len(seen)
    print(python_calls(out), python_calls(inside), order[-4:] == ["before", "after"] * 2,
          triton.knobs.runtime.launch_enter_hook is chain and chain.calls is calls_list and len(calls_list) == 2,
          raised_in_a_new_thread())
"""


@pytest.mark.parametrize("neighbours", [True, False])
def test_a_launch_costs_no_python_call_for_the_probe_in_or_out_of_a_region(tmp_path: Path, neighbours: bool) -> None:
    """Issue 31 item 10: the probe's cost per Triton launch. It counts a launch in a graphed region
    inside the chain's own frame, so a launch runs exactly the Python calls it runs without the
    probe (a hook in the chain's list cost one call per launch, in or out of a region: 1.06x on an
    H200), the chain keeps its identity and call list, and other hooks run once each, in order."""
    body = CALLS_PER_LAUNCH if neighbours else CALLS_PER_LAUNCH.replace("chain.add(lambda", "(lambda")
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on, log = run_program(tmp_path / "on", body, "triton_3_6", "torch_cuda")
    off, _ = run_program(tmp_path / "off", body, "triton_3_6", "torch_cuda", probe=False)
    on_out, on_in, on_order, on_chain, on_raised = on.stdout.split()
    off_out, off_in, off_order, off_chain, off_raised = off.stdout.split()
    assert (on_out, on_in, on_raised) == (off_out, off_in, off_raised) == (off_out, off_in, "0"), (on.stdout, off.stdout)
    assert on_order == off_order == str(neighbours) and on_chain == off_chain == str(neighbours)
    s = summary_of(log)
    assert s.eager_triton_launches_in_graphed_regions == 51 and s.eager_kernels == ("decode_step",)
    assert (s.graphed_region_entries, s.graphed_regions_not_replayed) == (51, 51)
    assert not s.problems


def test_a_region_with_an_empty_name_still_counts_its_launches(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import torch, triton

        @triton.jit
        def decode_step():
            pass

        decode_step.launch("B=8")
        probe.mark(probe.WARMUP_DONE)
        with probe.graphed_region(""):
            decode_step.launch("B=8")
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.eager_triton_launches_in_graphed_regions == 1 and (s.graphed_region_entries, s.graphed_regions_not_replayed) == (1, 1)


def test_a_chain_whose_class_is_put_back_makes_region_launches_not_measured(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import torch, triton
        probe.mark(probe.WARMUP_DONE)
        chain = triton.knobs.runtime.launch_enter_hook
        chain.__class__ = triton.HookChain          # the probe no longer counts in the chain
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.eager_triton_launches_in_graphed_regions is None and s.graphed_regions_not_replayed is None
    assert any("region-launches not measured" in p for p in s.problems)


def test_cache_entries_are_those_this_process_wrote_not_its_neighbours(tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    neighbour = tmp_path / "neighbour.py"
    neighbour.write_text("import triton\n\n@triton.jit\ndef other_kernel():\n    pass\n\nother_kernel.launch('fp16')\n")
    body = KERNELS + f"    import subprocess, sys\n    subprocess.run([sys.executable, {str(neighbour)!r}], check=True)\n"
    _, log = run_program(tmp_path, body, "triton_3_6", cache=cache)
    assert len(list(cache.iterdir())) == 3  # two entries written here, one by the neighbour
    s = summary_of(log)
    assert (s.cache_entries_written, s.served_from_cache) == (2, 0)


def test_mark_scans_no_folder_and_a_steady_state_logs_aggregates(tmp_path: Path) -> None:
    cache = tmp_path / "big-cache"
    for n in range(300):
        (cache / f"entry{n}").mkdir(parents=True)
        (cache / f"entry{n}" / "k.json").write_text("{}")
    body = """
        import os
        from porttrack import probe
        probe.install()
        import torch, triton
        scans = []
        for name in ("scandir", "listdir"):
            real = getattr(os, name)
            setattr(os, name, lambda *a, real=real, **k: scans.append(a) or real(*a, **k))
        graph = torch.cuda.CUDAGraph()
        with probe.graphed_region("decode"):
            graph.capture_begin(); graph.capture_end()
        for n in range(100):
            probe.mark(f"step-{n}")
        probe.mark(probe.WARMUP_DONE)
        for _ in range(20000):
            with probe.graphed_region("decode"):
                graph.replay()
        print(len(scans), os.path.getsize(os.environ["PORTTRACK_PROBE"]))
    """
    proc, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda", cache=cache)
    scans, size = map(int, proc.stdout.split())
    assert scans == 0
    assert size < 64 << 10  # 20,000 replays: a few counters, not an event each
    assert summary_of(log).graph_replays == 20000


def test_a_process_killed_before_exit_is_not_measured_but_its_periodic_counts_are_shown(tmp_path: Path) -> None:
    body = """
        import os, time
        from porttrack import probe
        from porttrack.probe import instruments
        instruments.FLUSH_S = 0.05
        probe.install()
        import torch, triton
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin(); graph.capture_end()
        probe.mark(probe.WARMUP_DONE)
        for _ in range(7):
            graph.replay()
        time.sleep(0.5)
        os._exit(0)                               # no atexit: as a worker killed by its engine
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    # its counts as of the last periodic snapshot are shown, but are not final: not a figure
    assert s.graph_replays is None and s.cache_entries_written is None and s.jit_compiles_after_warmup is None
    assert [g["replays"] for g in s.graphs.values()] == [7]
    assert any("no exit snapshot" in p for p in s.problems)


def test_a_launch_hook_removed_from_the_chain_makes_region_launches_not_measured(tmp_path: Path) -> None:
    body = """
        from porttrack import probe
        probe.install()
        import torch, triton
        probe.mark(probe.WARMUP_DONE)
        triton.knobs.runtime.launch_enter_hook = triton.HookChain()   # another library's fresh chain
    """
    _, log = run_program(tmp_path, body, "triton_3_6", "torch_cuda")
    s = summary_of(log)
    assert s.eager_triton_launches_in_graphed_regions is None and s.graphed_regions_not_replayed is None
    assert any("region-launches not measured" in p for p in s.problems)


def _random_program(rng: random.Random) -> tuple[str, str]:
    """A random program on the stand-ins and the truth about it, worked out from its steps alone:
    "blind" (a hook replaced before a compile after warmup could be seen), "offends" (something
    compiled or autotuned after warmup), or "clean"."""
    lines = ["from porttrack import probe", "probe.install()", "import triton, torch, torch._dynamo as dynamo",
             "@triton.jit", "def k():", "    pass",
             "@triton.autotune(configs=[triton.Config({'B': 1}), triton.Config({'B': 2})], key=['D'])",
             "@triton.jit", "def t():", "    pass"]
    if rng.random() < 0.3:
        lines.append("torch._logging.set_logs()")
    seen_keys, seen_d, frames = set(), set(), 0
    warm = replaced = False
    offends = False
    for step in range(rng.randint(3, 12)):
        if not warm and (step > 2 and rng.random() < 0.4):
            lines.append("probe.mark(probe.WARMUP_DONE)")
            warm = True
            continue
        what = rng.choice(["launch", "autotune", "dynamo", "replace"] if warm else ["launch", "autotune", "dynamo"])
        if what == "launch":
            key = rng.choice(["a", "b", "c"])
            lines.append(f"k.launch({key!r})")
            offends |= warm and key not in seen_keys
            seen_keys.add(key)
        elif what == "autotune":
            d = rng.choice([64, 128])
            lines.append(f"t.run('fp16', D={d})")
            offends |= warm and d not in seen_d
            seen_d.add(d)
        elif what == "dynamo":
            lines.append("dynamo.compile_frame('f', recompile_reason='x' if %d else None)" % frames)
            offends |= warm
            frames += 1
        elif what == "replace" and rng.random() < 0.3:
            lines.append("triton.knobs.runtime.jit_post_compile_hook = lambda **kw: None")
            replaced = True
    if not warm:
        lines.append("probe.mark(probe.WARMUP_DONE)")
    truth = "blind" if replaced else ("offends" if offends else "clean")
    return "\n".join(lines) + "\n", truth


def test_against_ground_truth_over_random_programs(tmp_path: Path) -> None:
    import random

    rng = random.Random(22)
    table: dict[tuple[str, str], int] = {}
    for n in range(40):
        program, truth = _random_program(rng)
        work = tmp_path / str(n)
        work.mkdir()
        _, log = run_program(work, program, "triton_3_6", "torch_cuda")
        got = summary_of(log).jit_compiles_after_warmup
        said = "not measured" if got is None else ("caught" if got > 0 else "zero")
        table[(truth, said)] = table.get((truth, said), 0) + 1
    print("\ntruth \\ probe said   caught  zero  not measured")
    for truth in ("offends", "clean", "blind"):
        print(f"{truth:20} {table.get((truth, 'caught'), 0):7} {table.get((truth, 'zero'), 0):5} "
              f"{table.get((truth, 'not measured'), 0):13}")
    wrong = {k: v for k, v in table.items()
             if k not in {("offends", "caught"), ("clean", "zero"), ("blind", "not measured")}}
    assert not wrong, table
    assert all(table.get(k, 0) > 0 for k in [("offends", "caught"), ("clean", "zero")]), table


def test_reaches_finds_the_ways_a_hook_is_chained_and_reads_nothing_through_getattr() -> None:
    import functools

    from porttrack.probe.instruments import reaches

    def ours(**kw):
        return None

    def chain_in_closure(previous):
        def hook(**kw):
            return previous(**kw)
        return hook

    class Holder:  # e.g. vLLM's _MonitoredCuteCompile keeps the original in an attribute
        def __init__(self, inner):
            self._inner = inner

        def __call__(self, *args, **kw):
            return self._inner(*args, **kw)

    class Dynamic:  # an object whose attribute reads have side effects
        reads: list = []

        def __getattr__(self, name):
            Dynamic.reads.append(name)
            raise AttributeError(name)

    for chained in (chain_in_closure(ours), functools.partial(ours), Holder(ours), functools.wraps(ours)(lambda **kw: None),
                    [ours], {"calls": [ours]}, Holder(Holder(chain_in_closure(ours))).__call__):
        assert reaches(chained, ours), chained
    for unrelated in (lambda **kw: None, Holder(lambda: None), Dynamic(), functools.partial(print)):
        assert not reaches(unrelated, ours), unrelated
    assert Dynamic.reads == []
    deep = ours
    for _ in range(10):
        deep = chain_in_closure(deep)
    assert not reaches(deep, ours)  # past the depth bound: "not reached" (fails closed)
