"""Stand-in for vLLM's GPU worker: the warmup step the probe's plugin wraps (see ../../../../README.md)."""

import triton


@triton.jit
def decode_kernel():
    pass


class Worker:
    def compile_or_warm_up_model(self):
        for key in ("fp16,B=1", "fp16,B=8"):
            decode_kernel.launch(key)
        return "warm"

    def execute_model(self, key):
        return decode_kernel.launch(key)
