"""Stand-in for torch's CUDA-graph and dynamo surface that the probe hooks (see ../../README.md)."""

import types

__version__ = "0.0.0-standin"
version = types.SimpleNamespace(cuda="13.0-standin", hip=None)
_capturing = [False]


class CUDAGraph:
    def capture_begin(self):
        _capturing[0] = True

    def capture_end(self):
        _capturing[0] = False

    def replay(self):
        return "replayed"


cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph, is_current_stream_capturing=lambda: _capturing[0], is_available=lambda: True,
                             get_device_properties=lambda index: types.SimpleNamespace(
                                 # as torch 2.11 on CUDA reports it: gcnArchName holds the GPU's name there
                                 name="Stand-in GPU", gcnArchName="Stand-in GPU", major=9, minor=0))
_logging = types.SimpleNamespace(set_logs=lambda **kw: None)
