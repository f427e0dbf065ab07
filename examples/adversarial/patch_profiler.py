# target: 12p_RMSNorm
# expect: rejected
# exploit: profiler monkey-patch - jax.profiler.trace/start_trace/stop_trace replaced so that no
#          trace (or a forged one) is written; the kernel is correct
import contextlib

import jax
import jax.numpy as jnp
import jax.profiler
from jax.experimental import pallas as pl

jax.profiler.trace = lambda *a, **k: contextlib.nullcontext()
jax.profiler.start_trace = lambda *a, **k: None
jax.profiler.stop_trace = lambda *a, **k: None


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
