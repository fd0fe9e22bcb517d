"""Stand-in for vllm.v1.attention.backends.registry: a subset of vLLM 0.33's AttentionBackendEnum
(a CI test checks every member here is a member of the real enum recorded in
proofs/results/vllm_compat.json). As in vLLM, a member's value is its backend class's path
(`get_path()`), and the classes' `get_name()` is not unique: ROCM_AITER_FA's class reports
"FLASH_ATTN" (`NAMES`), as vLLM 0.33's AiterFlashAttentionBackend does."""

import enum


class AttentionBackendEnum(enum.Enum):
    FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    TRITON_ATTN = "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    ROCM_ATTN = "vllm.v1.attention.backends.rocm_attn.RocmAttentionBackend"
    ROCM_AITER_FA = "vllm.v1.attention.backends.rocm_aiter_fa.AiterFlashAttentionBackend"
    FLASHINFER = "vllm.v1.attention.backends.flashinfer.FlashInferBackend"
    FLASHMLA = "vllm.v1.attention.backends.mla.flashmla.FlashMLABackend"
    FLASHMLA_SPARSE = "vllm.v1.attention.backends.mla.flashmla_sparse.FlashMLASparseBackend"
    TRITON_MLA = "vllm.v1.attention.backends.mla.triton_mla.TritonMLABackend"
    ROCM_AITER_MLA = "vllm.v1.attention.backends.mla.rocm_aiter_mla.AiterMLABackend"
    ROCM_AITER_MLA_SPARSE = "vllm.v1.attention.backends.mla.rocm_aiter_mla_sparse.ROCMAiterMLASparseBackend"

    def get_path(self, include_classname=True):
        return self.value if include_classname else self.value.rsplit(".", 1)[0]

    def get_class(self):
        return backend_class(self.name)


# get_name() of a member's class where it is not the member's name (vLLM 0.33)
NAMES = {"ROCM_AITER_FA": "FLASH_ATTN"}
_classes = {}


def backend_class(name):
    """The backend class the engine runs for `name`: a class whose module and qualified name are
    the member's path (or `vllm.standin.NAME` for a name that is no member)."""
    if name not in _classes:
        path = AttentionBackendEnum[name].value if name in AttentionBackendEnum.__members__ else f"vllm.standin.{name}Backend"
        module, _, qualname = path.rpartition(".")
        _classes[name] = type(qualname, (), {"__module__": module, "__qualname__": qualname,
                                              "get_name": staticmethod(lambda n=NAMES.get(name, name): n)})
    return _classes[name]
