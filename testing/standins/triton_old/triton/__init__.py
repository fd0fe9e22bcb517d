"""Stand-in for an older Triton: no knobs; `runtime.jit.JITFunction.cache_hook` is called once per
compile with the same keyword arguments; `runtime.autotuner.Autotuner.run/_bench` and
`runtime.cache.FileCacheManager.put` as Triton has had them since 2.x (see ../../README.md)."""

import types

__version__ = "2.3.0-standin"


class JITFunction:
    cache_hook = None

    def __init__(self, fn):
        self.fn = fn
        self.compiled = set()

    def launch(self, key):
        if key not in self.compiled:
            self.compiled.add(key)
            if JITFunction.cache_hook is not None:
                JITFunction.cache_hook(key=key, repr=key, fn=self, compile={}, is_manual_warmup=False, already_compiled=False)


class Autotuner:
    def run(self, *args, **kwargs):
        raise NotImplementedError

    def _bench(self, *args, config, **meta):
        raise NotImplementedError


class FileCacheManager:
    def put(self, data, filename, binary=True):
        raise NotImplementedError


runtime = types.SimpleNamespace(jit=types.SimpleNamespace(JITFunction=JITFunction),
                                autotuner=types.SimpleNamespace(Autotuner=Autotuner),
                                cache=types.SimpleNamespace(FileCacheManager=FileCacheManager))


def jit(fn):
    return JITFunction(fn)
