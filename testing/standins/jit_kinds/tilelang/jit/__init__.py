from tilelang.jit.kernel import JITKernel


class JITImpl:
    def __init__(self, func):
        self.func, self._kernel_cache = func, {}

    def compile(self, *args, **kwargs):
        return JITKernel(self.func)

    def __call__(self, *args):
        key = tuple(type(a).__name__ for a in args)
        if key not in self._kernel_cache:
            self._kernel_cache[key] = self.compile(*args)
        return self._kernel_cache[key]


def jit(func):
    return JITImpl(func)
