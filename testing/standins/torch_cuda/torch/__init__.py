"""Stand-in for torch's CUDA-graph and dynamo surface that the probe hooks (see ../../README.md)."""

import os
import types

_capturing = [False]


class CUDAGraph:
    def capture_begin(self):
        _capturing[0] = True

    def capture_end(self):
        _capturing[0] = False

    def replay(self):
        return "replayed"


def _device_properties(_index=0):
    """The device porttrack.runner.results.detect_environment reads (STANDIN_GPU_ARCH: sm_121 or gfx1151)."""
    arch = os.environ.get("STANDIN_GPU_ARCH", "sm_121")
    if arch.startswith("gfx"):
        return types.SimpleNamespace(name="AMD Radeon 8060S (stand-in)", major=11, minor=5, gcnArchName=arch + ":sramecc-:xnack-")
    # torch 2.11 on CUDA fills gcnArchName with the GPU's name (seen on an H200)
    return types.SimpleNamespace(name="NVIDIA GB10 (stand-in)", major=int(arch[3:-1]), minor=int(arch[-1]), gcnArchName="NVIDIA GB10 (stand-in)")


__version__ = "2.9.0+standin"
_on_rocm = os.environ.get("STANDIN_GPU_ARCH", "").startswith("gfx")
version = types.SimpleNamespace(cuda=None if _on_rocm else "13.0", hip="7.0.2" if _on_rocm else None)
cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph, is_current_stream_capturing=lambda: _capturing[0],
                             is_available=lambda: True, get_device_properties=_device_properties)
_recompiles_logged = ["recompiles" in os.environ.get("TORCH_LOGS", "")]


def _set_logs(**kw):
    """As torch's: every artifact back to its default except those named; ignored (with a
    warning in torch) when TORCH_LOGS is set."""
    if "TORCH_LOGS" in os.environ:
        return
    _recompiles_logged[0] = bool(kw.get("recompiles"))


_logging = types.SimpleNamespace(set_logs=_set_logs)


# torch.cuda.jiterator's call path (torch 2.11-2.14): `_JittedFunction.__call__` looks up
# `torch._C._cuda_jiterator_compile_and_launch_kernel` at each call, which compiles with NVRTC, in
# C++, the first time it sees a code string with new dtypes, then launches
_jiterator_compiled = set()


def _cuda_jiterator_compile_and_launch_kernel(code_string, kernel_name, return_by_ref, num_outputs, tensors, kwargs):
    key = (code_string, tuple(str(getattr(t, "dtype", type(t).__name__)) for t in tensors))
    _jiterator_compiled.add(key)
    return tensors[0] if tensors else None


_C = types.SimpleNamespace(_cuda_jiterator_compile_and_launch_kernel=_cuda_jiterator_compile_and_launch_kernel)


class _JittedFunction:
    def __init__(self, code_string, **kwargs):
        self.code_string, self.kwargs = code_string, kwargs
        self.kernel_name = code_string.split("(")[0].split()[-1]

    def __call__(self, *tensors, **kwargs):
        import torch

        return torch._C._cuda_jiterator_compile_and_launch_kernel(self.code_string, self.kernel_name, False, 1, tensors,
                                                                  {**self.kwargs, **kwargs})


cuda.jiterator = types.SimpleNamespace(_create_jit_fn=lambda code, **kw: _JittedFunction(code, **kw))


class Tensor:
    """Enough of a tensor for the jiterator key: a dtype, a device, a layout."""

    def __init__(self, dtype="float32"):
        self.dtype, self.device = dtype, "cuda:0"

    def dim(self):
        return 1

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 4096
