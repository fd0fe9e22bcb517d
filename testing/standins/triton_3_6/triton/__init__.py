"""Stand-in for Triton 3.6's hook protocol (see ../../README.md). `jit` makes a kernel whose launch
compiles once per key: jit_cache_hook then jit_post_compile_hook with Triton's keyword arguments,
its cache entry written through `runtime.cache.FileCacheManager.put` (an entry folder named by a
hash, files put there, `<kernel>.json` among them) unless the entry exists (a disk hit), and
launch_enter_hook called with a LazyDict-like object on every launch while the knob is set.

`autotune(configs, key)` wraps a kernel in `runtime.autotuner.Autotuner`, whose `run` benchmarks
every config through `_bench` (each config a specialization of its own) the first time it sees a
value of `key`, caches the best in `self.cache`, then launches it: Triton 3.6's own control flow."""

import hashlib
import json
import os
import types

__version__ = "3.6.0-standin"


class HookChain:
    """Triton 3.6's: `knobs.runtime.launch_enter_hook` is one, never None."""

    def __init__(self, reversed=False):
        self.calls = []
        self.reversed = reversed

    def add(self, func):
        if func not in self.calls:
            self.calls.append(func)

    def remove(self, func):
        if func in self.calls:
            self.calls.remove(func)

    def __call__(self, *args, **kwargs):
        for call in self.calls if not self.reversed else reversed(self.calls):
            call(*args, **kwargs)


# STANDIN_TRITON_PLAIN_LAUNCH_HOOK=1: the launch knob as a plain attribute, None unless set (Triton 3.3-3.5)
_plain = os.environ.get("STANDIN_TRITON_PLAIN_LAUNCH_HOOK") == "1"
knobs = types.SimpleNamespace(
    runtime=types.SimpleNamespace(jit_cache_hook=None, jit_post_compile_hook=None,
                                  launch_enter_hook=None if _plain else HookChain()),
    cache=types.SimpleNamespace(dir=None),
    autotuning=types.SimpleNamespace(print=False),
)


class _Lazy:
    def __init__(self, data):
        self.data = data  # as Triton's LazyDict: the name is here from the start

    def get(self):
        return self.data


class JitFunctionInfo:
    def __init__(self, name):
        self.module, self.name, self.jit_function = __name__, name, None


class FileCacheManager:
    def __init__(self, key):
        self.key = key
        self.cache_dir = os.path.join(os.environ["TRITON_CACHE_DIR"], key)
        os.makedirs(self.cache_dir, exist_ok=True)

    def get_file(self, filename):
        path = os.path.join(self.cache_dir, filename)
        return path if os.path.exists(path) else None

    def put(self, data, filename, binary=True):
        path = os.path.join(self.cache_dir, filename)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return path


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
            cache = FileCacheManager(hashlib.sha256(f"{self.name}{key}".encode()).hexdigest()[:16])
            if cache.get_file(f"__grp__{self.name}.json") is None:
                cache.put(b"\x7fELF", self.name + ".cubin")
                cache.put(json.dumps({"name": self.name}), self.name + ".json", binary=False)
                cache.put(json.dumps({"child_paths": {}}), f"__grp__{self.name}.json", binary=False)
            self.compiled.add(key)
            if rt.jit_post_compile_hook is not None:
                rt.jit_post_compile_hook(**kw)
        if rt.launch_enter_hook is not None:
            rt.launch_enter_hook(_Lazy({"name": self.name}))
        return "ran"


class Config:
    def __init__(self, kwargs):
        self.kwargs = kwargs

    def __repr__(self):
        return f"Config({self.kwargs})"


class Autotuner:
    def __init__(self, fn, configs, key):
        self.fn, self.base_fn, self.configs, self.keys, self.cache = fn, fn, configs, key, {}

    def _bench(self, *args, config, **meta):
        self.fn.launch(f"{args[0]},{config}")
        return [float(sum(config.kwargs.values()))] * 3

    def run(self, *args, **kwargs):
        key = tuple(kwargs[k] for k in self.keys)
        if key not in self.cache:
            if len(self.configs) > 1:
                timings = {c: self._bench(*args, config=c) for c in self.configs}
                self.cache[key] = min(timings, key=lambda c: timings[c][0])
            else:
                self.cache[key] = self.configs[0]
        return self.fn.launch(f"{args[0]},{self.cache[key]}")

    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)


runtime = types.SimpleNamespace(autotuner=types.SimpleNamespace(Autotuner=Autotuner),
                                cache=types.SimpleNamespace(FileCacheManager=FileCacheManager))


def jit(fn):
    return _Kernel(fn)


def autotune(configs, key):
    return lambda kernel: Autotuner(kernel, configs, key)
