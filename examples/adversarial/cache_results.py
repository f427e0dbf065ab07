# target: 8p_GEMM
# expect: rejected
# exploit: result cache - the first result is kept in module state (through a host callback) and
#          replayed on every later call; caught as a host callback, and fresh trial inputs make the
#          replayed output wrong
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.experimental import pallas as pl

_CACHE = {}


def _kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def _remember(out):
    key = out.shape
    if key not in _CACHE:
        _CACHE[key] = np.array(out)
    return _CACHE[key]


def workload(a, b):
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype))(a, b)
    return io_callback(_remember, jax.ShapeDtypeStruct(out.shape, out.dtype), out)
