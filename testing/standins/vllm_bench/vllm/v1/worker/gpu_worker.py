"""Stand-in GPU worker: warmup compiles the decode kernel per warmed batch size and captures a
graph for each; a decode step replays the batch size's graph, or launches (and JIT-compiles) the
kernel for a batch size warmup never saw."""

import time

import torch
import triton

import vllm

WARM_BATCHES = (1, 2, 4, 8, 16, 32, 64)


@triton.jit
def decode_kernel():
    pass


def Backend(name):
    """The backend class (vLLM's get_attn_backend() returns a class), from the registry stand-in."""
    from vllm.v1.attention.backends.registry import backend_class

    return backend_class(name)


class Layer:
    def __init__(self, backend):
        self.backend = backend

    def get_attn_backend(self):
        return self.backend


class Namespace:
    def __init__(self, **fields):
        self.__dict__.update(fields)


class Worker:
    """Holds `vllm_config.compilation_config.static_forward_context` (layer name -> attention
    layer) as vLLM's worker does: the layers' classes are named after the knob "layers"."""

    def __init__(self, backend="TRITON_ATTN"):
        self.graphs = {}
        layers = {}
        for kind, count in (vllm.knobs().get("layers") or {"Attention": 2}).items():
            cls = type(kind, (Layer,), {})
            for i in range(count):
                layers[f"model.layers.{len(layers)}.{kind.lower()}"] = cls(Backend(backend))
        self.vllm_config = Namespace(compilation_config=Namespace(static_forward_context=layers))

    def compile_or_warm_up_model(self):
        for batch in vllm.knobs().get("warm_batches", WARM_BATCHES):
            decode_kernel.launch(f"decode,B={batch}")
            graph = torch.cuda.CUDAGraph()
            graph.capture_begin()
            decode_kernel.launch(f"decode,B={batch}")
            graph.capture_end()
            self.graphs[batch] = graph
        return "warm"

    def step(self, batch):
        time.sleep(float(vllm.knobs().get("step_s", 0.001)))
        if batch in self.graphs and not vllm.knobs().get("eager"):
            return self.graphs[batch].replay()
        return decode_kernel.launch(f"decode,B={batch}")
