"""Real Triton kernels and a decode step for `probe_gpu.py` (Triton needs kernels in a file).

- `gather_rows`: an autotuned row gather (`out[i] = table[idx[i]]`), three configs keyed on the
  row width, the shape of an embedding or KV-block gather.
- `decode_attention`: one query token per (batch × head) against a KV cache of `T` tokens, with an
  online softmax over blocks of `BLOCK_T`; `BUG=True` plants a 10 % numeric error.
- `DecodeStep`: gather + attention for a batch, run eagerly or captured into a CUDA graph.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_D": 64}, num_warps=2),
        triton.Config({"BLOCK_D": 128}, num_warps=4),
        triton.Config({"BLOCK_D": 256}, num_warps=8),
    ],
    key=["D"],
)
@triton.jit
def gather_rows_kernel(table_ptr, idx_ptr, out_ptr, D, stride_t, stride_o, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    src = tl.load(idx_ptr + row)
    for start in range(0, D, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < D
        values = tl.load(table_ptr + src * stride_t + cols, mask=mask)
        tl.store(out_ptr + row * stride_o + cols, values, mask=mask)


def gather_rows(table: torch.Tensor, idx: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    out = torch.empty((idx.shape[0], table.shape[1]), dtype=table.dtype, device=table.device) if out is None else out
    gather_rows_kernel[(idx.shape[0],)](table, idx, out, table.shape[1], table.stride(0), out.stride(0))
    return out


@triton.jit
def decode_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, T, scale,
                            stride_qb, stride_kb, stride_kt, stride_vb, stride_vt, stride_ob,
                            D: tl.constexpr, BLOCK_T: tl.constexpr, BUG: tl.constexpr):
    bh = tl.program_id(0)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + bh * stride_qb + d).to(tl.float32)
    m_i = tl.zeros([1], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([D], dtype=tl.float32)
    for start in range(0, T, BLOCK_T):
        t = start + tl.arange(0, BLOCK_T)
        mask = t < T
        k = tl.load(k_ptr + bh * stride_kb + t[:, None] * stride_kt + d[None, :], mask=mask[:, None], other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * scale
        s = tl.where(mask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m_i - m_new)
        v = tl.load(v_ptr + bh * stride_vb + t[:, None] * stride_vt + d[None, :], mask=mask[:, None], other=0.0).to(tl.float32)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new
    out = acc / l_i
    if BUG:
        out = out * 1.10
    tl.store(o_ptr + bh * stride_ob + d, out.to(o_ptr.dtype.element_ty))


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor | None = None,
                     *, bug: bool = False, block_t: int = 64) -> torch.Tensor:
    """q: [BH, D]; k, v: [BH, T, D]; returns [BH, D]."""
    bh, t, d = k.shape
    out = torch.empty_like(q) if out is None else out
    decode_attention_kernel[(bh,)](q, k, v, out, t, 1.0 / math.sqrt(d),
                                   q.stride(0), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0),
                                   D=d, BLOCK_T=block_t, BUG=bug)
    return out


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The named reference backend: torch in float32."""
    qf, kf, vf = q.float(), k.float(), v.float()
    scores = torch.einsum("bd,btd->bt", qf, kf) / math.sqrt(q.shape[-1])
    return torch.einsum("bt,btd->bd", torch.softmax(scores, dim=-1), vf)


class DecodeStep:
    """One decode step for a batch: gather the new tokens' embeddings, attend over the cache.
    Static buffers, so the step can be captured into a CUDA graph and replayed."""

    def __init__(self, batch: int, heads: int, context: int, dim: int, dtype: torch.dtype, *, bug: bool = False):
        gen = torch.Generator(device="cuda").manual_seed(batch * 1000 + context)
        self.bh = batch * heads
        self.table = torch.randn((4096, dim), generator=gen, device="cuda", dtype=dtype)
        self.idx = torch.randint(0, 4096, (self.bh,), generator=gen, device="cuda", dtype=torch.int32)
        self.k = torch.randn((self.bh, context, dim), generator=gen, device="cuda", dtype=dtype)
        self.v = torch.randn((self.bh, context, dim), generator=gen, device="cuda", dtype=dtype)
        self.q = torch.empty((self.bh, dim), device="cuda", dtype=dtype)
        self.out = torch.empty((self.bh, dim), device="cuda", dtype=dtype)
        self.bug = bug
        self.graph: torch.cuda.CUDAGraph | None = None

    def eager(self) -> torch.Tensor:
        gather_rows(self.table, self.idx, self.q)
        return decode_attention(self.q, self.k, self.v, self.out, bug=self.bug)

    def capture(self) -> None:
        """Warm up on a side stream (autotuning runs there, outside the capture), then capture."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.eager()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.eager()

    def replay(self) -> torch.Tensor:
        assert self.graph is not None
        self.graph.replay()
        return self.out

    def reference(self) -> torch.Tensor:
        return reference_attention(self.table[self.idx.long()], self.k, self.v)
