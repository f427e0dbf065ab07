"""Tiled matmul as a Pallas TPU kernel: grid (M/bm, N/bn, K/bk), f32 VMEM accumulator.

``PrefetchScalarGridSpec`` with dimension semantics (parallel, parallel, arbitrary); the K axis is
innermost, the accumulator is zeroed at k == 0 and written out at the last k. Block sizes are the
largest divisors of each dimension not above the preferred size that respect the TPU tiling
(multiples of 128 lanes / 16 bf16 sublanes), else the full dimension.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 512, 512, 512


def _block(dim: int, preferred: int, align: int) -> int:
    for b in range(min(preferred, dim), 0, -1):
        if dim % b == 0 and b % align == 0:
            return b
    return dim


def _matmul_kernel(a_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@jax.jit
def workload(a, b):
    m, kdim = a.shape
    _, n = b.shape
    bm, bn, bk = _block(m, BM, 16), _block(n, BN, 128), _block(kdim, BK, 128)
    return pl.pallas_call(
        _matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(m // bm, n // bn, kdim // bk),
            in_specs=[
                pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(a, b)
