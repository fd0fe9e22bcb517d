"""Stand-in for vLLM 0.33's JIT monitor (`vllm/utils/jit_monitor.py`, upstream #40137), reduced to
what touches the probe, with the same control flow (read from vllm==0.33.0's source):

- `activate(mode="warn")` runs once per process (later calls return at once), at the end of the
  worker's warmup step (`Worker._maybe_activate_jit_monitor`), before a plugin's wrapper returns;
- it turns on `triton.knobs.autotuning.print`;
- it reads the current `triton.knobs.runtime.jit_post_compile_hook` ONCE, into a closure variable,
  and sets the knob to a new function taking `**kwargs` that first logs (or, in "error" mode,
  raises RuntimeError before calling anything else) and then returns `previous(**kwargs)` when
  there was a previous hook: the probe's hook stays reachable only through that closure cell;
- it wraps `cutlass.cute.compile` in an object holding the original (`_inner`) and TileLang's
  JITImpl.compile / JITKernel.__init__ with functools.wraps, where those import;
- a finding is logged on the logger "vllm.utils.jit_monitor" as
  "%s %s during inference: %s%s. ..." with (backend, event, kernel name, detail), once per message.
"""

import functools
import importlib
import logging

logger = logging.getLogger(__name__)
_active = False
_mode = "warn"
_said = set()

MESSAGE = ("%s %s during inference: %s%s. This causes a latency spike; consider extending warmup "
           "to cover this shape/config.")


def is_active():
    return _active


def activate(*, mode="warn", verbose=False):
    global _active, _mode
    if _active:
        return
    if mode not in ("warn", "error"):
        raise ValueError(f"Unsupported JIT monitor mode: {mode!r}")
    _active, _mode = True, mode
    _setup_triton()
    _setup_cutedsl()
    _setup_tilelang()


def _found(backend, event, name, detail=None):
    args = (backend, event, name, f" ({detail})" if detail else "")
    if _mode == "error":
        raise RuntimeError(MESSAGE % args)
    if MESSAGE % args not in _said:  # vLLM's logger.warning_once
        _said.add(MESSAGE % args)
        logger.warning(MESSAGE, *args)


def _setup_triton():
    try:
        from triton import knobs
    except ImportError:
        return
    if hasattr(knobs, "autotuning"):
        knobs.autotuning.print = True
    existing_hook = knobs.runtime.jit_post_compile_hook

    def _on_jit_compile(**kwargs):
        fn = kwargs.get("fn")
        _found("Triton", "kernel JIT compilation", getattr(fn, "name", "<unknown>"))
        if existing_hook is not None:
            return existing_hook(**kwargs)
        return None

    knobs.runtime.jit_post_compile_hook = _on_jit_compile


class _MonitoredCuteCompile:
    def __init__(self, inner):
        self._inner = inner

    def __getitem__(self, options):
        return _MonitoredCuteCompile(self._inner[options])

    def __call__(self, *args, **kwargs):
        kernel = args[0] if args else kwargs.get("function")
        _found("CuTeDSL", "JIT compilation", getattr(kernel, "__name__", type(kernel).__name__))
        return self._inner(*args, **kwargs)


def _setup_cutedsl():
    try:
        import cutlass.cute as cute
    except Exception:
        return
    cute.compile = _MonitoredCuteCompile(cute.compile)


def _setup_tilelang():
    try:
        jit = importlib.import_module("tilelang.jit")
    except Exception:
        return
    impl = getattr(jit, "JITImpl", None)
    if impl is not None:
        original = impl.compile

        @functools.wraps(original)
        def _compile_with_monitor(self, *args, **kwargs):
            func = getattr(self, "func", None)
            _found("TileLang", "JIT compilation", getattr(func, "__name__", "<unknown>"))
            return original(self, *args, **kwargs)

        impl.compile = _compile_with_monitor
