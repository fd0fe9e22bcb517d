"""Instruments installed inside the process under test: Triton compiles and autotuning, Triton's
cache writes, CUDA graphs, graphed regions, dynamo.

Each `hook_*` takes the event log, the module and the shared `Counts`, and returns the name of the
API it used, or raises `Unavailable` saying why it could not: a probe that cannot see compiles must
say so, never report 0. They chain to any hook already installed (vLLM's own JIT monitor uses the
same Triton knob) and always return what the previous hook returned, so instrumenting never
changes what Triton does (a truthy `jit_cache_hook` result would make Triton skip a compile).

Staying out of the way: rare things (a compile, an autotuning run, a capture) are one event each;
frequent things (graph replays, region entries, launches inside a region, cache writes) are
counted per thread in memory and written as one cumulative `probe-counts` event at each mark, every
`FLUSH_S` seconds when something changed, and at exit. Nothing here scans a folder.

What the hooks can and cannot tell (measured on an H200 with Triton 3.6, see the project's probe
notes): a compile fires `jit_cache_hook` then `jit_post_compile_hook` once per kernel and
specialization key in a process, also when the kernel came from the disk cache; so disk hits are
told apart by the cache entries this process itself wrote (`FileCacheManager.put`), and autotuning
(benchmarking every config for a key it has not seen) by wrapping `Autotuner.run`/`_bench`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

from porttrack.probe.events import EventLog

KEY_CHARS = 400
FLUSH_S = 10.0


class Unavailable(Exception):
    """An instrument that cannot be installed in this process (the message says why)."""


# -- per-thread counters --------------------------------------------------------------------------

class _Thread:
    """One thread's counters: touched only by that thread, summed by `Counts.snapshot`."""

    __slots__ = ("stack", "replays", "total_replays", "at_entry", "eager", "entries", "unreplayed",
                 "bench_n", "bench_s")

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.replays: dict[int, int] = {}
        self.total_replays = 0
        self.at_entry = 0
        self.eager: dict[str, int] = {}
        self.entries = 0
        self.unreplayed: dict[str, int] = {}
        self.bench_n = 0
        self.bench_s = 0.0


class Counts:
    """The process's frequent events, counted per thread without a lock on the hot path."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._threads: list[_Thread] = []
        self._lock = threading.Lock()
        self.labels: dict[int, str] = {}
        self.cache_written: dict[str, str] = {}  # cache entry (folder key) -> kernel, written by this process
        self.version = 0  # bumped by a flush check when something changed

    def mine(self) -> _Thread:
        try:
            return self._local.t
        except AttributeError:
            t = self._local.t = _Thread()
            with self._lock:
                self._threads.append(t)
            return t

    def reset_after_fork(self) -> None:
        """A forked child starts from zero: its parent's counts are the parent's."""
        self._local.__dict__.pop("t", None)  # the forking thread's own; no other thread survives a fork
        self._threads = []
        self._lock = threading.Lock()
        self.cache_written = {}

    def label(self, graph: Any) -> str:
        return self.labels.setdefault(id(graph), f"graph-{len(self.labels) + 1}")

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            threads = list(self._threads)
        replays: dict[str, int] = {}
        eager: dict[str, int] = {}
        entries = 0
        unreplayed: dict[str, int] = {}
        for t in threads:
            for graph, n in list(t.replays.items()):
                name = self.labels.get(graph) or f"graph@{graph:x}"
                replays[name] = replays.get(name, 0) + n
            entries += t.entries
            for into, source in ((eager, t.eager), (unreplayed, t.unreplayed)):
                for key, n in list(source.items()):
                    into[key] = into.get(key, 0) + n
        written: dict[str, int] = {}
        for kernel in list(self.cache_written.values()):
            written[kernel] = written.get(kernel, 0) + 1
        return {"replays": replays, "eager_triton": eager, "region_entries": {"all": entries},
                "regions_not_replayed": unreplayed, "cache_written": written}


# -- Triton ------------------------------------------------------------------------------------

def kernel_name(fn: Any) -> str:
    """The kernel's name from what Triton hands a hook: a JitFunctionInfo (3.4+: `.name`), or a
    JITFunction (older: `.__name__` of the wrapped function)."""
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    inner = getattr(fn, "jit_function", None) or getattr(fn, "fn", None) or fn
    return str(getattr(inner, "__name__", None) or getattr(getattr(inner, "fn", None), "__name__", None) or fn)


class HookWatch:
    """The hooks the probe set on other objects, checked at each mark and at exit: another library
    that replaced one without chaining (torch's NVSHMEM helper and tritonparse set Triton's
    post-compile knob) has blinded the instrument, which is then reported, never read as 0."""

    def __init__(self) -> None:
        self.set: list[tuple[str, Any, str, Any]] = []  # (instrument, holder, attribute, our function)
        self.reported: set[tuple[str, str]] = set()

    def add(self, instrument: str, holder: Any, attribute: str, ours: Any) -> None:
        self.set.append((instrument, holder, attribute, ours))

    def check(self, log: EventLog) -> None:
        for instrument, holder, attribute, ours in list(self.set):
            now = getattr(holder, attribute, None)
            if now is not ours and (instrument, attribute) not in self.reported:
                self.reported.add((instrument, attribute))
                what = getattr(now, "__qualname__", None) or type(now).__name__
                log.emit("probe-hook-replaced", instrument=instrument, hook=attribute, now=str(what)[:200])


def hook_triton(log: EventLog, triton: Any, counts: Counts, watch: HookWatch, regions: "Regions") -> str:
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
        watch.add("triton-jit", holder, cache_attr, on_compiled)
    else:
        setattr(holder, cache_attr, on_cache)
        setattr(holder, post_attr, on_compiled)
        watch.add("triton-jit", holder, post_attr, on_compiled)
    if runtime is not None and hasattr(runtime, "launch_enter_hook"):
        regions.set_launch_knob(runtime)
    return api


def hook_autotuner(log: EventLog, triton: Any, counts: Counts, watch: HookWatch, regions: "Regions") -> str:
    """An autotuned kernel called with a key it has not seen benchmarks every config: seconds of
    stall, and often no compile at all (the configs' specializations may exist). Counted like a
    compile: one `triton-autotune` event with the kernel, the key and how many configs ran."""
    tuner = getattr(getattr(getattr(triton, "runtime", None), "autotuner", None), "Autotuner", None)
    if tuner is None or not callable(getattr(tuner, "run", None)) or not callable(getattr(tuner, "_bench", None)):
        raise Unavailable(f"Triton {getattr(triton, '__version__', '?')} has no runtime.autotuner.Autotuner.run/_bench: "
                          "autotuning cannot be seen")
    original_run, original_bench = tuner.run, tuner._bench

    def _bench(self: Any, *args: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return original_bench(self, *args, **kw)
        finally:
            t = counts.mine()
            t.bench_n += 1
            t.bench_s += time.perf_counter() - began

    def run(self: Any, *args: Any, **kw: Any) -> Any:
        cache = getattr(self, "cache", None)
        before = len(cache) if isinstance(cache, dict) else -1
        result = original_run(self, *args, **kw)
        if before >= 0 and len(cache) != before:
            _tuned(self, list(cache)[before:])
        return result

    def _tuned(self: Any, keys: list[Any]) -> None:
        t = counts.mine()
        configs, seconds = t.bench_n, t.bench_s
        t.bench_n, t.bench_s = 0, 0.0
        base = getattr(self, "base_fn", None)
        name = getattr(base, "__name__", None) or kernel_name(getattr(self, "fn", None))
        for key in keys:
            log.emit("triton-autotune", kernel=str(name), key=str(key)[:KEY_CHARS], configs=configs,
                     seconds=round(seconds, 6))

    tuner.run, tuner._bench = run, _bench
    watch.add("triton-autotune", tuner, "run", run)
    return "triton.runtime.autotuner.Autotuner.run/_bench"


def hook_cache_writes(log: EventLog, triton: Any, counts: Counts, watch: HookWatch, regions: "Regions") -> str:
    """The Triton cache entries this process wrote (a compile that was not a disk hit): each
    `FileCacheManager.put` of a kernel's `<name>.json` is one entry, told by its folder key. Other
    processes sharing the cache folder are not counted, and nothing scans the folder."""
    cache_mod = getattr(getattr(triton, "runtime", None), "cache", None)
    manager = getattr(cache_mod, "FileCacheManager", None)
    if manager is None or not callable(getattr(manager, "put", None)):
        raise Unavailable("triton.runtime.cache.FileCacheManager.put does not exist: cache writes cannot be seen")
    original_put = manager.put

    def put(self: Any, data: Any, filename: str, *args: Any, **kw: Any) -> Any:
        result = original_put(self, data, filename, *args, **kw)
        name = str(filename)
        if name.endswith(".json") and not name.startswith("__grp__") and not name.endswith(".autotune.json"):
            counts.cache_written[str(getattr(self, "key", result))] = name[:-5]
        return result

    manager.put = put
    watch.add("triton-cache-writes", manager, "put", put)
    return "triton.runtime.cache.FileCacheManager.put"


# -- regions where a graph replay is expected ----------------------------------------------------

class Regions:
    """`graphed_region(name)`: code that should run as a CUDA graph replay once warm. Counted per
    thread: entries, entries that replayed no graph at all (the step ran eagerly, whatever launched
    its kernels), and Triton launches outside a capture.

    Triton's launch hook: on Triton 3.6, `knobs.runtime.launch_enter_hook` is a HookChain that is
    never None (Triton builds launch metadata for every launch anyway), so the probe adds its hook
    to the chain once and it returns at once outside a region. On an older Triton whose knob is a
    plain attribute (set, Triton builds metadata for every launch), the hook is set only while
    some thread is inside a region: installed by the first thread in, restored by the last one out,
    never chained to itself."""

    def __init__(self, log: EventLog, counts: Counts, watch: HookWatch):
        self.log, self.counts, self.watch = log, counts, watch
        self.launch_knob: Any = None
        self._knob_owner: Any = None
        self._chain: Any = None
        self._lock = threading.Lock()
        self._inside = 0
        self._previous: Any = None
        self._capturing: Callable[[], bool] = lambda: False
        self._hook = self._on_launch  # one bound method, so `is` tells whether the knob is still ours
        self._local = counts._local

    def set_launch_knob(self, knob: Any) -> None:
        self._knob_owner = knob
        chain = getattr(knob, "launch_enter_hook", None)
        if callable(getattr(chain, "add", None)) and callable(getattr(chain, "remove", None)):
            chain.add(self._hook)
            self._chain = chain
        else:
            self.launch_knob = knob

    def check(self) -> None:
        """At each mark and at exit: is the probe's launch hook still where it put it?"""
        if self._chain is not None:
            holder = getattr(self._chain, "calls", None)
            knob_now = getattr(self._knob_owner, "launch_enter_hook", self._chain)
            if knob_now is not self._chain or (isinstance(holder, list) and self._hook not in holder):
                if ("region-launches", "launch_enter_hook") not in self.watch.reported:
                    self.watch.reported.add(("region-launches", "launch_enter_hook"))
                    self.log.emit("probe-hook-replaced", instrument="region-launches", hook="launch_enter_hook",
                                  now=type(knob_now).__name__)

    def current(self) -> str | None:
        stack = self.counts.mine().stack
        return stack[-1] if stack else None

    def install(self) -> None:
        """The first thread into a region sets the plain launch knob (older Triton only)."""
        with self._lock:
            self._inside += 1
            if self._inside == 1:
                previous = self.launch_knob.launch_enter_hook
                self._previous = None if previous is self._hook else previous
                self.launch_knob.launch_enter_hook = self._hook

    def uninstall(self) -> None:
        """The last thread out restores it, unless another library replaced it meanwhile."""
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                if self.launch_knob.launch_enter_hook is self._hook:
                    self.launch_knob.launch_enter_hook = self._previous
                else:
                    self.log.emit("probe-hook-replaced", instrument="region-launches", hook="launch_enter_hook",
                                  now=str(getattr(self.launch_knob.launch_enter_hook, "__qualname__", "?"))[:200])
                self._previous = None

    def _on_launch(self, metadata: Any) -> Any:
        try:
            t = self._local.t
        except AttributeError:
            t = None
        if t is not None and t.stack and not self._capturing():
            data = metadata.get() if hasattr(metadata, "get") and callable(metadata.get) else metadata
            name = str((data.get("name") if isinstance(data, dict) else None) or "?")
            t.eager[name] = t.eager.get(name, 0) + 1
        if self._chain is not None:
            return None  # the chain calls the other hooks itself
        previous = self._previous
        return previous(metadata) if previous is not None and previous is not self._hook else None


class Region:
    """A `graphed_region(name)`: one object per name, shared by threads (the state is per thread).
    A class, not a generator, and flat: it runs around every replay."""

    __slots__ = ("name", "regions", "local", "counts")

    def __init__(self, regions: Regions, name: str):
        self.name, self.regions, self.local, self.counts = name, regions, regions._local, regions.counts

    def __enter__(self) -> None:
        try:
            t = self.local.t
        except AttributeError:
            t = self.counts.mine()
        stack = t.stack
        stack.append(self.name)
        if len(stack) == 1:
            t.at_entry = t.total_replays
            if self.regions.launch_knob is not None:
                self.regions.install()

    def __exit__(self, *exc: Any) -> None:
        try:
            t = self.local.t
        except AttributeError:
            return
        stack = t.stack
        if not stack:
            return
        stack.pop()
        if stack:
            return
        t.entries += 1
        if t.total_replays == t.at_entry:
            t.unreplayed[self.name] = t.unreplayed.get(self.name, 0) + 1
        if self.regions.launch_knob is not None:
            self.regions.uninstall()


# -- torch: CUDA graphs, inductor and dynamo ----------------------------------------------------

def hook_cuda_graphs(log: EventLog, torch: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    graph_cls = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
    if graph_cls is None or not hasattr(graph_cls, "replay"):
        raise Unavailable("torch.cuda.CUDAGraph.replay does not exist in this torch")
    original_replay, original_end = graph_cls.replay, graph_cls.capture_end
    local, mine = counts._local, counts.mine

    def replay(self: Any, *args: Any, **kw: Any) -> Any:
        try:
            t = local.t
        except AttributeError:
            t = mine()
        t.total_replays += 1
        r = t.replays
        r[id(self)] = r.get(id(self), 0) + 1
        return original_replay(self, *args, **kw)

    def capture_end(self: Any, *args: Any, **kw: Any) -> Any:
        result = original_end(self, *args, **kw)
        log.emit("graph-capture", graph=counts.label(self), region=regions.current())
        return result

    graph_cls.replay, graph_cls.capture_end = replay, capture_end
    watch.add("cuda-graphs", graph_cls, "replay", replay)
    is_capturing = getattr(torch.cuda, "is_current_stream_capturing", None)
    if is_capturing is not None:
        regions._capturing = lambda: bool(is_capturing())
    return "torch.cuda.CUDAGraph.replay/capture_end"


INDUCTOR_ENV = "TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK"


def hook_inductor(log: EventLog, config: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """Inductor calls Triton's post-compile hook for the kernels it generates only when told to
    (the probe sets TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK=1 before torch loads; this sets the
    config too, for a torch loaded before the probe)."""
    if not hasattr(config, "run_jit_post_compile_hook"):
        raise Unavailable("torch._inductor.config has no run_jit_post_compile_hook: inductor's Triton kernels "
                          "are seen only through dynamo's counters")
    config.run_jit_post_compile_hook = True
    return "torch._inductor.config.run_jit_post_compile_hook"


def hook_dynamo(log: EventLog, dynamo: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    """Recompile counts from `torch._dynamo.utils.counters` (a frame dynamo had to compile bumps
    `frames.total`, whatever the logging settings), snapshot at each mark and at exit; reasons,
    where dynamo's `recompiles` log artifact is on, from a handler on it."""
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
    if not os.environ.get("TORCH_LOGS"):  # never override the program's own logging settings
        try:
            sys.modules["torch"]._logging.set_logs(recompiles=True)
        except Exception as exc:  # an older torch: counts only
            log.emit("probe-error", where="dynamo recompile reasons", error=str(exc)[:200])
    return "torch._dynamo.utils.counters (+ the recompiles log artifact for reasons)"


def dynamo_counters(dynamo: Any) -> dict[str, int]:
    counters = dynamo.utils.counters
    return {"frames_total": int(counters["frames"]["total"]), "frames_ok": int(counters["frames"]["ok"]),
            "unique_graphs": int(counters["stats"]["unique_graphs"])}
