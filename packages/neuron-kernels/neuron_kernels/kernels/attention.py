# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Scaled dot-product attention forward, flash-style (online softmax over key blocks).

Per (batch*head, 128-query block): S = Q K^T on TensorE with Q^T [d, 128] stationary and
K^T [d, 512] moving; ScalarE computes exp(scale*S - m) with its row sum in one
activation_reduce; P is transposed in 128x128 blocks on TensorE and multiplied with V,
accumulating the output block in PSUM; rescaling by exp(m_old - m_new) runs on VectorE.
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import P, row_blocks

KB = 512          # keys per score tile (one PSUM bank of fp32)
NEG = -30000.0    # additive mask: exp underflows to 0 in fp32
FMAX = 3.4028234663852886e38  # float32 max: clamps a fully masked row's -inf max (see sdpa_fwd)


def _slot_offset(d, b):
    """Partition offset for the transposed [d, *] operands of batch-head ``b``: a head dimension of
    at most 32 rows lands on a rotating quarter of the partitions (0, 32, 64, 96). Each DMA engine
    serves 8 fixed partitions, so a transpose into partitions 0..d-1 always runs on the same d/8
    engines; rotating the slot spreads consecutive heads' transposes over all 16. Matmul operand
    pairs share one slot (TensorE contracts over the same partitions)."""
    return 0 if d > 32 else 32 * (b % 4)


def _load_t(src, dtype, off):
    """HBM [R, C] -> SBUF [C, R] (a DMA transpose) into partitions off..off+C-1 of a fresh tile."""
    R, C = src.shape
    t = nl.ndarray((off + C, R), dtype)
    view = t[off:off + C, :]
    nl.isa.dma_transpose(view, src)
    return view


def _transposed(tiles, dtype, engine="scalar", out=None, bufs=1):
    """SBUF tiles [r_i, C] (r_i <= 128) side by side, transposed: one SBUF tile [C, sum r_i]
    (``out`` when given). Each is transposed on TensorE into one PSUM tile (one bank:
    sum r_i <= 512) that a single copy on ``engine`` evacuates. The tiles come from plain row
    loads, which spread over all 16 DMA engines; a DMA transpose of a [r, C] block runs on C / 8
    of them with a descriptor per element (C §4.5), which made it the slowest step of
    short-head attention."""
    C = tiles[0].shape[1]
    ps = nl.ndarray((C, sum(t.shape[0] for t in tiles)), "float32", buffer=nl.psum, bufs=bufs)
    o = 0
    for t in tiles:
        nl.isa.nc_transpose(ps[:, o:o + t.shape[0]], t)
        o += t.shape[0]
    if out is None:
        return nl.copy(ps, dtype=dtype, engine=engine)
    nl.isa.tensor_copy(out, ps, engine=engine)
    return out


INTERLEAVE = 2   # independent blocks whose instruction streams are issued interleaved
SHORT_INTERLEAVE = 4   # sdpa_bwd blocks in flight when queries and keys fit one block (2 PSUM banks each)
HOIST_BYTES = 64 * 1024   # SBUF bytes per partition sdpa_bwd may keep for a batch-head's query side


def _interleave(blocks, width):
    """Issues ``width`` independent blocks (generators that yield between dependent stages) stage
    by stage in turn. Each engine runs its instructions in program order, so one block's chain
    (DMA -> TensorE -> VectorE -> ScalarE -> ...) leaves every engine waiting on the others; with
    two blocks' stages alternating, one block's work fills the other's waits."""
    live = []
    it = iter(blocks)
    done = False
    while live or not done:
        while not done and len(live) < width:
            g = next(it, None)
            if g is None:
                done = True
            else:
                live.append(g)
        for g in list(live):
            if next(g, StopIteration) is StopIteration:
                live.remove(g)


def _mask_tile(mask, b, q0, qs, k0, ks, mask_div, mask_mod):
    """The additive mask block [qs, ks] of batch-head ``b`` (fp32): mask (G, Sq or 1, Sk) is shared by
    ``mask_div`` consecutive batch-heads and repeats every ``mask_mod`` groups (broadcast dims)."""
    g = (b // mask_div) % mask_mod
    if mask.shape[1] == 1:
        return nl.load(mask[g, 0, k0:k0 + ks].broadcast_partitions(qs), dtype="float32")
    return nl.load(mask[g, q0:q0 + qs, k0:k0 + ks], dtype="float32")


class _ScaledMasks:
    """Mask blocks divided by the softmax scale, so that the scale applies once, inside the
    exponential (exp(scale * (s + mask / scale) - m)), rather than to every score block. A block
    is loaded and divided once and reused by the batch-heads that share it (BERT's padding mask
    serves all heads of a sequence). The tiles come from one allocation site of ``SLOTS``
    rotating buffers, evicted in the order the site reuses them; at most ``INTERLEAVE`` blocks
    are in flight, so an evicted tile has no reader left."""

    SLOTS = INTERLEAVE + 1

    def __init__(self, mask, mask_div, mask_mod, inv_scale):
        self.mask, self.div, self.mod, self.inv = mask, mask_div, mask_mod, inv_scale
        self.tiles: list = []    # (key, tile), oldest first

    def __call__(self, b, q0, qs, k0, ks):
        g = (b // self.div) % self.mod
        key = (g, 0 if self.mask.shape[1] == 1 else q0, qs, k0, ks)
        for k, t in self.tiles:
            if k == key:
                return t
        if len(self.tiles) == self.SLOTS:
            self.tiles.pop(0)
        t = nl.ndarray((qs, ks), "float32", bufs=self.SLOTS)
        nl.isa.tensor_scalar(t, _mask_tile(self.mask, b, q0, qs, k0, ks, self.div, self.mod), "multiply", self.inv)
        self.tiles.append((key, t))
        return t


def _block_mask(heads, Sq, Sk, causal, scale):
    """The additive mask of ``heads`` attention problems packed into one: block h of rows
    (queries of head h) sees only block h of columns (its keys), causally when asked. Built
    once per kernel on chip from row and column iotas (engine accesses start at partition 0,
    so the blocks are compared, not sliced). Divided by ``scale`` (see _ScaledMasks)."""
    R, C = heads * Sq, heads * Sk
    row = nl.iota((R, C), "float32", base=0, partition_step=1, free_step=0)
    col = nl.iota((R, C), "float32", base=0, partition_step=0, free_step=1)
    rh = ch = None
    for h in range(1, heads):                      # head of a row / column: how many block starts it passed
        a, b = nl.greater_equal(row, float(h * Sq)), nl.greater_equal(col, float(h * Sk))
        rh, ch = (a, b) if rh is None else (nl.add(rh, a), nl.add(ch, b))
    keep = nl.equal(rh, ch)
    if causal:                                     # Sq == Sk: row - col is i - j inside a block
        keep = nl.multiply(keep, nl.greater_equal(nl.subtract(row, col), 0.0))
    return nl.multiply(nl.subtract(keep, 1.0), -NEG / scale)


def _masks(mask, heads, Sq, Sk, causal, mask_div, mask_mod, scale=None):
    """(additive mask block reader or None, causal left to the kernel's own iota mask, whether the
    reader's blocks are divided by ``scale``; None: never)."""
    if heads > 1:
        blk = _block_mask(heads, Sq // heads, Sk // heads, causal, scale or 1.0)
        return (lambda b, q0, qs, k0, ks: blk[q0:q0 + qs, k0:k0 + ks]), False, scale is not None
    if mask is not None and not causal and scale is not None:
        return _ScaledMasks(mask, mask_div, mask_mod, 1.0 / scale), False, True
    if mask is not None:
        return (lambda b, q0, qs, k0, ks: _mask_tile(mask, b, q0, qs, k0, ks, mask_div, mask_mod)), causal, False
    return None, causal, False


def _exp_bias(neg, scale, shape):
    """The exponential's bias -scale * max from a negated row max ``neg``: clamped first, so that
    a row whose keys are all -inf (max -inf) gets a finite bias, probabilities 0 and output 0
    (torch's safe softmax)."""
    bias = nl.ndarray(shape, "float32")
    nl.isa.tensor_scalar(bias, neg, "minimum", FMAX, op1="multiply", operand1=scale)
    return bias


def _inverse(l, shape, masked):
    """1 / l; with a mask, l of a fully masked row is 0 and is raised to 1e-30 first."""
    inv = nl.ndarray(shape, "float32")
    if masked:
        nl.isa.tensor_scalar(inv, l, "maximum", 1e-30, op1="divide", operand1=1.0, reverse1=True)
    else:
        nl.isa.tensor_scalar(inv, l, "divide", 1.0, reverse0=True)
    return inv


@nl.jit(default_bufs=4)   # loop tiles rotate over SHORT_INTERLEAVE buffers (see short() below)
def sdpa_fwd(q, k, v, mask=None, scale=None, causal=False, mask_div=1, mask_mod=1, heads=1):
    """out[b] = softmax(scale * q[b] @ k[b]^T (+ mask) (+ causal mask)) @ v[b]; q (B, Sq, d), k/v (B, Sk, d),
    d <= 128; ``mask`` an additive fp32/bf16 (G, Sq or 1, Sk) (see ``_mask_tile``).

    ``heads`` > 1: each of the B rows holds that many heads packed along the sequence (q rows
    h * Sq / heads ...), no ``mask``; a block mask keeps heads apart, so short sequences fill the
    partitions and pay each DMA and instruction's fixed cost once per pack instead of per head.

    Returns (out, lse) with lse (B, Sq, 1) the row log-sum-exp of the scaled scores.
    """
    B, Sq, d = q.shape
    Sk = k.shape[1]
    if d > P:
        raise ValueError(f"head dimension {d} exceeds {P}; split heads")
    if heads > 1 and (mask is not None or Sq > P or Sk > KB):
        raise ValueError(f"{heads} packed heads take no mask and at most {P} queries, {KB} keys per pack")
    scale = scale if scale is not None else (d ** -0.5)
    add_mask, causal, prescaled = _masks(mask, heads, Sq, Sk, causal, mask_div, mask_mod, scale)
    cdt = "float32" if q.dtype == "float32" else "bfloat16"
    out = nl.ndarray((B, Sq, d), q.dtype, buffer=nl.shared_hbm)
    lse_o = nl.ndarray((B, Sq, 1), "float32", buffer=nl.shared_hbm)
    def masked(s, b, q0, qs, k0, ks):
        """Scores block [qs, ks] with the causal and additive masks applied, and the scale the
        exponential still applies (1 once a mask needed the scores scaled)."""
        sc = scale
        if causal and k0 + ks > q0:
            # keep key j for query i when k0 + j <= q0 + i
            rel = nl.iota((qs, ks), "float32", base=q0 - k0, partition_step=1, free_step=-1)
            s = nl.add(s, nl.multiply(nl.less(rel, 0.0), NEG))
            s = nl.multiply(s, scale)
            sc = 1.0
        if add_mask is not None:
            if prescaled:
                s = nl.add(s, add_mask(b, q0, qs, k0, ks))
            else:
                s = nl.add(s if sc == 1.0 else nl.multiply(s, sc), add_mask(b, q0, qs, k0, ks))
                sc = 1.0
        return s, sc

    def one_pass_bias(s, sc, qs):
        """The exponential's bias when a row's keys fit one block: straight from the negated row max."""
        neg = nl.max(s, axis=1, negate=True)
        return _exp_bias(neg, sc, (qs, 1)) if add_mask is not None or sc != 1.0 else neg

    def block(b, q0, qs):
        """One query block of batch-head ``b``; yields between dependent stages (see _interleave)."""
        off = _slot_offset(d, b)
        qT = _load_t(q[b, q0:q0 + qs, :], cdt, off)                                # [d, qs]
        m = l = acc = None
        kend = min(Sk, q0 + qs) if causal else Sk
        kblocks = list(row_blocks(kend, KB))
        one_pass = len(kblocks) == 1
        for k0, ks in kblocks:
            kT = _load_t(k[b, k0:k0 + ks, :], cdt, off)                            # [d, ks]
            yield
            s = nl.matmul(qT, kT, transpose_x=True, bufs=2)                        # [qs, ks] fp32 PSUM
            yield
            s, sc = masked(s, b, q0, qs, k0, ks)
            if one_pass:
                bias = one_pass_bias(s, sc, qs)                  # the whole row at once
            else:
                bm = nl.max(s, axis=1)
                bm = nl.multiply(bm, sc) if sc != 1.0 else bm
                m_new = bm if m is None else nl.maximum(m, bm)
                if add_mask is not None:
                    m_new = nl.maximum(m_new, -FMAX)      # see _exp_bias
                bias = nl.multiply(m_new, -1.0)
            yield
            rowsum = nl.ndarray((qs, 1), "float32")
            p = nl.activation("exp", s, bias=bias, scale=sc, dtype=cdt, reduce_op="add", reduce_res=rowsum)
            yield
            pv = nl.ndarray((qs, d), "float32", buffer=nl.psum, bufs=2)
            for j, (j0, js) in enumerate(row_blocks(ks, P)):
                # The transposed block leaves PSUM through ScalarE, which has the lighter load here.
                pT = nl.copy(nl.transpose(p[:, j0:j0 + js], bufs=2), dtype=cdt, engine="scalar")  # [js, qs]
                vt = nl.load(v[b, k0 + j0:k0 + j0 + js, :], dtype=cdt)              # [js, d]
                nl.isa.nc_matmul(pv, pT, vt, accumulate=j > 0)
                yield
            if one_pass:
                l, acc = rowsum, pv
            elif m is None:
                l, acc = rowsum, nl.copy(pv, dtype="float32")
            else:
                corr = nl.exp(nl.subtract(m, m_new))
                l = nl.add(nl.multiply(l, corr), rowsum)
                acc = nl.add(nl.multiply(acc, corr), pv)
            if not one_pass:
                m = m_new
            yield
        inv = _inverse(l, (qs, 1), add_mask is not None)
        if one_pass:
            # out = acc / l read from PSUM by ScalarE; lse = scale * max + log(l) = log(l) - bias.
            nl.store(out[b, q0:q0 + qs, :], nl.activation("copy", acc, scale=inv, dtype=out.dtype))
            nl.store(lse_o[b, q0:q0 + qs, :], nl.subtract(nl.log(l), bias))
        else:
            nl.store(out[b, q0:q0 + qs, :], nl.multiply(acc, inv, dtype=out.dtype))
            nl.store(lse_o[b, q0:q0 + qs, :], nl.add(m, nl.log(l)))

    def heads_block(bs, q0, qs):
        """One query block of the batch-heads ``bs`` whose keys fit one block, side by side along
        the free dimension: their scores share one PSUM bank [qs, G * Sk], so the mask add, the
        row maxima, the exponentials' biases, the normalisers and the log-sum-exps are one or G
        instructions per group rather than per head."""
        G = len(bs)
        off = _slot_offset(d, bs[0] // G)
        qT = nl.ndarray((off + d, G, qs), cdt)
        kT = nl.ndarray((off + d, G, Sk), cdt)
        for h, b in enumerate(bs):
            nl.isa.dma_transpose(qT[off:off + d, h, :], q[b, q0:q0 + qs, :])
            nl.isa.dma_transpose(kT[off:off + d, h, :], k[b, :, :])
        yield
        sg = nl.ndarray((qs, G * Sk), "float32", buffer=nl.psum, bufs=2)
        for h in range(G):
            nl.isa.nc_matmul(sg[:, h * Sk:(h + 1) * Sk], qT[off:off + d, h, :], kT[off:off + d, h, :])
        yield
        s3 = nl.ndarray((qs, G, Sk), "float32")
        for h, b in enumerate(bs):
            s3[:, h, :] = nl.add(sg[:, h * Sk:(h + 1) * Sk], add_mask(b, q0, qs, 0, Sk))
        bias = _exp_bias(nl.max(s3, axis=2, negate=True), scale, (qs, G, 1))
        yield
        rowsum = nl.ndarray((qs, G), "float32")
        p3 = nl.ndarray((qs, G, Sk), cdt)
        for h in range(G):
            nl.isa.activation(p3[:, h, :], s3[:, h, :], "exp", bias=bias[:, h, :], scale=scale, reduce_op="add",
                              reduce_res=rowsum[:, h:h + 1])
        yield
        pv = nl.ndarray((qs, G * d), "float32", buffer=nl.psum, bufs=2)
        for h, b in enumerate(bs):
            for j, (j0, js) in enumerate(row_blocks(Sk, P)):
                pT = nl.copy(nl.transpose(p3[:, h, j0:j0 + js], bufs=2), dtype=cdt, engine="scalar")
                vt = nl.load(v[b, j0:j0 + js, :], dtype=cdt)
                nl.isa.nc_matmul(pv[:, h * d:(h + 1) * d], pT, vt, accumulate=j > 0)
            yield
        inv = _inverse(rowsum, (qs, G), True)
        lse = nl.subtract(nl.log(rowsum), bias)                                    # [qs, G]
        for h, b in enumerate(bs):
            nl.store(out[b, q0:q0 + qs, :], nl.activation("copy", pv[:, h * d:(h + 1) * d],
                                                             scale=inv[:, h:h + 1], dtype=out.dtype))
            nl.store(lse_o[b, q0:q0 + qs, :], lse[:, h:h + 1])

    def short(b):
        """Batch-head ``b`` when its queries and keys fit one block each (packed heads, short
        sequences); yields between dependent stages (see _interleave). Two PSUM banks per block:
        Q^T | K^T in one, S | P^T | P V in the other, so that ``SHORT_INTERLEAVE`` blocks are in
        flight; Q and K arrive through plain row loads (see _transposed)."""
        qt = nl.load(q[b, :, :], dtype=cdt)                                          # [Sq, d]
        kt = nl.load(k[b, :, :], dtype=cdt)                                          # [Sk, d]
        vt = nl.load(v[b, :, :], dtype=cdt)
        yield
        T = _transposed((qt, kt), cdt, bufs=SHORT_INTERLEAVE)                       # [d, Sq + Sk]
        yield
        ps = nl.ndarray((P, Sk + Sq + d), "float32", buffer=nl.psum, bufs=SHORT_INTERLEAVE)
        nl.isa.nc_matmul(ps[:Sq, :Sk], T[:, :Sq], T[:, Sq:])                         # S
        yield
        s, sc = masked(ps[:Sq, :Sk], b, 0, Sq, 0, Sk)
        bias = one_pass_bias(s, sc, Sq)
        rowsum = nl.ndarray((Sq, 1), "float32")
        p = nl.activation("exp", s, bias=bias, scale=sc, dtype=cdt, reduce_op="add", reduce_res=rowsum)
        yield
        nl.isa.nc_transpose(ps[:Sk, Sk:Sk + Sq], p)
        pT = nl.copy(ps[:Sk, Sk:Sk + Sq], dtype=cdt, engine="scalar")               # [Sk, Sq]
        yield
        nl.isa.nc_matmul(ps[:Sq, Sk + Sq:], pT, vt)                                  # P V
        yield
        inv = _inverse(rowsum, (Sq, 1), add_mask is not None)
        nl.store(out[b, :, :], nl.activation("copy", ps[:Sq, Sk + Sq:], scale=inv, dtype=out.dtype))
        nl.store(lse_o[b, :, :], nl.subtract(nl.log(rowsum), bias))

    # Heads side by side: one key block with a mask (a padding mask, as encoders pass), at
    # least two heads' scores per PSUM bank, and their outputs in one more.
    group = min(KB // Sk, KB // d, B) if (prescaled and heads == 1 and Sk <= KB) else 1
    if group < 2 and Sq <= P and Sk <= P and Sk + Sq + d <= KB:
        _interleave((short(b) for b in nl.affine_range(B)), SHORT_INTERLEAVE)
        return out, lse_o
    if group >= 2:
        bgroups = [list(range(b0, min(B, b0 + group))) for b0 in range(0, B, group)]
        _interleave((heads_block(bs, q0, qs) for bs in bgroups for q0, qs in row_blocks(Sq)), INTERLEAVE)
        return out, lse_o

    # Two blocks in flight when each has one key block (the online-softmax state of longer key
    # ranges lives across iterations and would outgrow its tiles' rotating buffers).
    _interleave((block(b, q0, qs) for b in nl.affine_range(B) for q0, qs in row_blocks(Sq)),
                INTERLEAVE if Sk <= KB else 1)
    return out, lse_o


@nl.jit(default_bufs=4)   # loop tiles rotate over SHORT_INTERLEAVE buffers (see short() below)
def sdpa_bwd(q, k, v, out, dout, lse, mask=None, scale=None, causal=False, mask_div=1, mask_mod=1, heads=1):
    """Gradients (dq, dk, dv) of sdpa_fwd, recomputing P = exp(scale * q k^T (+ mask) - lse) per block
    (no gradient for the mask).

    Per (batch, 128-key block), loop over 128-query blocks: dV += P^T dO and dK += dS^T Q accumulate
    in PSUM; dQ += dS K accumulates in SBUF across key blocks. dS = P * (dO V^T - rowsum(dO * O)) * scale.
    ``heads``: packed heads as in sdpa_fwd (at most 128 queries and 128 keys per pack).
    """
    B, Sq, d = q.shape
    Sk = k.shape[1]
    if d > P:
        raise ValueError(f"head dimension {d} exceeds {P}; split heads")
    if heads > 1 and (mask is not None or Sq > P or Sk > P):
        raise ValueError(f"{heads} packed heads take no mask and at most {P} queries and keys per pack")
    scale = scale if scale is not None else d ** -0.5
    add_mask, causal, _ = _masks(mask, heads, Sq, Sk, causal, mask_div, mask_mod)
    cdt = "float32" if q.dtype == "float32" else "bfloat16"
    dq_o = nl.ndarray((B, Sq, d), q.dtype, buffer=nl.shared_hbm)
    dk_o = nl.ndarray((B, Sk, d), k.dtype, buffer=nl.shared_hbm)
    dv_o = nl.ndarray((B, Sk, d), v.dtype, buffer=nl.shared_hbm)
    qblocks = row_blocks(Sq)
    nqb = len(qblocks)

    def neg_lse_of(b, q0, qs):
        """-lse of a query block. A fully masked row has lse -inf: a finite bias keeps its
        probabilities 0, not NaN."""
        neg = nl.multiply(nl.load(lse[b, q0:q0 + qs, :]), -1.0)
        return nl.minimum(neg, FMAX) if add_mask is not None else neg

    def probabilities(s, neg, b, q0, qs, k0, ks):
        """P = exp(scale * S (+ masks) - lse) of a scores block, fp32."""
        if causal and k0 + ks > q0:
            rel = nl.iota((qs, ks), "float32", base=q0 - k0, partition_step=1, free_step=-1)
            s = nl.add(s, nl.multiply(nl.less(rel, 0.0), NEG / scale))
        if add_mask is not None:
            s = nl.add(nl.multiply(s, scale), add_mask(b, q0, qs, k0, ks))
        return nl.activation("exp", s, bias=neg, scale=1.0 if add_mask is not None else scale)

    def short(b):
        """Batch-head ``b`` when its queries and keys fit one block each (packed heads, short
        sequences); yields between dependent stages (see _interleave). Two PSUM banks per block:
        Q^T | dO^T | K^T | V^T in one, S | dP | dK | dV | dS^T | dQ in the other, so that
        ``SHORT_INTERLEAVE`` blocks are in flight."""
        neg = neg_lse_of(b, 0, Sq)
        qt = nl.load(q[b, :, :], dtype=cdt)                                          # [Sq, d]
        dot = nl.load(dout[b, :, :], dtype=cdt)
        kt = nl.load(k[b, :, :], dtype=cdt)                                          # [Sk, d]
        vt = nl.load(v[b, :, :], dtype=cdt)
        # D = rowsum(dO * O) in fp32 (dO's own values: the compute copy when it has dO's dtype).
        do32 = dot if dout.dtype == cdt else nl.load(dout[b, :, :], dtype="float32")
        dsum = nl.sum(nl.multiply(do32, nl.load(out[b, :, :], dtype="float32"), dtype="float32"), axis=1)
        yield
        T = _transposed((qt, dot, kt, vt), cdt, bufs=SHORT_INTERLEAVE)              # [d, 2 Sq + 2 Sk]
        qT, doT, kT, vT = T[:, :Sq], T[:, Sq:2 * Sq], T[:, 2 * Sq:2 * Sq + Sk], T[:, 2 * Sq + Sk:]
        yield
        ps = nl.ndarray((P, 2 * Sk + 2 * d + Sq + d), "float32", buffer=nl.psum, bufs=SHORT_INTERLEAVE)
        o = 2 * Sk
        sdp, dkv, pq = ps[:Sq, :o], ps[:Sk, o:o + 2 * d], ps[:, o + 2 * d:]          # S | dP, dK | dV, dS^T | dQ
        nl.isa.nc_matmul(sdp[:, :Sk], qT, kT)
        nl.isa.nc_matmul(sdp[:, Sk:], doT, vT)                                       # dP = dO V^T
        yield
        p = probabilities(sdp[:, :Sk], neg, b, 0, Sq, 0, Sk)
        p_c = nl.copy(p, dtype=cdt)
        ds = nl.multiply(nl.multiply(nl.subtract(sdp[:, Sk:], dsum), p), scale, dtype=cdt)
        yield
        nl.isa.nc_matmul(dkv[:, d:], p_c, dot)                                       # dV = P^T dO
        nl.isa.nc_matmul(dkv[:, :d], ds, qt)                                         # dK = dS^T Q
        nl.isa.nc_transpose(pq[:Sk, :Sq], ds)
        dsT = nl.copy(pq[:Sk, :Sq], dtype=cdt)                                       # [Sk, Sq]
        yield
        nl.isa.nc_matmul(pq[:Sq, Sq:], dsT, kt)                                      # dQ = dS K
        grads = nl.copy(dkv, dtype=dk_o.dtype, engine="scalar")
        nl.store(dk_o[b, :, :], grads[:, :d])
        nl.store(dv_o[b, :, :], grads[:, d:])
        yield
        nl.store(dq_o[b, :, :], nl.copy(pq[:Sq, Sq:], dtype=dq_o.dtype))

    if Sq <= P and Sk <= P and 2 * Sk + 3 * d + Sq <= KB:      # the two banks of short() hold it
        _interleave((short(b) for b in nl.affine_range(B)), SHORT_INTERLEAVE)
        return dq_o, dk_o, dv_o

    # With several key blocks, each batch-head's query side (Q and dO rows and their transposes)
    # is loaded and transposed once and kept on chip for all of them, when it fits.
    hoist = len(row_blocks(Sk)) > 1 and nqb * 2 * (d + P) * (4 if cdt == "float32" else 2) <= HOIST_BYTES
    for b in nl.affine_range(B):
        # Per query block: -lse and D = rowsum(dO * O), kept on chip for every key block.
        neg_lse = nl.ndarray((P, nqb), "float32", bufs=1)
        dsum = nl.ndarray((P, nqb), "float32", bufs=1)
        dq_acc = nl.zeros((P, nqb, d), "float32", bufs=1)
        for i, (q0, qs) in enumerate(qblocks):
            neg_lse[:qs, i:i + 1] = neg_lse_of(b, q0, qs)
            prod = nl.multiply(nl.load(dout[b, q0:q0 + qs, :], dtype="float32"),
                               nl.load(out[b, q0:q0 + qs, :], dtype="float32"))
            dsum[:qs, i:i + 1] = nl.sum(prod, axis=1)
        if hoist:
            rows = nl.ndarray((P, nqb, 2, d), cdt, bufs=1)                          # Q | dO per query block
            rowsT = nl.ndarray((d, nqb, 2 * P), cdt, bufs=1)                        # Q^T | dO^T
            for i, (q0, qs) in enumerate(qblocks):
                nl.isa.dma_copy(rows[:qs, i, 0, :], q[b, q0:q0 + qs, :])
                nl.isa.dma_copy(rows[:qs, i, 1, :], dout[b, q0:q0 + qs, :])
                _transposed((rows[:qs, i, 0, :], rows[:qs, i, 1, :]), cdt, out=rowsT[:, i, :2 * qs])
        for k0, ks in row_blocks(Sk):
            kt = nl.load(k[b, k0:k0 + ks, :], dtype=cdt)                            # [ks, d]
            kvT = _transposed((kt, nl.load(v[b, k0:k0 + ks, :], dtype=cdt)), cdt)   # [d, 2 ks]: K^T | V^T
            # PSUM: dK | dV accumulators (1 bank) + S | dP (2) + dS^T, dQ part, and the two
            # transposed operand pairs (1 each) = 7 banks.
            dkv_ps = nl.ndarray((ks, 2 * d), "float32", buffer=nl.psum, bufs=1)
            first = True
            for i, (q0, qs) in enumerate(qblocks):
                if causal and q0 + qs <= k0:
                    continue                                                       # block fully masked
                if hoist:
                    qt, dot, qdT = rows[:qs, i, 0, :], rows[:qs, i, 1, :], rowsT[:, i, :2 * qs]
                else:
                    qt = nl.load(q[b, q0:q0 + qs, :], dtype=cdt)                    # [qs, d]
                    dot = nl.load(dout[b, q0:q0 + qs, :], dtype=cdt)                # [qs, d]
                    qdT = _transposed((qt, dot), cdt)                               # [d, 2 qs]: Q^T | dO^T
                sdp = nl.ndarray((qs, 2 * ks), "float32", buffer=nl.psum, bufs=2)   # S | dP = dO V^T
                nl.isa.nc_matmul(sdp[:, :ks], qdT[:, :qs], kvT[:, :ks])
                nl.isa.nc_matmul(sdp[:, ks:], qdT[:, qs:], kvT[:, ks:])
                p = probabilities(sdp[:, :ks], neg_lse[:qs, i:i + 1], b, q0, qs, k0, ks)
                p_c = nl.copy(p, dtype=cdt)
                nl.isa.nc_matmul(dkv_ps[:, d:], p_c, dot, accumulate=not first)       # dV += P^T dO
                ds = nl.multiply(nl.multiply(nl.subtract(sdp[:, ks:], dsum[:qs, i:i + 1]), p), scale, dtype=cdt)
                nl.isa.nc_matmul(dkv_ps[:, :d], ds, qt, accumulate=not first)        # dK += dS^T Q
                dsT = nl.copy(nl.transpose(ds, bufs=1), dtype=cdt)                   # [ks, qs]
                dq_part = nl.matmul(dsT, kt, transpose_x=True, bufs=1)               # [qs, d] = dS K
                dq_acc[:qs, i, :] = nl.add(dq_acc[:qs, i, :], dq_part)
                first = False
            if first:                                                              # no query sees these keys
                nl.store(dk_o[b, k0:k0 + ks, :], nl.zeros((ks, d), dk_o.dtype))
                nl.store(dv_o[b, k0:k0 + ks, :], nl.zeros((ks, d), dv_o.dtype))
            else:
                dkv = nl.copy(dkv_ps, dtype=dk_o.dtype)
                nl.store(dk_o[b, k0:k0 + ks, :], dkv[:, :d])
                nl.store(dv_o[b, k0:k0 + ks, :], dkv[:, d:])
        for i, (q0, qs) in enumerate(qblocks):
            nl.store(dq_o[b, q0:q0 + qs, :], nl.copy(dq_acc[:qs, i, :], dtype=dq_o.dtype))
    return dq_o, dk_o, dv_o
