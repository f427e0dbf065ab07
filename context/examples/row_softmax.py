"""Example: a row-wise reduction kernel (softmax over the last axis), blocked over rows.

Pattern: each grid step owns a block of whole rows, so the reduction over the last axis happens
entirely inside one block -- no cross-step communication is needed. The same shape of kernel
serves RMSNorm, LayerNorm, log-softmax and other per-row normalisations.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _pick_block(rows: int, preferred: int = 256, align: int = 8) -> int:
    # A block must divide the array dimension exactly (or be the whole dimension), and on TPU
    # the second-to-last block dimension should be a multiple of 8 (16 for bf16 packing is even
    # better). Search downward for the largest aligned divisor.
    for b in range(min(preferred, rows), 0, -1):
        if rows % b == 0 and b % align == 0:
            return b
    return rows  # fall back to one block spanning every row


def _softmax_kernel(x_ref, o_ref):
    # x_ref / o_ref are views of the current (block_rows, d) block in fast memory (VMEM).
    x = x_ref[...].astype(jnp.float32)           # statistics in float32, never in bf16
    m = jnp.max(x, axis=-1, keepdims=True)       # subtract the row max for stability
    e = jnp.exp(x - m)
    s = jnp.sum(e, axis=-1, keepdims=True)
    o_ref[...] = (e / s).astype(o_ref.dtype)     # cast back to the output dtype at the end


@jax.jit
def softmax_rows(x):
    *lead, d = x.shape
    rows = 1
    for n in lead:
        rows *= n
    x2 = x.reshape(rows, d)                      # flatten leading axes: one row axis to tile
    block = _pick_block(rows)
    out = pl.pallas_call(
        _softmax_kernel,
        out_shape=jax.ShapeDtypeStruct((rows, d), x.dtype),
        grid=(rows // block,),
        # The index map takes the grid indices and returns BLOCK indices (not element offsets):
        # block i covers rows [i*block, (i+1)*block).
        in_specs=[pl.BlockSpec((block, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block, d), lambda i: (i, 0)),
        # Row blocks are independent: mark the axis parallel.
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x2)
    return out.reshape(x.shape)


# A broadcast operand (for example a per-column scale of shape (d,)) is passed as (1, d) with
# the index map `lambda i: (0, 0)`: every grid step sees the same block, and it is fetched once.
