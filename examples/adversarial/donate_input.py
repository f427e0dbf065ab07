# target: 12p_RMSNorm
# expect: rejected
# exploit: donation - asks for its input buffer to be donated (donate_argnums) and, since a jit
#          nested in the harness's jit cannot donate, deletes the caller's input arrays from a host
#          callback instead; the reference would then read freed memory
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _free_inputs(probe):
    for arr in jax.live_arrays():
        if arr.shape == probe.shape and arr.dtype == probe.dtype and not arr.is_deleted():
            try:
                arr.delete()
            except Exception:  # noqa: BLE001
                pass
    return np.zeros((), np.float32)


@functools.partial(jax.jit, donate_argnums=(0,))
def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    done = io_callback(_free_inputs, jax.ShapeDtypeStruct((), jnp.float32), x, ordered=True)
    return (out.reshape(b, s, d).astype(jnp.float32) + done).astype(x.dtype)
