"""Stand-in for CuPy's RawKernel build path (see ../../README.md): the kernel is built on its
first call per device through `cupy.cuda.compiler._compile_module_with_cache` (a module
attribute looked up at call time, as cupy/_core/raw.pyx does), then kept in memory."""

from cupy.cuda import compiler


class RawKernel:
    def __init__(self, code, name, options=()):
        self.code, self.name, self.options, self._module = code, name, options, None

    def __call__(self, grid, block, args):
        if self._module is None:
            self._module = compiler._compile_module_with_cache(self.code, self.options)
        return "launched"
