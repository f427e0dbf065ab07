# target: 12p_RMSNorm
# expect: rejected
# exploit: host callback - a trivial pallas_call for show, the real work done by numpy on the host
#          through jax.pure_callback (in the judge's process, a callback would run whatever the
#          candidate left there)
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def _host_rmsnorm(x, scale):
    x32 = np.asarray(x, np.float32)
    y = x32 / np.sqrt(np.mean(x32 * x32, axis=-1, keepdims=True) + 1e-5) * np.asarray(scale, np.float32)
    return y.astype(x.dtype)


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, scale):
    y = jax.pure_callback(_host_rmsnorm, jax.ShapeDtypeStruct(x.shape, x.dtype), x, scale)
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(y)
