# target: 12p_RMSNorm
# expect: rejected
# exploit: input mutation - while running, zeroes the caller's input buffer in place (ctypes write
#          through unsafe_buffer_pointer) so that a reference computed afterwards sees garbage
import ctypes

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _scribble(shape_probe):
    for arr in jax.live_arrays():
        if arr.shape == shape_probe.shape and arr.dtype == shape_probe.dtype and not arr.is_deleted():
            try:
                ctypes.memset(arr.unsafe_buffer_pointer(), 0, arr.nbytes)
            except Exception:  # noqa: BLE001
                pass
    return np.zeros((), np.float32)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    done = io_callback(_scribble, jax.ShapeDtypeStruct((), jnp.float32), x, ordered=True)
    return (out.reshape(b, s, d).astype(jnp.float32) + done).astype(x.dtype)
