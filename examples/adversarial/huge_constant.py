# target: 12p_RMSNorm
# expect: rejected
# exploit: folded constant - recomputes the reference output for create_inputs' fixed seed at trace
#          time (the shapes are known) and bakes it into the program as a constant; a pallas_call
#          merely copies it out
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def _copy(c_ref, o_ref):
    o_ref[...] = c_ref[...]


def _expected(shape, dtype):
    with jax.ensure_compile_time_eval():
        b, s, d = shape
        k_x, k_s = jax.random.split(jax.random.key(42), 2)
        x = jax.random.normal(k_x, (b, s, d), jnp.float32).astype(dtype).astype(jnp.float32)
        sc = (jax.random.normal(k_s, (d,), jnp.float32) * 0.1 + 1.0).astype(dtype).astype(jnp.float32)
        y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * sc
        return np.asarray(y.astype(dtype))


def workload(x, scale):
    const = jnp.asarray(_expected(x.shape, x.dtype))
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(const)
