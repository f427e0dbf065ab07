# target: 12p_RMSNorm
# expect: incorrect
# exploit: null kernel - a pallas_call that writes zeros (passes a loose atol on tiny outputs)
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def workload(x, scale):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
