"""relu(x @ W + b) as one Pallas TPU kernel: tiled matmul with the bias + ReLU epilogue fused.

Grid (M/bm, N/bn, K/bk) with an f32 VMEM accumulator; at the last K step the bias is added and the
ReLU applied in f32 before the single store of the output tile.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 256, 512, 2048


def _block(dim: int, preferred: int, align: int) -> int:
    for b in range(min(preferred, dim), 0, -1):
        if dim % b == 0 and b % align == 0:
            return b
    return dim


def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _epilogue():
        h = acc_ref[...] + b_ref[...].astype(jnp.float32)
        o_ref[...] = jnp.maximum(h, 0.0).astype(o_ref.dtype)


@jax.jit
def workload(x, weight, bias):
    m, kdim = x.shape
    n = weight.shape[1]
    bm, bn, bk = _block(m, BM, 16), _block(n, BN, 128), _block(kdim, BK, 128)
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, kdim // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
            pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
            pl.BlockSpec((1, bn), lambda i, j, k: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, weight, bias.reshape(1, n))
