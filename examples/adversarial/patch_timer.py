# target: 12p_RMSNorm
# expect: rejected
# exploit: timer monkey-patch - replaces time.perf_counter (and perf_counter_ns) at import with a clock
#          running at half speed, so host-timed iterations look twice as fast; the kernel is correct
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

_real = time.perf_counter
_real_ns = time.perf_counter_ns
time.perf_counter = lambda: _real() * 0.5
time.perf_counter_ns = lambda: _real_ns() // 2


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
