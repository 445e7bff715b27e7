"""What torchtitan 0.3.0 needs to train on device ``neuron`` with stock torch 2.13.0,
loaded the way torchtitan loads user code:

    --override.imports neuron_overrides.sdpa_document_causal

(with this directory on PYTHONPATH). It holds two things:

* ``sdpa_document_causal``: torchtitan's language models only offer FlexAttention
  (torch 2.13's ``flex_attention`` accepts only cuda/cpu/xpu/hpu/mps tensors) and
  varlen attention (CUDA flash kernels). This override replaces the inner attention
  by ``F.scaled_dot_product_attention`` with an explicit block-causal mask built from
  the same per-document metadata, so the model computes what FlexAttention computes
  on CUDA: causal attention that never crosses a document boundary.

* ``torch.distributed.set_timeout``, which torchtitan 0.3.0 calls after the first step
  and torch 2.13 does not have (it arrived after 2.13; any device hits this). Installed
  on import only when torch lacks it, as ``ProcessGroup.set_timeout``, which torch 2.13
  has (``distributed_c10d._set_pg_timeout`` would skip non-NCCL/gloo backends).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torchtitan.config import derive, override
from torchtitan.models.common.attention import (
    FlexAttention,
    VarlenAttention,
    VarlenMetadata,
)
from torchtitan.protocols.module import Module


def _set_timeout(timeout: timedelta, group: dist.ProcessGroup | None = None) -> None:
    (group if group is not None else dist.group.WORLD).set_timeout(timeout)


if not hasattr(dist, "set_timeout"):
    dist.set_timeout = _set_timeout


def document_causal_mask(meta: VarlenMetadata, batch: int, seq_len: int) -> torch.Tensor:
    """(B, 1, L, L) boolean mask: query i sees key j iff j <= i and both are in one document.

    ``meta.cu_seq_q`` holds the packed (B*L) start offset of every document plus the total.
    """
    starts = meta.cu_seq_q[1:-1].to(torch.int64)
    token = torch.arange(batch * seq_len, device=starts.device)
    doc = (token.unsqueeze(1) >= starts.unsqueeze(0)).sum(dim=1).view(batch, seq_len)
    same_doc = doc.unsqueeze(2) == doc.unsqueeze(1)
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=starts.device).tril()
    return (same_doc & causal).unsqueeze(1)


class SDPADocumentAttention(Module):
    """Inner attention on ``F.scaled_dot_product_attention`` with a block-causal mask.

    Its config is a ``VarlenAttention.Config`` so torchtitan hands it the per-document
    ``VarlenMetadata`` it builds for varlen attention; only causal windows are supported.
    """

    @dataclass(kw_only=True, slots=True)
    class Config(VarlenAttention.Config):
        pass

    def __init__(self, config: Config) -> None:
        super().__init__()
        if tuple(config.window_size) != (-1, 0):
            raise ValueError(
                f"SDPADocumentAttention supports causal attention only (window_size=(-1, 0)), "
                f"got window_size={config.window_size}")

    def forward(self, q_BLNH, k_BLNH, v_BLNH, *, attention_masks: VarlenMetadata,
                scale: float | None = None, enable_gqa: bool = False, out_transform=None, **kwargs):
        if not isinstance(attention_masks, VarlenMetadata):
            raise TypeError(f"SDPADocumentAttention needs VarlenMetadata masks, got {type(attention_masks)}")
        if out_transform is not None:
            raise NotImplementedError("SDPADocumentAttention does not return the log-sum-exp (out_transform)")
        B, L = q_BLNH.shape[:2]
        q, k, v = (t.transpose(1, 2) for t in (q_BLNH, k_BLNH, v_BLNH))
        # one document per row (B + 1 offsets, a shape known on the host): plain causal
        # attention is the same thing, and the maskless form has a native kernel
        if attention_masks.cu_seq_q.numel() == B + 1:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=enable_gqa)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=document_causal_mask(attention_masks, B, L),
                                                 scale=scale, enable_gqa=enable_gqa)
        return out.transpose(1, 2)


@override(target=FlexAttention.Config, description="SDPA with a block-causal mask (FlexAttention's semantics)")
def sdpa_document_causal(cfg):
    """Replaces each layer's FlexAttention inner attention."""
    return derive(cfg, SDPADocumentAttention.Config)
