"""Stand-in for vllm.engine.arg_utils.EngineArgs: the engine arguments the job passes, spelled as
vLLM 0.33 spells them (proofs/results/vllm_compat.json records the real ones; a CI test
checks every flag here exists there). An older vLLM (STANDIN_VLLM {"reads_env": true}) or one
with no way to choose the backend ({"no_interface": true}) has no `attention_backend`."""

import dataclasses

import vllm

_FIELDS = [("model", str, "Qwen/Qwen3-0.6B"), ("seed", int, 0), ("enforce_eager", bool, False),
           ("max_model_len", "int | None", None), ("enable_prefix_caching", "bool | None", None)]
HAS_BACKEND = not (vllm.knobs().get("reads_env") or vllm.knobs().get("no_interface"))
if HAS_BACKEND:
    _FIELDS.append(("attention_backend", "str | None", None))

EngineArgs = dataclasses.make_dataclass("EngineArgs", [(n, t, dataclasses.field(default=d)) for n, t, d in _FIELDS])


def add_cli_args(parser):
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--enable-prefix-caching", action="store_true", default=None)
    parser.add_argument("--disable-prefix-caching", dest="enable_prefix_caching", action="store_false")
    if HAS_BACKEND:
        parser.add_argument("--attention-backend", default=None)
    return parser


EngineArgs.add_cli_args = staticmethod(add_cli_args)
