"""Stand-in for vllm.v1.attention.backends.registry: a subset of vLLM 0.33's AttentionBackendEnum
(a CI test checks every member here is a member of the real enum recorded in
benchmarks/results/vllm_compat.json)."""

import enum


class AttentionBackendEnum(enum.Enum):
    FLASH_ATTN = "flash_attn"
    TRITON_ATTN = "triton_attn"
    ROCM_ATTN = "rocm_attn"
    ROCM_AITER_FA = "rocm_aiter_fa"
    FLASHINFER = "flashinfer"
    FLASHMLA = "flashmla"
    FLASHMLA_SPARSE = "flashmla_sparse"
    TRITON_MLA = "triton_mla"
    ROCM_AITER_MLA = "rocm_aiter_mla"
    ROCM_AITER_MLA_SPARSE = "rocm_aiter_mla_sparse"
