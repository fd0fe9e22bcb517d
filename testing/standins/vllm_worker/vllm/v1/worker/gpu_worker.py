"""Stand-in for vLLM's GPU worker: the warmup step the probe's plugin wraps, ending, as vLLM 0.33's
does, by activating vLLM's own JIT monitor (`vllm.utils.jit_monitor`, which sets Triton's
post-compile knob to a function that calls the previous hook) unless STANDIN_VLLM_JIT_MONITOR=off
(see ../../../../README.md)."""

import os

import triton


@triton.jit
def decode_kernel():
    pass


class Worker:
    def compile_or_warm_up_model(self):
        for key in ("fp16,B=1", "fp16,B=8"):
            decode_kernel.launch(key)
        self._maybe_activate_jit_monitor()
        return "warm"

    def _maybe_activate_jit_monitor(self):
        mode = os.environ.get("STANDIN_VLLM_JIT_MONITOR", "warn")
        if mode == "off":
            return
        from vllm.utils.jit_monitor import activate

        activate(mode=mode)

    def execute_model(self, key):
        return decode_kernel.launch(key)
