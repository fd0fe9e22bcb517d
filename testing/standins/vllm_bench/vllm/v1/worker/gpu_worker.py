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


class Worker:
    def __init__(self):
        self.graphs = {}

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
