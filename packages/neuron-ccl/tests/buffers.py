"""What the multi-rank tests put in device memory: per-rank inputs, float64-safe references,
device buffers from numpy arrays and back, and the environment that forces a transport and
an all-reduce algorithm."""
from __future__ import annotations

import ml_dtypes
import numpy as np

NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
      "int32": np.int32, "int64": np.int64, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def data(rank, n, dtype, seed):
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype in ("int32", "int64", "int8", "uint8"):
        return rng.integers(0 if dtype == "uint8" else -30, 30, n).astype(NP[dtype])
    return (rng.standard_normal(n) * 3).astype(NP[dtype])


def reference(inputs, op, factor=1.0):
    wide = [x.astype(np.float32) if x.dtype in (np.float16, ml_dtypes.bfloat16) else x for x in inputs]
    fns = {"sum": np.add, "avg": np.add, "premul_sum": np.add, "max": np.maximum, "min": np.minimum,
           "product": np.multiply, "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
    out = wide[0].copy()
    for x in wide[1:]:
        out = fns[op](out, x)
    if op == "avg":
        out = out / len(inputs) if out.dtype.kind == "f" else (out // len(inputs))
    if op == "premul_sum":
        out = out * factor
    return out.astype(inputs[0].dtype)


def device_array(arr, device):
    import neuron_sim
    return neuron_sim.DeviceBuffer.from_array(np.ascontiguousarray(arr).view(np.uint8), device=device)


def read_buffer(buf, dtype, n):
    dt = np.dtype(NP[dtype] if isinstance(dtype, str) else dtype)
    return buf.to_numpy(np.uint8)[: n * dt.itemsize].view(dt).copy()


def algo_env(transport, algo=None):
    env = {"NEURON_CCL_TRANSPORT": transport, "NEURON_CCL_RING_SLICE_BYTES": "4096"}
    if algo:
        env["NEURON_CCL_ALGO"] = f"allreduce={algo}"
    return env


def all_reduce_cases(comm, cases):
    """A rank function: in-place all-reduces of (dtype, op, n, seed) cases; returns the transport
    and every result."""
    out = [comm.transport]
    for dtype, op, n, seed in cases:
        x = data(comm.rank, n, dtype, seed)
        buf = device_array(x, comm.device)
        comm.all_reduce(int(buf), int(buf), n, dtype, op, 0.5)
        out.append(read_buffer(buf, dtype, n))
        buf.free()
    return out
