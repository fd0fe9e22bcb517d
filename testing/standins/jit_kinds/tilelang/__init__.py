"""Stand-in for TileLang 0.1's JIT: `@tilelang.jit` gives a JITImpl whose call compiles on a
kernel-cache miss (`JITImpl.compile`, which builds a `tilelang.jit.kernel.JITKernel`)."""

from tilelang.jit import jit  # noqa: F401
