"""Stand-in for the part of vLLM that porttrack.jobs.vllm drives (see ../../README.md): `LLM` and
`SamplingParams` (greedy outputs with logprobs), the CLI's `--version` and `bench latency
--output-json` (vllm/cli.py), and an engine that loads the `vllm.general_plugins` plugins, warms
up in `Worker.compile_or_warm_up_model`, captures one CUDA graph per warmed batch size and replays
it per decode step. Behaviour is steered by STANDIN_VLLM, a JSON object:

    {"warm_batches": [1, 8]},            # batch sizes warmed and graphed (others JIT-compile late)
    {"eager": true},                     # decode steps launch kernels, never replay a graph
    {"logprob_error": {"FLASH_ATTN": 0.05}},  # added to every logprob under that backend
    {"fail": "bench"},                   # `vllm bench latency` exits 1 (or "load": LLM() fails)
    {"missing_models": ["/models/x"]},   # LLM(model=...) of these fails: no such weights
    {"no_plugins": true},                # the plugins are not loaded (no probe inside)
    {"step_s": 0.001, "load_s": 0.0},    # time per decode step, and extra start-up time
    {"selects": "TRITON_ATTN"},          # the engine runs this backend whatever it was asked for
    {"selects": {"TRITON_MLA": "X"}},    # ... or, asked for a backend named here, runs another
    {"reads_env": true},                 # an older vLLM: VLLM_ATTENTION_BACKEND is how it is asked,
                                         # and LLM()/the CLI have no attention_backend argument
    {"no_interface": true},              # neither: the backend cannot be chosen at all
    {"layers": {"MLAAttention": 2}}      # the attention layers the model builds, by kind

The backend is asked for as vLLM 0.33 reads it: the engine argument `--attention-backend` /
`LLM(attention_backend=...)`; VLLM_ATTENTION_BACKEND is ignored (removed upstream, #32812).
Without an asking the engine picks TRITON_ATTN (its "automatic" choice here).
"""

import json
import os
import time

__version__ = "0.33.0+standin"
AUTOMATIC = "TRITON_ATTN"


def knobs():
    return json.loads(os.environ.get("STANDIN_VLLM") or "{}")


def load_general_plugins():
    """vLLM calls every `vllm.general_plugins` entry point in each process it starts. porttrack is
    not installed in CI, so its entry point (pyproject.toml) is called by the name it registers."""
    from porttrack.probe import vllm_plugin

    vllm_plugin.register()


class SamplingParams:
    def __init__(self, temperature=1.0, max_tokens=16, logprobs=None, **_ignored):
        self.temperature, self.max_tokens, self.logprobs = temperature, max_tokens, logprobs


class Logprob:
    def __init__(self, logprob):
        self.logprob = logprob


class CompletionOutput:
    def __init__(self, token_ids, logprobs):
        self.token_ids, self.logprobs = token_ids, logprobs


class RequestOutput:
    def __init__(self, outputs):
        self.outputs = outputs


def selected_backend(asked):
    """The backend the engine runs: a forced one, else the one asked for in the interface this
    vLLM reads, else its automatic choice. The name must be an AttentionBackendEnum member."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    if knobs().get("reads_env") or knobs().get("no_interface"):
        if asked is not None:
            raise TypeError("LLM() got an unexpected keyword argument 'attention_backend'")
        asked = os.environ.get("VLLM_ATTENTION_BACKEND") if knobs().get("reads_env") else None
    forced = knobs().get("selects")
    if isinstance(forced, dict):
        forced = forced.get(asked)
    name = forced or asked or AUTOMATIC
    if name not in AttentionBackendEnum.__members__:
        raise ValueError(f"Invalid attention backend: '{name}'")
    return name


class LLM:
    def __init__(self, model, attention_backend=None, **_engine_args):
        if not knobs().get("no_plugins"):
            load_general_plugins()
        if knobs().get("fail") == "load" or model in knobs().get("missing_models", ()):
            raise SystemExit(f"stand-in vLLM: cannot load {model}")
        time.sleep(float(knobs().get("load_s", 0.0)))
        from vllm.v1.worker.gpu_worker import Worker

        self.backend = selected_backend(attention_backend)
        self.worker = Worker(self.backend)
        self.worker.compile_or_warm_up_model()

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        params = sampling_params or SamplingParams()
        error = float((knobs().get("logprob_error") or {}).get(self.backend, 0.0))
        for _ in range(params.max_tokens):
            self.worker.step(len(prompts))
        outputs = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            tokens = [(sum(ids) + 31 * i) % 5000 for i in range(params.max_tokens)]
            logprobs = [{t: Logprob(-(0.05 + (t % 97) / 100.0) - error)} for t in tokens]
            outputs.append(RequestOutput([CompletionOutput(tokens, logprobs)]))
        return outputs
