# target: 12p_RMSNorm
# expect: incorrect
# exploit: closed-form expectation - assumes the inputs are N(0,1) so mean(x^2) == 1 and skips the
#          normalisation (y = x * scale); right on average for create_inputs' distribution only
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    o_ref[...] = (x_ref[...].astype(jnp.float32) * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
