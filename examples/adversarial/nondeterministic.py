# target: 12p_RMSNorm
# expect: rejected
# exploit: nondeterminism (what uninitialised reads look like) - random one-ulp-scale noise added
#          through a host callback; small enough to pass the tolerance, but two runs on the same
#          inputs differ (reason recorded) and the host callback is rejected
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _rmsnorm(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)


def _noise(y):
    rng = np.random.default_rng()
    return (np.asarray(y, np.float32) * (1.0 + rng.uniform(-2e-3, 2e-3, y.shape))).astype(np.float32)


def workload(x, scale):
    y = _rmsnorm(x, scale).astype(jnp.float32)
    y = io_callback(_noise, jax.ShapeDtypeStruct(y.shape, jnp.float32), y)
    return y.astype(x.dtype)
