# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The kernel library: tile-language kernels for the hot ATen ops."""

from .attention import sdpa_bwd, sdpa_fwd
from .channel_norm import (batch_norm, batch_norm_backward, group_norm, group_norm_backward, weight_norm,
                           weight_norm_backward)
from .conv import conv2d, conv2d_grad_input, conv2d_grad_weight
from .elementwise import activation_backward, binary, binary_scalar, unary
from .cross_entropy import cross_entropy
from .embedding import embedding, embedding_backward, gather_last, index_add_rows, scatter_last, take_rows
from .loss import nll_loss, nll_loss_backward
from .movement import arange, cat, cumsum_last, fill, reverse_last, triangle
from .pointwise import norms, pointwise, row_norms
from .matmul import bmm, linear, matmul
from .norm import layer_norm, norm_backward, rms_norm
from .optim import adamw
from .pool import (avg_pool2d, avg_pool2d_backward, max_pool2d, max_pool2d_backward, resample, upsample_nearest,
                   upsample_nearest_backward)
from .reduction import reduce, topk_rows
from .softmax import log_softmax, softmax, softmax_backward

__all__ = ["sdpa_bwd", "sdpa_fwd", "activation_backward", "binary", "binary_scalar", "unary", "cross_entropy",
           "embedding", "bmm", "linear", "matmul", "layer_norm", "norm_backward", "rms_norm", "adamw", "reduce",
           "log_softmax", "softmax", "softmax_backward", "embedding_backward", "nll_loss", "nll_loss_backward",
           "arange", "cat", "fill", "norms", "pointwise", "triangle", "conv2d", "conv2d_grad_input",
           "conv2d_grad_weight", "take_rows", "gather_last", "scatter_last", "index_add_rows", "batch_norm",
           "batch_norm_backward", "group_norm", "group_norm_backward", "row_norms", "topk_rows", "max_pool2d",
           "max_pool2d_backward", "reverse_last", "cumsum_last", "avg_pool2d", "avg_pool2d_backward",
           "upsample_nearest", "upsample_nearest_backward", "weight_norm", "weight_norm_backward", "resample"]
