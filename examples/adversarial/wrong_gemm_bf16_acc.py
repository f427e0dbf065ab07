# target: 8p_GEMM
# expect: incorrect
# caught-by: variant (K 8192)
# exploit: bf16 accumulator - the tiled matmul accumulates its K tiles directly in the bf16 output
#          block (no f32 VMEM scratch: half the VMEM, no final cast). Each partial sum is rounded
#          to bf16; with one K tile (K <= 512, the tiny scale) that is exact, over many tiles the
#          rounding errors add up. A held-out variant with a long reduction exposes it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN, BK = 256, 512, 512


def _block(dim: int, preferred: int, align: int) -> int:
    for b in range(min(preferred, dim), 0, -1):
        if dim % b == 0 and b % align == 0:
            return b
    return dim


def _kernel(a_ref, b_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    part = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = (o_ref[...].astype(jnp.float32) + part).astype(o_ref.dtype)  # rounded every K step


@jax.jit
def workload(a, b):
    m, kdim = a.shape
    n = b.shape[1]
    bm, bn, bk = _block(m, BM, 16), _block(n, BN, 128), _block(kdim, BK, 128)
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(m // bm, n // bn, kdim // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                      pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(a, b)
