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
import contextlib
import importlib.abc
import importlib.util
import os
import sys
import threading
from typing import Any, Callable, Iterator

from porttrack.probe import instruments
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
        log = EventLog(target)
        _state.update(log=log, regions=instruments.Regions(log), installed={}, missing={}, cache_before=None)
        log.emit("probe-start", argv=sys.argv[:8], python=sys.version.split()[0])
        for module in _HOOKS:
            when_imported(module, lambda _mod, name=module: _instrument(name))
        atexit.register(_at_exit)
        return True


def mark(name: str) -> None:
    """A phase boundary, e.g. "warmup-done": compiles after it are compiles after warmup."""
    if not active():
        return
    _state["log"].emit("mark", name=name)
    _snapshot("mark:" + name)


@contextlib.contextmanager
def graphed_region(name: str) -> Iterator[None]:
    """Code expected to run as CUDA graph replays once warm (see `instruments.Regions`)."""
    if not active():
        yield
        return
    regions = _state["regions"]
    regions.enter(name)
    try:
        yield
    finally:
        regions.exit(name)


def _instrument(module: str) -> None:
    """Install the instruments for an imported module; a failure is recorded, never raised."""
    log, regions = _state["log"], _state["regions"]
    mod = sys.modules[module]
    for name, hook in _HOOKS[module]:
        if name in _state["installed"]:
            continue
        try:
            _state["installed"][name] = hook(log, mod, regions)
            _state["missing"].pop(name, None)
        except Exception as exc:  # Unavailable, or an API that changed under us
            _state["missing"][name] = f"{type(exc).__name__}: {exc}"[:300]
    if module == "triton":
        _state["cache_dir"] = instruments.triton_cache_dir(mod)
        _state["cache_before"] = instruments.cache_entries(_state["cache_dir"])
    log.emit("probe-instruments", module=module, instruments=dict(_state["installed"]), missing=dict(_state["missing"]))


# module -> its instruments (name, hook(log, module, regions) -> the API used)
_HOOKS = {
    "triton": [("triton-jit", instruments.hook_triton)],
    "torch": [("cuda-graphs", instruments.hook_cuda_graphs)],
    "torch._dynamo": [("dynamo", instruments.hook_dynamo)],
}


def _snapshot(when: str) -> None:
    """What this process has written to Triton's cache so far (a compile that was not a disk hit),
    and dynamo's counters."""
    log = _state["log"]
    if _state.get("cache_before") is not None:
        now = instruments.cache_entries(_state["cache_dir"])
        written: dict[str, int] = {}
        for entry, kernel in now.items():
            if entry not in _state["cache_before"]:
                written[kernel] = written.get(kernel, 0) + 1
        log.emit("triton-cache-files", when=when, dir=str(_state["cache_dir"]), written=written)
    if "dynamo" in _state["installed"]:
        try:
            log.emit("dynamo-counters", when=when, **instruments.dynamo_counters(sys.modules["torch._dynamo"]))
        except Exception as exc:
            log.emit("probe-error", where="dynamo counters", error=str(exc)[:200])


def _at_exit() -> None:
    with _lock:
        if active():
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
