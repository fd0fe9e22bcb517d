"""Stand-in for Triton 3.6's hook protocol (see ../../README.md). `jit` makes a kernel whose launch
compiles once per key: jit_cache_hook then jit_post_compile_hook with Triton's keyword arguments,
a cache entry written to TRITON_CACHE_DIR unless one exists (a disk hit), and launch_enter_hook
called with a LazyDict-like object on every launch while the knob is set."""

import hashlib
import json
import os
import types

__version__ = "3.6.0-standin"
knobs = types.SimpleNamespace(
    runtime=types.SimpleNamespace(jit_cache_hook=None, jit_post_compile_hook=None, launch_enter_hook=None),
    cache=types.SimpleNamespace(dir=None),
)


class _Lazy:
    def __init__(self, data):
        self._data = data

    def get(self):
        return self._data


class JitFunctionInfo:
    def __init__(self, name):
        self.module, self.name, self.jit_function = __name__, name, None


class _Kernel:
    def __init__(self, fn):
        self.name = fn.__name__
        self.compiled = set()

    def launch(self, key):
        rt = knobs.runtime
        if key not in self.compiled:
            kw = dict(key=key, repr=f"{self.name}[{key}]", fn=JitFunctionInfo(self.name), compile={"device": 0},
                      is_manual_warmup=False, already_compiled=False)
            if rt.jit_cache_hook is not None and rt.jit_cache_hook(**kw):
                return "skipped"
            folder = os.path.join(os.environ["TRITON_CACHE_DIR"], hashlib.sha256(f"{self.name}{key}".encode()).hexdigest()[:16])
            if not os.path.isdir(folder):
                os.makedirs(folder)
                with open(os.path.join(folder, self.name + ".json"), "w") as f:
                    json.dump({"name": self.name}, f)
            self.compiled.add(key)
            if rt.jit_post_compile_hook is not None:
                rt.jit_post_compile_hook(**kw)
        if rt.launch_enter_hook is not None:
            rt.launch_enter_hook(_Lazy({"name": self.name}))
        return "ran"


def jit(fn):
    return _Kernel(fn)
