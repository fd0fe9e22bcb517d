"""Instruments installed inside the process under test: Triton compiles, CUDA graphs, dynamo.

Each `hook_*` takes the event log and returns the name of the API it used, or raises
`Unavailable` saying why it could not: a probe that cannot see compiles must say so, never report
0. They chain to any hook already installed (vLLM's own JIT monitor uses the same Triton knob) and
always return what the previous hook returned, so instrumenting never changes what Triton does (a
truthy `jit_cache_hook` result would make Triton skip a compile).

What the hooks can and cannot tell (measured on an H200 with Triton 3.6, see the project's probe
notes): a compile fires `jit_cache_hook` then `jit_post_compile_hook` once per kernel and
specialization key in a process; across processes sharing `TRITON_CACHE_DIR` they fire the same way
for a disk-cache hit, so disk hits are told apart by the cache entries a process writes
(`cache_entries`), not by the hooks.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from porttrack.probe.events import EventLog

KEY_CHARS = 400


class Unavailable(Exception):
    """An instrument that cannot be installed in this process (the message says why)."""


# -- Triton ------------------------------------------------------------------------------------

def kernel_name(fn: Any) -> str:
    """The kernel's name from what Triton hands a hook: a JitFunctionInfo (3.4+: `.name`), or a
    JITFunction (older: `.__name__` of the wrapped function)."""
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    inner = getattr(fn, "jit_function", None) or getattr(fn, "fn", None) or fn
    return str(getattr(inner, "__name__", None) or getattr(getattr(inner, "fn", None), "__name__", None) or fn)


def hook_triton(log: EventLog, triton: Any, regions: "Regions") -> str:
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is not None and hasattr(runtime, "jit_post_compile_hook") and hasattr(runtime, "jit_cache_hook"):
        holder, api = runtime, "triton.knobs.runtime.jit_cache_hook/jit_post_compile_hook"
        cache_attr, post_attr = "jit_cache_hook", "jit_post_compile_hook"
    else:
        jit = getattr(getattr(getattr(triton, "runtime", None), "jit", None), "JITFunction", None)
        if jit is None or not hasattr(jit, "cache_hook"):
            raise Unavailable(f"Triton {getattr(triton, '__version__', '?')} has neither knobs.runtime.jit_post_compile_hook "
                              "nor JITFunction.cache_hook: compiles cannot be seen")
        holder, api = jit, "triton.runtime.jit.JITFunction.cache_hook/compiled_hook"
        cache_attr, post_attr = "cache_hook", "compiled_hook" if hasattr(jit, "compiled_hook") else "cache_hook"
    started: dict[tuple[int, str], float] = {}
    previous_cache, previous_post = getattr(holder, cache_attr), getattr(holder, post_attr)

    def on_cache(*args: Any, **kw: Any) -> Any:
        key = str(kw.get("key"))[:KEY_CHARS]
        started[(threading.get_ident(), key)] = time.perf_counter()
        log.emit("triton-compile-start", kernel=kernel_name(kw.get("fn")), key=key)
        return previous_cache(*args, **kw) if previous_cache else None

    def on_compiled(*args: Any, **kw: Any) -> Any:
        key = str(kw.get("key"))[:KEY_CHARS]
        began = started.pop((threading.get_ident(), key), None)
        log.emit("triton-compile", kernel=kernel_name(kw.get("fn")), key=key,
                 seconds=None if began is None else round(time.perf_counter() - began, 6),
                 manual_warmup=bool(kw.get("is_manual_warmup")))
        return previous_post(*args, **kw) if previous_post else None

    if cache_attr == post_attr:  # the oldest API: one hook, called once per compile
        setattr(holder, cache_attr, on_compiled)
    else:
        setattr(holder, cache_attr, on_cache)
        setattr(holder, post_attr, on_compiled)
    if runtime is not None and hasattr(runtime, "launch_enter_hook"):
        regions.launch_knob = runtime
    return api


def triton_cache_dir(triton: Any | None) -> Path:
    """Where Triton keeps compiled kernels in this process (TRITON_CACHE_DIR, else its default)."""
    chosen = os.environ.get("TRITON_CACHE_DIR")
    if not chosen and triton is not None:
        chosen = getattr(getattr(getattr(triton, "knobs", None), "cache", None), "dir", None)
    return Path(chosen or Path.home() / ".triton" / "cache")


def cache_entries(folder: Path) -> dict[str, str]:
    """entry folder -> kernel name, for every compiled kernel in a Triton cache folder (each entry
    is a hash-named folder holding `<kernel>.json` beside the binary)."""
    found: dict[str, str] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        if not entry.is_dir():
            continue
        names = [f[:-5] for f in os.listdir(entry.path) if f.endswith(".json") and not f.startswith("__grp__")]
        found[entry.name] = names[0] if names else "?"
    return found


# -- regions where a graph replay is expected ----------------------------------------------------

class Regions:
    """`graphed_region(name)`: code that should run as a CUDA graph replay once warm. Inside one,
    each Triton launch is recorded with whether a capture was under way, so a replay that fell
    back to eager launches is seen. The launch knob is set only inside regions: Triton builds
    launch metadata for every launch while it is set."""

    def __init__(self, log: EventLog):
        self.log = log
        self.launch_knob: Any = None
        self._local = threading.local()
        self._capturing: Callable[[], bool] = lambda: False

    def current(self) -> str | None:
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else None

    def enter(self, name: str) -> None:
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append(name)
        self.log.emit("region-enter", region=name)
        if self.launch_knob is not None and len(stack) == 1:
            self._local.previous = self.launch_knob.launch_enter_hook
            self.launch_knob.launch_enter_hook = self._on_launch

    def exit(self, name: str) -> None:
        stack = getattr(self._local, "stack", [])
        if stack and stack[-1] == name:
            stack.pop()
        self.log.emit("region-exit", region=name)
        if self.launch_knob is not None and not stack:
            self.launch_knob.launch_enter_hook = getattr(self._local, "previous", None)

    def _on_launch(self, metadata: Any) -> Any:
        data = metadata.get() if hasattr(metadata, "get") and callable(metadata.get) else metadata
        name = data.get("name") if isinstance(data, dict) else None
        self.log.emit("triton-launch", kernel=str(name or "?"), region=self.current(), capturing=self._capturing())
        previous = getattr(self._local, "previous", None)
        return previous(metadata) if previous else None


# -- torch: CUDA graphs and dynamo --------------------------------------------------------------

def hook_cuda_graphs(log: EventLog, torch: Any, regions: Regions) -> str:
    graph_cls = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
    if graph_cls is None or not hasattr(graph_cls, "replay"):
        raise Unavailable("torch.cuda.CUDAGraph.replay does not exist in this torch")
    labels: dict[int, str] = {}

    def label(graph: Any) -> str:
        return labels.setdefault(id(graph), f"graph-{len(labels) + 1}")

    original_replay, original_end = graph_cls.replay, graph_cls.capture_end

    def replay(self: Any, *args: Any, **kw: Any) -> Any:
        log.emit("graph-replay", graph=label(self), region=regions.current())
        return original_replay(self, *args, **kw)

    def capture_end(self: Any, *args: Any, **kw: Any) -> Any:
        result = original_end(self, *args, **kw)
        log.emit("graph-capture", graph=label(self), region=regions.current())
        return result

    graph_cls.replay, graph_cls.capture_end = replay, capture_end
    is_capturing = getattr(torch.cuda, "is_current_stream_capturing", None)
    if is_capturing is not None:
        regions._capturing = lambda: bool(is_capturing())
    return "torch.cuda.CUDAGraph.replay/capture_end"


def hook_dynamo(log: EventLog, dynamo: Any, regions: Regions) -> str:
    """Recompile reasons from dynamo's `recompiles` log artifact; frame and graph counts from
    `torch._dynamo.utils.counters`, snapshot at each mark and at exit (`dynamo_counters`)."""
    import logging

    if not hasattr(getattr(dynamo, "utils", None), "counters"):
        raise Unavailable("torch._dynamo.utils.counters does not exist in this torch")

    class _Recompiles(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                log.emit("dynamo-recompile", reason=record.getMessage()[:1000])
            except Exception:  # never let the probe break the program it watches
                pass

    logging.getLogger("torch._dynamo.guards.__recompiles").addHandler(_Recompiles())
    try:
        sys.modules["torch"]._logging.set_logs(recompiles=True)
    except Exception as exc:  # an older torch: counts only
        log.emit("probe-error", where="dynamo recompile reasons", error=str(exc)[:200])
    return "torch._dynamo.utils.counters + the recompiles log artifact"


def dynamo_counters(dynamo: Any) -> dict[str, int]:
    counters = dynamo.utils.counters
    return {"frames_total": int(counters["frames"]["total"]), "frames_ok": int(counters["frames"]["ok"]),
            "unique_graphs": int(counters["stats"]["unique_graphs"])}
