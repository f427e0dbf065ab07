# target: 12p_RMSNorm
# expect: rejected
# exploit: background thread - starts a thread at import that keeps running (where deferred work,
#          or a later monkey-patch, would happen outside the timed region); the kernel is correct
import threading
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _busy():
    while True:
        time.sleep(0.01)


threading.Thread(target=_busy, name="deferred-work", daemon=True).start()


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _rmsnorm(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)


def workload(x, scale):
    return _rmsnorm(x, scale)
