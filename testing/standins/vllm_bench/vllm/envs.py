"""Stand-in for vllm.envs: the environment variables vLLM reads. Like vLLM 0.33 it has no
VLLM_ATTENTION_BACKEND (removed upstream 2026-01-21, #32812), unless STANDIN_VLLM says
{"reads_env": true} (an older vLLM, whose only interface was that variable)."""

import vllm

environment_variables = {"VLLM_CACHE_ROOT": lambda: None, "VLLM_PLUGINS": lambda: None}
if vllm.knobs().get("reads_env"):
    environment_variables["VLLM_ATTENTION_BACKEND"] = lambda: None
