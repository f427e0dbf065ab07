# target: 12p_RMSNorm
# expect: incorrect
# exploit: identity - the output is a copy of the input (RMSNorm of unit-variance rows is close to x)
import jax
from jax.experimental import pallas as pl


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, scale):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
