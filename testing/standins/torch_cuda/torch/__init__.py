"""Stand-in for torch's CUDA-graph and dynamo surface that the probe hooks (see ../../README.md)."""

import types

_capturing = [False]


class CUDAGraph:
    def capture_begin(self):
        _capturing[0] = True

    def capture_end(self):
        _capturing[0] = False

    def replay(self):
        return "replayed"


cuda = types.SimpleNamespace(CUDAGraph=CUDAGraph, is_current_stream_capturing=lambda: _capturing[0])
_logging = types.SimpleNamespace(set_logs=lambda **kw: None)
