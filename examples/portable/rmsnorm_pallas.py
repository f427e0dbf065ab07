"""RMSNorm (12p_RMSNorm) as a portable Pallas kernel: no TPU-only parameters, so it lowers on GPU
(Triton) as well as in interpret mode on CPU. Rows tiled (``block`` rows x the full embedding
dimension per program), f32 math. Used by `jb doctor --device-check` (python/jb/tools/device_check.py)
as a GPU-runnable candidate; its speedup over XLA is whatever it is: the check is of the
measurement, not of the kernel.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

EPSILON = 1e-5  # CONFIG["epsilon"] of 12p_RMSNorm


def _row_block(rows: int, preferred: int = 16) -> int:
    # A power of two (Triton needs one) dividing the row count.
    b = preferred
    while b > 1 and rows % b:
        b //= 2
    return b


def _rmsnorm_kernel(x_ref, scale_ref, o_ref, *, eps):
    x = x_ref[...].astype(jnp.float32)
    mean_sq = jnp.mean(x * x, axis=-1, keepdims=True)
    y = x * jax.lax.rsqrt(mean_sq + eps)
    o_ref[...] = (y * scale_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@jax.jit
def workload(x, scale):
    b, s, d = x.shape
    rows = b * s
    block = _row_block(rows)
    out = pl.pallas_call(
        functools.partial(_rmsnorm_kernel, eps=EPSILON),
        out_shape=jax.ShapeDtypeStruct((rows, d), x.dtype),
        grid=(rows // block,),
        in_specs=[
            pl.BlockSpec((block, d), lambda i: (i, 0)),
            pl.BlockSpec((1, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((block, d), lambda i: (i, 0)),
    )(x.reshape(rows, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
