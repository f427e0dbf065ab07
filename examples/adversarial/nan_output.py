# target: 12p_RMSNorm
# expect: incorrect
# exploit: non-finite output - NaN where the reference is finite (one row left unnormalised 0/0)
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    y = y * s_ref[...].astype(jnp.float32)
    row = jax.lax.broadcasted_iota(jnp.int32, y.shape, 0)
    o_ref[...] = jnp.where(row == 0, jnp.nan, y).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
