"""Instruments for JIT compilers other than Triton, installed inside the process under test like
those in `porttrack.probe.instruments` (same signature, same rules: chain to what was there, never
change what the program does, raise `Unavailable` when the API is not there).

Each emits one `jit-compile` event (`jit`: the kind, `kernel`, `key`, `seconds`) per compile it
sees; the summary counts those after warmup like Triton compiles. What "no JIT after warmup"
covers is exactly JIT_KINDS; JIT_NOT_COVERED names what no instrument here can see.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from porttrack.probe.events import EventLog
from porttrack.probe.instruments import KEY_CHARS, Counts, HookWatch, Regions, Unavailable

JIT_KINDS = {
    "triton": "Triton @jit compiles (knobs.runtime.jit_cache_hook/jit_post_compile_hook, chained)",
    "triton-autotune": "Triton @autotune runs that benchmark configs for a new key (Autotuner.run/_bench)",
    "inductor": "kernels torch.compile's inductor generates (through Triton's post-compile hook)",
    "dynamo": "frames torch.compile compiles (torch._dynamo.utils.counters, recompiles log)",
    "cuda-graph-capture": "a CUDA graph captured (torch.cuda.CUDAGraph.capture_end), e.g. cudagraph trees at a new batch size",
    "nvrtc-jiterator": "torch.cuda.jiterator kernels (NVRTC): a call with code, dtypes or layout not seen before",
    "cupy": "CuPy RawKernel/RawModule/ElementwiseKernel builds (cupy.cuda.compiler, NVRTC or nvcc; a disk-cache load counts too)",
    "cpp-extension": "torch.utils.cpp_extension.load / load_inline builds (cpp_extension._jit_compile)",
    "cutedsl": "CuTeDSL cute.compile calls (cutlass.cute.compile)",
    "tilelang": "TileLang @tilelang.jit compiles (tilelang.jit JITImpl.compile / JITKernel)",
    "vllm-jit-monitor": "what vLLM's own JIT monitor (vllm.utils.jit_monitor) reports after warmup, as a second source",
}
JIT_NOT_COVERED = (
    "NVRTC called from C++ inside ATen (its built-in jiterated ops, e.g. some torch.special functions on CUDA)",
    "NVRTC / nvJitLink / nvcc called directly (cuda-python's cuda.bindings.nvrtc, ctypes, subprocess)",
    "numba.cuda @jit, JAX/XLA and other compilers not named in JIT_KINDS",
    "the driver's JIT of PTX embedded in a binary at module load",
)


def _jit_event(log: EventLog, jit: str, kernel: Any, key: Any, began: float) -> None:
    log.emit("jit-compile", jit=jit, kernel=str(kernel)[:200], key=str(key)[:KEY_CHARS],
             seconds=round(max(0.0, time.perf_counter() - began), 6))


def hook_jiterator(log: EventLog, torch: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """torch.cuda.jiterator compiles a kernel with NVRTC, in C++, the first time it is called with a
    new code string and new argument dtypes / layout (`torch._C._cuda_jiterator_compile_and_launch_kernel`,
    looked up at each call). The probe keys calls the same way and counts a key it has not seen as
    a compile (it may count a C++ cache hit, never miss a compile of a new key)."""
    c = getattr(torch, "_C", None)
    name = "_cuda_jiterator_compile_and_launch_kernel"
    original = getattr(c, name, None)
    if original is None:
        return "not applicable: this torch has no CUDA jiterator (torch._C." + name + ")"
    seen: set[Any] = set()

    def launch(code: str, kernel: str, return_by_ref: bool, num_outputs: int, tensors: Any, kwargs: Any) -> Any:
        key: object
        try:
            key = (hash(code), kernel, bool(return_by_ref), int(num_outputs),
                   tuple((str(getattr(t, "dtype", type(t).__name__)), str(getattr(t, "device", "")),
                          getattr(t, "dim", lambda: -1)(), bool(getattr(t, "is_contiguous", lambda: True)()),
                          int(getattr(t, "data_ptr", lambda: 0)() % 16)) for t in tensors),
                   tuple(sorted((str(k), type(v).__name__) for k, v in dict(kwargs).items())))
        except Exception:  # an argument the probe cannot key: count the call as a compile
            key = object()
        if key in seen:
            return original(code, kernel, return_by_ref, num_outputs, tensors, kwargs)
        seen.add(key)
        began = time.perf_counter()
        try:
            return original(code, kernel, return_by_ref, num_outputs, tensors, kwargs)
        finally:
            _jit_event(log, "nvrtc-jiterator", kernel, key[4] if isinstance(key, tuple) else "?", began)

    setattr(c, name, launch)
    watch.add("jit-nvrtc-jiterator", c, name, launch)
    return "torch._C._cuda_jiterator_compile_and_launch_kernel (new code/dtype/layout key)"


def hook_cupy(log: EventLog, compiler: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """CuPy builds a RawKernel / RawModule / ElementwiseKernel the first time it is used on a device
    (kept in memory after): `cupy.cuda.compiler._compile_module_with_cache` (RawKernel, RawModule)
    and `compile_with_cache` (older entry point), each a module attribute looked up at call time."""
    wrapped = []
    for name in ("_compile_module_with_cache", "compile_with_cache"):
        original = getattr(compiler, name, None)
        if not callable(original):
            continue

        def build(*args: Any, _original: Any = original, **kw: Any) -> Any:
            began = time.perf_counter()
            source = args[0] if args else kw.get("source", "")
            try:
                return _original(*args, **kw)
            finally:
                names = [w for w in str(source).replace("(", " ").split() if w.isidentifier()]
                after = names[names.index("void") + 1] if "void" in names[:-1] else (names[0] if names else "?")
                _jit_event(log, "cupy", after, f"source sha {hash(str(source)) & 0xFFFFFFFF:08x}", began)

        setattr(compiler, name, build)
        watch.add("jit-cupy", compiler, name, build)
        wrapped.append(name)
    if not wrapped:
        raise Unavailable("cupy.cuda.compiler has neither _compile_module_with_cache nor compile_with_cache")
    return "cupy.cuda.compiler." + "/".join(wrapped)


def hook_cpp_extension(log: EventLog, ext: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """`load` and `load_inline` both build through `_jit_compile` (a module global looked up at call
    time): every call is a build or a build-cache check and a dlopen, at run time."""
    original = getattr(ext, "_jit_compile", None)
    if not callable(original):
        raise Unavailable("torch.utils.cpp_extension._jit_compile does not exist: load/load_inline builds cannot be seen")

    def _jit_compile(name: Any, *args: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(name, *args, **kw)
        finally:
            _jit_event(log, "cpp-extension", name, "torch.utils.cpp_extension", began)

    ext._jit_compile = _jit_compile
    watch.add("jit-cpp-extension", ext, "_jit_compile", _jit_compile)
    return "torch.utils.cpp_extension._jit_compile"


class _CuteCompile:
    """Wraps `cutlass.cute.compile`; keeps `cute.compile[options](...)` working, as vLLM's does."""

    def __init__(self, inner: Any, log: EventLog):
        self._inner, self._log = inner, log

    def __getitem__(self, options: Any) -> "_CuteCompile":
        return _CuteCompile(self._inner[options], self._log)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        kernel = args[0] if args else kw.get("function")
        began = time.perf_counter()
        try:
            return self._inner(*args, **kw)
        finally:
            _jit_event(self._log, "cutedsl", getattr(kernel, "__name__", type(kernel).__name__), "cute.compile", began)


def hook_cutedsl(log: EventLog, cute: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    original = getattr(cute, "compile", None)
    if original is None:
        raise Unavailable("cutlass.cute has no compile: CuTeDSL compiles cannot be seen")
    wrapper = _CuteCompile(original, log)
    cute.compile = wrapper
    watch.add("jit-cutedsl", cute, "compile", wrapper)
    return "cutlass.cute.compile"


def hook_tilelang(log: EventLog, jit: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """TileLang compiles in `JITImpl.compile` (a kernel-cache miss of a @tilelang.jit function) and
    builds a `JITKernel` directly for `tilelang.compile` (one not loaded from its database)."""
    impl = getattr(jit, "JITImpl", None)
    kernel_cls = getattr(sys.modules.get("tilelang.jit.kernel"), "JITKernel", None) or getattr(jit, "JITKernel", None)
    if impl is None and kernel_cls is None:
        raise Unavailable("tilelang.jit has neither JITImpl nor JITKernel: TileLang compiles cannot be seen")
    depth = threading.local()
    done = []
    if impl is not None and callable(getattr(impl, "compile", None)):
        original_compile = impl.compile

        def compile(self: Any, *args: Any, **kw: Any) -> Any:
            began = time.perf_counter()
            depth.n = getattr(depth, "n", 0) + 1
            try:
                return original_compile(self, *args, **kw)
            finally:
                depth.n -= 1
                func = getattr(self, "func", None)
                name = getattr(getattr(func, "orig_func", None) or func, "__name__", None) or "?"
                _jit_event(log, "tilelang", name, "JITImpl.compile", began)

        impl.compile = compile
        watch.add("jit-tilelang", impl, "compile", compile)
        done.append("JITImpl.compile")
    if kernel_cls is not None:
        original_init = kernel_cls.__init__

        def __init__(self: Any, *args: Any, **kw: Any) -> Any:
            from_database = bool(args[7] if len(args) > 7 else kw.get("from_database", False))
            if from_database or getattr(depth, "n", 0) > 0:
                return original_init(self, *args, **kw)
            began = time.perf_counter()
            try:
                return original_init(self, *args, **kw)
            finally:
                func = args[0] if args else kw.get("func")
                _jit_event(log, "tilelang", getattr(func, "__name__", None) or type(func).__name__, "JITKernel", began)

        kernel_cls.__init__ = __init__
        watch.add("jit-tilelang", kernel_cls, "__init__", __init__)
        done.append("JITKernel.__init__")
    return "tilelang.jit." + "/".join(done)


def hook_vllm_monitor(log: EventLog, monitor: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """vLLM's JIT monitor logs each compile it sees after its activation (warn mode) on its module's
    logger as "%s %s during inference: %s%s. ..." (backend, event, kernel, detail): read as a second
    source (CuTeDSL and TileLang among them)."""
    import logging

    name = getattr(monitor, "__name__", "vllm.utils.jit_monitor")

    class _Findings(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                args = record.args if isinstance(record.args, tuple) else ()
                if len(args) < 3 or "during inference" not in str(record.msg):
                    return
                log.emit("vllm-jit-monitor", backend=str(args[0])[:100], kernel=str(args[2])[:200],
                         message=record.getMessage()[:1000])
            except Exception:  # never let the probe break the program it watches
                pass

    logging.getLogger(name).addHandler(_Findings(level=logging.WARNING))
    return f"logging handler on {name}"
