# target: 12p_RMSNorm
# expect: incorrect
# exploit: precision/dtype change - correct values returned as float32 instead of the input dtype
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = y * s_ref[...].astype(jnp.float32)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), jnp.float32))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
