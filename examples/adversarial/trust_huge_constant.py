# target: 12p_RMSNorm
# expect: rejected
# exploit: baked answer in pieces - recomputes the reference output for create_inputs' fixed seed at
#          trace time and embeds it in the exported program as many small constants (each under the
#          per-constant size limit), concatenated; a pallas_call merely copies the result out
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

CHUNK_ELEMENTS = 2048


def _copy(c_ref, o_ref):
    o_ref[...] = c_ref[...]


def _expected(shape, dtype):
    with jax.ensure_compile_time_eval():
        b, s, d = shape
        k_x, k_s = jax.random.split(jax.random.key(42), 2)
        x = jax.random.normal(k_x, (b, s, d), jnp.float32).astype(dtype).astype(jnp.float32)
        sc = (jax.random.normal(k_s, (d,), jnp.float32) * 0.1 + 1.0).astype(dtype).astype(jnp.float32)
        y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * sc
        return np.asarray(y.astype(dtype)).reshape(b * s, d)


def workload(x, scale):
    b, s, d = x.shape
    rows = _expected(x.shape, x.dtype)
    step = max(1, CHUNK_ELEMENTS // d)
    pieces = [jnp.asarray(rows[i:i + step]) for i in range(0, rows.shape[0], step)]
    const = jnp.concatenate(pieces, axis=0).reshape(b, s, d)
    return pl.pallas_call(_copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(const)
