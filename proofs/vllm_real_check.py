"""porttrack's probe inside the real vLLM worker step, with vLLM's own JIT monitor on (issue 31).

    python -m venv /tmp/vllm-venv && /tmp/vllm-venv/bin/pip install vllm==0.33.0 && /tmp/vllm-venv/bin/pip install --no-deps -e .
    /tmp/vllm-venv/bin/python proofs/vllm_real_check.py [--out proofs/results/vllm_real_check.json]

CPU only (the vllm wheel from the package index; it pins torch 2.14 and Triton 3.8). Each scenario
is a fresh process with PORTTRACK_PROBE set, running, from the real package:

1. `vllm.plugins.load_general_plugins()`: vLLM's loader finds porttrack's `vllm.general_plugins`
   entry point and calls it (the probe starts, and watches for the worker module);
2. `from vllm.v1.worker.gpu_worker import Worker`: the plugin wraps the real
   `Worker.compile_or_warm_up_model`;
3. that wrapped method, called on a real `Worker` object: the real `compile_or_warm_up_model` ->
   `_compile_or_warm_up_model` -> `kernel_warmup` -> `_maybe_activate_jit_monitor` ->
   `vllm.utils.jit_monitor.activate` (which replaces `triton.knobs.runtime.jit_post_compile_hook`
   with its `_on_jit_compile`, chaining to the probe's) -> the plugin's engine record and
   "warmup-done" mark;
4. a decode step after warmup: the same kernel and shapes (clean), or one new specialization (late).

Kernels are real Triton 3.8 `@triton.jit` kernels compiled by Triton's own `JITFunction` path to
sm_90 cubin (ptxas runs on the CPU), so the compile hooks fire as on a GPU; Triton's active driver
is a CPU-hosted CUDA driver that answers the device queries (device 0, sm_90) and never launches.
What is NOT real: there is no GPU and no model. `Worker.__init__` (device setup), the model runner
(`_dummy_run` compiles the kernels warmup covers; `capture_model` captures nothing), the
distributed groups (`get_pp_group`), the platform's device seeding and the configs the method reads are small stand-ins set on the real
`Worker` object; the engine's attention layers hold the real vLLM backend classes
(`AttentionBackendEnum[...].get_class()`, where they import on a CPU) so the engine record is the
real one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# -- the child: one real worker step ----------------------------------------------------------------

def _cpu_hosted_triton() -> None:
    """Triton's NVIDIA backend compiles for sm_90 here; nothing is launched."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver
    from triton.runtime import driver

    class CPUHostedCuda(CudaDriver):
        def __init__(self) -> None:  # no libcuda: no utils, no launcher
            self.utils = None
            self.launcher_cls = None

        def get_current_device(self) -> int:
            return 0

        def set_current_device(self, device: int) -> None:
            pass

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_current_target(self) -> Any:
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self) -> Any:
            return torch.device("cpu")

        def get_device_interface(self) -> Any:
            return torch.cuda

        def is_active(self) -> bool:
            return True

    driver.set_active(CPUHostedCuda())


def _kernels() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def rms_norm_kernel(x, w, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x + offs, mask=mask)
        tl.store(out + offs, v * tl.load(w + offs, mask=mask) / tl.sqrt(tl.sum(v * v) / n + 1e-6), mask=mask)

    return rms_norm_kernel


class _ModelRunner:
    """Stands in for GPUModelRunner: its warmup runs compile the kernel for the dtype served."""

    lora_config = None
    is_pooling_model = False

    attn_groups: list[Any] = []

    def __init__(self, kernel: Any) -> None:
        import torch

        self.kernel = kernel
        self.runs: list[str] = []
        self.device = torch.device("cpu")
        # vLLM's JIT warmup registry: kernel_warmup() calls its warmup() when JIT warmup is on
        self.jit_warmup_registry = types.SimpleNamespace(warmup=lambda: self.step(torch.float32))

    def step(self, dtype: Any) -> None:
        self.kernel.warmup(dtype, dtype, dtype, 4096, BLOCK=1024, grid=(4,))
        self.runs.append(str(dtype))

    def _dummy_run(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        self.step(torch.float32)
        return None, None

    def _dummy_sampler_run(self, *args: Any, **kwargs: Any) -> None:
        return None

    def maybe_remove_all_loras(self, lora_config: Any) -> None:
        return None

    def capture_model(self) -> int:
        return 0

    def get_model(self) -> Any:
        return types.SimpleNamespace(modules=lambda: iter(()))


def _layers() -> tuple[dict[str, Any], dict[str, str]]:
    """Attention layers holding the real backend classes of FLASH_ATTN and ROCM_AITER_FA."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    class Attention:  # vLLM's layer class is named Attention; only get_attn_backend is read
        def __init__(self, backend: Any) -> None:
            self.backend = backend

        def get_attn_backend(self) -> Any:
            return self.backend

    layers, why = {}, {}
    for name in ("ROCM_AITER_FA", "FLASH_ATTN"):
        try:
            cls = AttentionBackendEnum[name].get_class()
        except Exception as exc:  # a backend whose module needs a GPU library to import
            why[name] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        layers[f"model.layers.{len(layers)}.attn.{name.lower()}"] = Attention(cls)
        why[name] = f"get_class() -> {cls.__module__}.{cls.__qualname__}, get_name() -> {cls.get_name()}"
    return layers, why


def child(scenario: str, report: Path) -> int:
    out: dict[str, Any] = {"scenario": scenario, "steps": []}
    try:
        import vllm
        from vllm.plugins import load_general_plugins

        out["vllm"] = vllm.__version__
        load_general_plugins()
        from porttrack import probe

        out["steps"].append(f"vllm.plugins.load_general_plugins(): porttrack probe active = {probe.active()}")
        _cpu_hosted_triton()
        import triton

        out["triton"] = triton.__version__
        from vllm.v1.worker.gpu_worker import Worker

        wrapped = getattr(Worker.compile_or_warm_up_model, "_porttrack_probe_wrapped", False)
        out["steps"].append(f"Worker.compile_or_warm_up_model wrapped by the plugin = {wrapped}")
        from vllm.config import CompilationMode

        kernel = _kernels()
        runner = _ModelRunner(kernel)
        layers, backends = _layers()
        out["backend_classes"] = backends
        worker = Worker.__new__(Worker)  # Worker.__init__ sets up a CUDA device: not on a CPU
        ns = types.SimpleNamespace
        compilation = ns(mode=CompilationMode.NONE, static_forward_context=layers, cudagraph_capture_sizes=[],
                         compilation_time=0.0, encoder_compilation_time=0.0, backend="", compile_sizes=None)
        worker.vllm_config = ns(compilation_config=compilation,
                                kernel_config=ns(enable_jit_warmup=True, enable_cutedsl_warmup=False, enable_flashinfer_autotune=False),
                                model_config=ns(enforce_eager=True, seed=0, hf_config=ns(), hf_text_config=ns(), architectures=[], dtype=None),
                                scheduler_config=ns(max_num_seqs=8, max_num_batched_tokens=64))
        worker.model_runner = runner
        worker.model_config = worker.vllm_config.model_config
        worker.compilation_config = compilation
        worker.scheduler_config = worker.vllm_config.scheduler_config
        worker.cache_config = ns(kv_cache_memory_bytes=1 << 30)
        worker.parallel_config = ns(data_parallel_index=0, data_parallel_size=1)
        worker.observability_config = ns(jit_monitor_mode="warn", jit_monitor_verbose=False)
        worker.use_v2_model_runner = False
        _distributed()
        result = worker.compile_or_warm_up_model()
        import vllm.utils.jit_monitor as monitor

        hook = triton.knobs.runtime.jit_post_compile_hook
        out["steps"].append(f"compile_or_warm_up_model() returned {type(result).__name__}; jit monitor active = "
                            f"{monitor.is_active()}; Triton's post-compile knob is now {hook.__module__}.{hook.__qualname__}")
        out["monitor_active"] = monitor.is_active()
        out["knob_after_warmup"] = f"{hook.__module__}.{hook.__qualname__}"
        import torch

        runner.step(torch.float32)  # a decode step at a shape warmup covered
        if scenario == "late":
            runner.step(torch.float16)  # one new specialization after the mark: a JIT compile after warmup
        out["runs"] = runner.runs
        out["ok"] = True
    except Exception as exc:
        out["ok"] = False
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-3000:]
    report.write_text(json.dumps(out, indent=2, default=str))
    return 0 if out["ok"] else 1


def _distributed() -> None:
    """The worker asks `get_pp_group().is_last_rank` (vLLM's pipeline-parallel group, set up by the
    distributed init a real worker runs on its device): one process, the last rank."""
    import torch
    import vllm.v1.worker.gpu_worker as gpu_worker
    from vllm.platforms import current_platform

    gpu_worker.get_pp_group = lambda: types.SimpleNamespace(is_last_rank=True)
    # with no GPU, vLLM's platform is its UnspecifiedPlatform, which cannot seed a device
    current_platform.manual_seed_all = torch.manual_seed


# -- the parent: each scenario in a fresh process, then porttrack's reading of its log ------------

def run_scenario(scenario: str, work: Path) -> dict[str, Any]:
    from porttrack.jobs.cells import probe_fields
    from porttrack.probe import engine_record, events
    from porttrack.probe.summary import summarize

    log, record, report = work / f"{scenario}.probe.jsonl", work / f"{scenario}.engine.jsonl", work / f"{scenario}.report.json"
    env = {**os.environ, events.ENV: str(log), engine_record.ENV: str(record), "TRITON_CACHE_DIR": str(work / f"{scenario}-triton"),
           "VLLM_CONFIGURE_LOGGING": "1", "CUDA_VISIBLE_DEVICES": ""}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", scenario, "--report", str(report)], env=env,
                          capture_output=True, text=True, timeout=900)
    child_report = json.loads(report.read_text()) if report.is_file() else {"ok": False, "error": proc.stderr[-2000:]}
    out: dict[str, Any] = {"exit_code": proc.returncode, "seconds": round(time.perf_counter() - began, 1), "child": child_report,
                           "monitor_log_lines": [line for line in proc.stderr.splitlines() if "during inference" in line][:5]}
    if log.is_file():
        evts = list(events.read(log))
        s = summarize(evts)
        out["summary"] = {"jit_compiles_after_warmup": s.jit_compiles_after_warmup,
                          "jit_after_warmup": [vars(o) for o in s.jit_after_warmup], "compiles_before_warmup": s.compiles_before_warmup,
                          "hooks_chained": s.hooks_chained, "problems": list(s.problems), "jit_kinds": s.jit_kinds,
                          "graph_replays": s.graph_replays}
        out["cell_fields"], out["not_measured_because"] = probe_fields(s)
        out["events"] = sorted({e["kind"] for e in evts})
        out["vllm_jit_monitor_events"] = [{"backend": e["backend"], "kernel": e["kernel"]} for e in evts if e["kind"] == "vllm-jit-monitor"]
    out["engine_record"] = engine_record.read(record)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "proofs" / "results" / "vllm_real_check.json"))
    parser.add_argument("--child")
    parser.add_argument("--report")
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, Path(args.report))
    import importlib.metadata as md

    result: dict[str, Any] = {"what": "porttrack's probe in the real vLLM worker step with vLLM's JIT monitor on (CPU)",
                              "command": "VENV/bin/python proofs/vllm_real_check.py",
                              "packages": {n: md.version(n) for n in ("vllm", "torch", "triton")},
                              "python": platform.python_version(), "real": __doc__.split("What is NOT real:")[0].split("running, from the real package:")[1].strip(),
                              "not_real": "What is NOT real:" + __doc__.split("What is NOT real:")[1].strip()}
    with tempfile.TemporaryDirectory(prefix="vllm-real-check-") as tmp:
        result["scenarios"] = {name: run_scenario(name, Path(tmp)) for name in ("clean", "late")}
    clean, late = result["scenarios"]["clean"], result["scenarios"]["late"]
    late_jit = (late.get("summary") or {}).get("jit_after_warmup") or []
    aiter = [e.get("attention") for e in clean.get("engine_record", [])]
    result["acceptance"] = {
        "clean step: jit_compiles_after_warmup == 0 (not None)": (clean.get("summary") or {}).get("jit_compiles_after_warmup") == 0,
        "clean step: the cell is measured": clean.get("cell_fields") is not None,
        "late compile: jit_compiles_after_warmup == 1": (late.get("summary") or {}).get("jit_compiles_after_warmup") == 1,
        "late compile: the kernel is named": [o["kernel"].rsplit(".", 1)[-1] for o in late_jit] == ["rms_norm_kernel"],
        "vLLM's monitor chained to the probe's hook": "_on_jit_compile" in json.dumps((clean.get("summary") or {}).get("hooks_chained")),
        "vLLM's monitor reported the late kernel too (second source)": [e["kernel"].rsplit(".", 1)[-1] for e in late.get("vllm_jit_monitor_events", [])] == ["rms_norm_kernel"],
        "engine record: ROCM_AITER_FA and FLASH_ATTN classes recorded apart": aiter == [{"Attention": ["FLASH_ATTN", "ROCM_AITER_FA"]}],
    }
    result["all_hold"] = all(result["acceptance"].values())
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")
    print(json.dumps(result["acceptance"], indent=2))
    print(f"wrote {args.out}")
    return 0 if result["all_hold"] else 1


if __name__ == "__main__":
    sys.exit(main())
