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
from typing import Any

from porttrack.probe.events import EventLog

KEY_CHARS = 400
FLUSH_S = 10.0


class Unavailable(Exception):
    """An instrument that cannot be installed in this process (the message says why)."""


# -- per-thread counters --------------------------------------------------------------------------

class _Thread:
    """One thread's counters: touched only by that thread, summed by `Counts.snapshot`."""

    __slots__ = ("depth", "region", "replays", "total_replays", "at_entry", "eager", "entries", "unreplayed",
                 "bench_n", "bench_s", "capturing")

    def __init__(self) -> None:
        self.depth = 0  # graphed regions this thread is inside (nested entries count once)
        self.region = ""  # the outermost one's name
        self.replays: dict[int, int] = {}
        self.total_replays = 0
        self.at_entry = 0
        self.eager: dict[str, int] = {}
        self.entries = 0
        self.unreplayed: dict[str, int] = {}
        self.bench_n = 0
        self.bench_s = 0.0
        self.capturing = 0  # CUDA graph captures this thread has begun and not ended


class Counts:
    """The process's frequent events, counted per thread without a lock on the hot path."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._threads: list[_Thread] = []
        self._lock = threading.Lock()
        self.labels: dict[int, str] = {}
        self.cache_written: dict[str, str] = {}  # cache entry (folder key) -> kernel, written by this process
        self.hook_calls: dict[str, int] = {}  # how often the probe's own chained hooks ran ("triton_cache", "triton_post")
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
        self.hook_calls.clear()  # the same dict the hooks hold

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
                    into[str(key)] = into.get(str(key), 0) + n
        written: dict[str, int] = {}
        for kernel in list(self.cache_written.values()):
            written[kernel] = written.get(kernel, 0) + 1
        return {"replays": replays, "eager_triton": eager, "region_entries": {"all": entries},
                "regions_not_replayed": unreplayed, "cache_written": written, "hook_calls": dict(self.hook_calls)}


# -- Triton ------------------------------------------------------------------------------------

def kernel_name(fn: Any) -> str:
    """The kernel's name from what Triton hands a hook: a JitFunctionInfo (3.4+: `.name`), or a
    JITFunction (older: `.__name__` of the wrapped function)."""
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    inner = getattr(fn, "jit_function", None) or getattr(fn, "fn", None) or fn
    return str(getattr(inner, "__name__", None) or getattr(getattr(inner, "fn", None), "__name__", None) or fn)


def reaches(start: Any, target: Any, depth: int = 6, budget: int = 5000) -> bool:
    """Whether calling `start` can reach `target` through what it holds: a function's closure cells,
    `__wrapped__`, defaults and the module globals its code names; a bound method's function and
    object; a partial's function and arguments; an object's own attributes (its `__dict__`, and the
    lists, tuples and dicts in it: a hook chain) and its class's `__call__`. This is how another
    library chains to the previous hook (vLLM's JIT monitor keeps it in a closure cell,
    `existing_hook`). A bounded walk (`depth` hops, `budget` objects: past it the answer is no,
    which fails closed) that calls nothing and reads no attribute through `__getattr__` or a
    property (no side effects in the program)."""
    import functools
    import types

    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(start, 0)]
    while todo:
        obj, level = todo.pop()
        if obj is target:
            return True
        if id(obj) in seen or level >= depth or obj is None or isinstance(obj, (str, bytes, int, float, bool, type, types.ModuleType)):
            continue
        if len(seen) >= budget:
            return False
        seen.add(id(obj))
        nxt: list[Any] = []
        if isinstance(obj, (list, tuple, set, frozenset)):
            nxt.extend(list(obj)[:64])
        elif isinstance(obj, dict):
            nxt.extend(list(obj.values())[:64])
        elif isinstance(obj, types.FunctionType):
            nxt.extend(cell.cell_contents for cell in obj.__closure__ or () if _filled(cell))
            nxt.extend(obj.__defaults__ or ())
            nxt.extend((obj.__kwdefaults__ or {}).values())
            nxt.extend(v for k, v in obj.__dict__.items() if k == "__wrapped__")
            nxt.extend(obj.__globals__[name] for name in obj.__code__.co_names if name in obj.__globals__)
        elif isinstance(obj, types.MethodType):
            nxt.extend((obj.__func__, obj.__self__))
        elif isinstance(obj, functools.partial):
            nxt.extend((obj.func, *obj.args, *obj.keywords.values()))
        else:
            attrs = getattr(obj, "__dict__", None) if not hasattr(type(obj), "__getattr__") else None
            if isinstance(attrs, dict):
                nxt.extend(list(attrs.values())[:64])
            for klass in type(obj).__mro__:
                call = klass.__dict__.get("__call__")
                if call is not None:
                    nxt.append(call)
                    break
        todo.extend((value, level + 1) for value in nxt)
    return False


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


class HookWatch:
    """The hooks the probe set on other objects, checked at each mark and at exit. Another library
    may set the same knob after the probe: vLLM's JIT monitor (activated in every worker at the end
    of its warmup step) sets Triton's post-compile knob to a function that calls the previous hook,
    so the probe's hook is still reached, and that is recorded (`probe-hook-chained`) and read as
    measured. One that replaced it without chaining (torch's NVSHMEM helper, tritonparse) has
    blinded the instrument, which is then reported (`probe-hook-replaced`), never read as 0. The
    decision is whether the probe's own hook is still reached from the knob (`reaches`), not
    whether the knob is the probe's function; `hook_triton` also counts, per compile, that its
    post-compile hook really ran after its cache hook, so a chain that drops the call is caught."""

    def __init__(self) -> None:
        self.set: list[tuple[str, Any, str, Any]] = []  # (instrument, holder, attribute, our function)
        self.reported: set[tuple[str, str]] = set()
        self.chained: set[tuple[str, str, int]] = set()

    def add(self, instrument: str, holder: Any, attribute: str, ours: Any) -> None:
        self.set.append((instrument, holder, attribute, ours))

    def check(self, log: EventLog) -> None:
        for instrument, holder, attribute, ours in list(self.set):
            now = getattr(holder, attribute, None)
            if now is ours or (instrument, attribute) in self.reported or (instrument, attribute, id(now)) in self.chained:
                continue
            what = str(getattr(now, "__module__", "") or "") + ":" + str(getattr(now, "__qualname__", None) or type(now).__name__)
            if reaches(now, ours):
                if (instrument, attribute, id(now)) not in self.chained:
                    self.chained.add((instrument, attribute, id(now)))
                    log.emit("probe-hook-chained", instrument=instrument, hook=attribute, by=what[:200])
                continue
            self.reported.add((instrument, attribute))
            log.emit("probe-hook-replaced", instrument=instrument, hook=attribute, now=what[:200])


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

    calls = counts.hook_calls

    def on_cache(*args: Any, **kw: Any) -> Any:
        key = str(kw.get("key"))[:KEY_CHARS]
        started[(threading.get_ident(), key)] = time.perf_counter()
        result = previous_cache(*args, **kw) if previous_cache else None
        if not result:  # Triton compiles now and calls the post-compile knob after
            calls["triton_cache"] = calls.get("triton_cache", 0) + 1
        return result

    def on_compiled(*args: Any, **kw: Any) -> Any:
        key = str(kw.get("key"))[:KEY_CHARS]
        began = started.pop((threading.get_ident(), key), None)
        if began is not None:
            calls["triton_post"] = calls.get("triton_post", 0) + 1
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
        if before >= 0 and isinstance(cache, dict) and len(cache) != before:
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
        self._local = counts._local
        self._hook = self._launch_hook(chained=False)  # one function, so `is` tells whether the knob is still ours

    def set_launch_knob(self, knob: Any) -> None:
        self._knob_owner = knob
        chain: Any = getattr(knob, "launch_enter_hook", None)
        if callable(getattr(chain, "add", None)) and callable(getattr(chain, "remove", None)):
            self._hook = self._launch_hook(chained=True)
            chain.add(self._hook)
            self._chain = chain
        else:
            self.launch_knob = knob

    def _launch_hook(self, chained: bool) -> Any:
        """The launch hook, a closure over the per-thread state: it runs on every Triton launch in
        the process, so it reads one thread-local and returns unless this thread is in a region
        and not capturing. A launch in a region reads the kernel's name from `LazyDict.data` (set
        from the start; `get()` would run the kernel's launch-metadata functions on every launch)
        and bumps one dict entry. In a HookChain (Triton 3.6) it calls nothing else; on an older
        Triton's plain knob it calls the hook it displaced."""
        local = self._local
        regions = self

        def on_launch(metadata: Any) -> Any:
            try:
                t = local.t
            except AttributeError:
                t = None
            if t is not None and t.depth and not t.capturing:
                try:
                    name = metadata.data["name"]
                except Exception:
                    data = metadata.get() if callable(getattr(metadata, "get", None)) else metadata
                    name = (data.get("name") if isinstance(data, dict) else None) or "?"
                eager = t.eager
                eager[name] = eager.get(name, 0) + 1
            if chained:
                return None  # the chain calls the other hooks itself
            previous = regions._previous
            return previous(metadata) if previous is not None and previous is not on_launch else None

        on_launch.__qualname__ = "Regions.on_launch"
        return on_launch

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
        t = self.counts.mine()
        return t.region if t.depth else None

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


class Region:
    """A `graphed_region(name)`: one object per name, shared by threads (the state is per thread).
    A class, not a generator, and flat: it runs around every replay. Entering reads one
    thread-local and bumps the thread's depth; the outermost exit counts the entry and
    whether a replay happened inside (the replay counter is the thread's running total, so no
    per-graph work is done here). Nested regions count as the outermost one."""

    __slots__ = ("name", "regions", "local", "mine")

    def __init__(self, regions: Regions, name: str):
        self.name, self.regions, self.local, self.mine = name, regions, regions._local, regions.counts.mine

    def __enter__(self) -> None:
        try:
            t = self.local.t
        except AttributeError:
            t = self.mine()
        if t.depth:
            t.depth += 1
            return
        t.depth = 1
        t.region = self.name
        t.at_entry = t.total_replays
        if self.regions.launch_knob is not None:
            self.regions.install()

    def __exit__(self, kind: Any, value: Any, trace: Any) -> None:
        try:
            t = self.local.t
        except AttributeError:
            return
        depth = t.depth
        if depth != 1:
            if depth:
                t.depth = depth - 1
            return
        t.depth = 0
        t.entries += 1
        if t.total_replays == t.at_entry:
            unreplayed = t.unreplayed
            unreplayed[self.name] = unreplayed.get(self.name, 0) + 1
        if self.regions.launch_knob is not None:
            self.regions.uninstall()


# -- torch: CUDA graphs, inductor and dynamo ----------------------------------------------------

def hook_cuda_graphs(log: EventLog, torch: Any, counts: Counts, watch: HookWatch, regions: Regions) -> str:
    graph_cls = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
    if graph_cls is None or not hasattr(graph_cls, "replay"):
        raise Unavailable("torch.cuda.CUDAGraph.replay does not exist in this torch")
    original_replay, original_end = graph_cls.replay, graph_cls.capture_end
    original_begin: Any = getattr(graph_cls, "capture_begin", None)
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

    def capture_begin(self: Any, *args: Any, **kw: Any) -> Any:
        """Launches while this thread captures are not eager: kept as a per-thread count, so the
        launch hook never asks the CUDA runtime (`is_current_stream_capturing` cost ~1 us a launch)."""
        result = original_begin(self, *args, **kw)
        mine().capturing += 1
        return result

    def capture_end(self: Any, *args: Any, **kw: Any) -> Any:
        t = mine()
        try:
            result = original_end(self, *args, **kw)
        finally:
            t.capturing = max(0, t.capturing - 1)
        log.emit("graph-capture", graph=counts.label(self), region=regions.current())
        return result

    graph_cls.replay, graph_cls.capture_end = replay, capture_end
    if original_begin is not None:
        graph_cls.capture_begin = capture_begin
    watch.add("cuda-graphs", graph_cls, "replay", replay)
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
