"""Example: a tiled matmul with a float32 accumulator and a fused epilogue (bias + activation).

Pattern: grid (M/bm, N/bn, K/bk) with the reduction axis K innermost. The output block (i, j)
stays the same while k advances, so partial sums live in a VMEM scratch accumulator: zero it at
k == 0, add one (bm, bk) x (bk, bn) product per step, and apply the epilogue and write the output
only at the last k. Fusing the epilogue saves a full extra pass over the output in HBM.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _block(dim: int, preferred: int, align: int) -> int:
    # Largest divisor of `dim` that is <= preferred and a multiple of `align`; else the full dim.
    for b in range(min(preferred, dim), 0, -1):
        if dim % b == 0 and b % align == 0:
            return b
    return dim


def _kernel(a_ref, b_ref, bias_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # bf16 x bf16 on the matrix unit, accumulated in float32.
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _epilogue():
        y = acc_ref[...] + bias_ref[...].astype(jnp.float32)
        o_ref[...] = jnp.maximum(y, 0.0).astype(o_ref.dtype)   # ReLU, then cast once


@jax.jit
def matmul_bias_relu(a, b, bias):
    m, kdim = a.shape
    _, n = b.shape
    # 128-lane alignment for the last dimension of every block; 16 sublanes for bf16 rows.
    bm, bn, bk = _block(m, 512, 16), _block(n, 512, 128), _block(kdim, 512, 128)
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(m // bm, n // bn, kdim // bk),
            in_specs=[
                pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
                pl.BlockSpec((1, bn), lambda i, j, k: (0, j)),    # bias: one row, follows j
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        ),
        # i and j are independent; k carries the accumulator, so it must stay "arbitrary".
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(a, b, bias.reshape(1, n))
