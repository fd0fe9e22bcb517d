"""`porttrack.probe`: instruments inside the process under test, for a gate's assertions.

A gate asks "no JIT compile after warmup", "the decode step replays a CUDA graph", "cold and warm
measured separately". Those are facts about the engine's own process, not its logs, so this
package runs there and writes an event log (`porttrack.probe.events`, path from
`PORTTRACK_PROBE`); the job turns the log into results fields with `porttrack.probe.summary`.

Use it from any program::

    from porttrack import probe
    probe.install()                      # inert unless PORTTRACK_PROBE is set; idempotent
    ...warm up every shape...
    probe.mark("warmup-done")
    with probe.graphed_region("decode"):  # launches here should be graph replays once warm
        step()

vLLM loads it by itself in the engine and in every worker through the `vllm.general_plugins`
entry point (`porttrack.probe.vllm_plugin`), which also marks "warmup-done" when the worker's
warmup/compile step returns.

It imports torch or Triton only when the process already has them: `install()` instruments what is
loaded and watches imports for the rest, so a process that never uses Triton pays nothing for it.
An instrument that cannot be installed is recorded as missing with the reason, and the summary
then reports that assertion as not measurable (never as 0).
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import os
import sys
import threading
from typing import Any, Callable

from porttrack.probe import events, instruments, jit_kinds
from porttrack.probe.events import ENV, EventLog

WARMUP_DONE = "warmup-done"

_lock = threading.RLock()
_state: dict[str, Any] = {}


def active() -> bool:
    return "log" in _state


def install(path: str | None = None) -> bool:
    """Start probing this process if PORTTRACK_PROBE (or `path`) names an event log. Returns
    whether the probe is active. Safe to call any number of times, from any thread."""
    with _lock:
        if active():
            return True
        target = path or os.environ.get(ENV)
        if not target:
            return False
        # inductor's generated Triton kernels reach Triton's post-compile hook only when this is set
        # before torch._inductor.config loads (`instruments.hook_inductor` sets the config otherwise)
        os.environ[instruments.INDUCTOR_ENV] = "1"
        log = EventLog(target)
        counts, watch = instruments.Counts(), instruments.HookWatch()
        _state.update(log=log, counts=counts, watch=watch, regions=instruments.Regions(log, counts, watch),
                      installed={}, missing={}, flushed=None)
        log.emit("probe-start", argv=sys.argv[:8], python=sys.version.split()[0])
        for module in _HOOKS:
            def on_import(_mod: Any, name: str = module) -> None:
                _instrument(name)

            when_imported(module, on_import)
        atexit.register(_at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)
        _start_flusher()
        return True


def mark(name: str) -> None:
    """A phase boundary, e.g. "warmup-done": compiles after it are compiles after warmup. O(1): it
    writes the mark and the counters as they stand (no folder is scanned)."""
    if not active():
        return
    _state["log"].emit("mark", name=name)
    _snapshot("mark:" + name)


class _Inert:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_INERT = _Inert()


def graphed_region(name: str) -> Any:
    """A context manager: code expected to run as CUDA graph replays once warm (see
    `instruments.Regions`). A class, not a generator, so it costs a replay next to nothing."""
    region = _region_by_name.get(name)
    if region is not None:
        return region
    if "log" not in _state:
        return _INERT
    return _region_by_name.setdefault(name, instruments.Region(_state["regions"], name))


_region_by_name: dict[str, Any] = {}


def _instrument(module: str) -> None:
    """Install the instruments for an imported module; a failure is recorded, never raised."""
    log = _state["log"]
    mod = sys.modules[module]
    with _lock:
        for name, hook in _HOOKS[module]:
            if name in _state["installed"]:
                continue
            try:
                _state["installed"][name] = hook(log, mod, _state["counts"], _state["watch"], _state["regions"])
                _state["missing"].pop(name, None)
            except Exception as exc:  # Unavailable, or an API that changed under us
                _state["missing"][name] = f"{type(exc).__name__}: {exc}"[:300]
    log.emit("probe-instruments", module=module, instruments=dict(_state["installed"]), missing=dict(_state["missing"]))


# module -> its instruments (name, hook(log, module, counts, watch, regions) -> the API used)
_HOOKS: dict[str, list[tuple[str, Callable[..., Any]]]] = {
    "triton": [("triton-jit", instruments.hook_triton), ("triton-autotune", instruments.hook_autotuner),
               ("triton-cache-writes", instruments.hook_cache_writes)],
    "torch": [("cuda-graphs", instruments.hook_cuda_graphs), ("jit-nvrtc-jiterator", jit_kinds.hook_jiterator)],
    "torch._dynamo": [("dynamo", instruments.hook_dynamo)],
    "torch._inductor.config": [("inductor-kernels", instruments.hook_inductor)],
    "torch.utils.cpp_extension": [("jit-cpp-extension", jit_kinds.hook_cpp_extension)],
    "cupy.cuda.compiler": [("jit-cupy", jit_kinds.hook_cupy)],
    "cutlass.cute": [("jit-cutedsl", jit_kinds.hook_cutedsl)],
    "tilelang.jit": [("jit-tilelang", jit_kinds.hook_tilelang)],
    "vllm.utils.jit_monitor": [("vllm-jit-monitor", jit_kinds.hook_vllm_monitor)],
}


def _snapshot(when: str) -> None:
    """The cumulative counters (`probe-counts`): graph replays, graphed regions, Triton launches
    in them, cache entries this process wrote, dynamo's counters; and whether another library
    replaced one of the probe's hooks. Bounded by the number of graphs and kernels, not by time."""
    log, counts = _state["log"], _state["counts"]
    _state["watch"].check(log)
    _state["regions"].check()
    fields = counts.snapshot()
    with log._lock:
        fields["emitted"] = dict(log.emitted)  # every line this process wrote so far: a lost line shows
    if "dynamo" in _state["installed"]:
        try:
            fields["dynamo"] = instruments.dynamo_counters(sys.modules["torch._dynamo"])
        except Exception as exc:
            log.emit("probe-error", where="dynamo counters", error=str(exc)[:200])
    if when == "periodic":
        if fields == _state["flushed"]:
            return
    _state["flushed"] = fields
    with _lock:
        _state["snap"] = snap = _state.get("snap", 0) + 1
    events.emit_counts(log, snap, when, fields)


def _flush_loop(stop: threading.Event) -> None:
    while not stop.wait(instruments.FLUSH_S):
        try:
            if active():
                _snapshot("periodic")
        except Exception:  # a probe never breaks the program; the exit snapshot still comes
            pass


def _start_flusher() -> None:
    """Counts are kept in memory; a process killed before exit still leaves its counts as of at
    most FLUSH_S ago (a daemon thread writes them only when they changed)."""
    stop = threading.Event()
    threading.Thread(target=_flush_loop, args=(stop,), name="porttrack-probe-flush", daemon=True).start()
    _state["stop"] = stop


def _after_fork() -> None:
    if active():
        _state["counts"].reset_after_fork()
        _state["log"]._lock = threading.Lock()  # the parent's flusher may have held it at fork
        _state["log"].emitted = {}
        _state["flushed"] = None
        _state["snap"] = 0
        _state["log"].emit("probe-start", argv=sys.argv[:8], python=sys.version.split()[0], forked=True)
        _start_flusher()


def _at_exit() -> None:
    with _lock:
        if active():
            _state["stop"].set()
            _snapshot("exit")
            _state["log"].emit("probe-exit")


def when_imported(name: str, callback: "Callable[[Any], None]") -> None:
    """Call `callback(module)` once `name` is imported (now, if it already is). The probe uses it
    to instrument torch and Triton without importing them itself."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    sys.meta_path.insert(0, _Watcher(name, callback))


class _Watcher(importlib.abc.MetaPathFinder):
    """Runs a callback right after the program imports one module."""

    def __init__(self, name: str, callback: "Callable[[Any], None]"):
        self.name, self.callback = name, callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # let the normal finders load it
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, callback = spec.loader, self.callback
        original_exec = loader.exec_module

        def exec_module(module: Any) -> None:
            original_exec(module)
            try:
                callback(module)
            except Exception as exc:  # the probe never breaks the program's import
                if active():
                    _state["log"].emit("probe-error", where=f"after importing {fullname}", error=str(exc)[:200])

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
