# target: 16p_Mamba2_SSD
# expect: incorrect
# caught-by: long_range
# exploit: truncated state - each 16-row query block only looks at its own block and the previous
#          one (16-31 steps back at most), as if the decay made everything older vanish. With
#          A_log ~ N(-4, 0.5) (a_t ~ 0.02) that is true and this passes with O(S * 32) work instead
#          of O(S^2). Slow-decay (long-range) trials expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 16


def _kernel(q_ref, k_ref, v_ref, a_ref, o_ref):
    q = q_ref[0, 0].astype(jnp.float32)  # (S, D)
    k = k_ref[0, 0].astype(jnp.float32)
    v = v_ref[0, 0]
    s = q.shape[0]
    cum = jnp.cumsum(jax.nn.log_sigmoid(a_ref[0].astype(jnp.float32)), axis=-1)  # (1, S) -> (S,)
    cum = cum.reshape(s)
    row = jax.lax.broadcasted_iota(jnp.int32, (s, s), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (s, s), 1)
    band = (col <= row) & (col >= (row // BLOCK - 1) * BLOCK)  # own block + the previous one
    decay = jnp.where(band, jnp.exp(jnp.where(band, cum[:, None] - cum[None, :], 0.0)), 0.0)
    scores = jnp.dot(q, k.T) * decay
    scores = scores / jnp.maximum(jnp.abs(jnp.sum(scores, axis=-1, keepdims=True)), 1.0)
    o_ref[0, 0] = jnp.dot(scores.astype(v.dtype), v, preferred_element_type=jnp.float32).astype(o_ref.dtype)


def workload(query, key, value, A_log):
    b, h, s, d = query.shape
    spec = pl.BlockSpec((1, 1, s, d), lambda i, j: (i, j, 0, 0))
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct(query.shape, query.dtype),
        grid=(b, h),
        in_specs=[spec, spec, spec, pl.BlockSpec((1, 1, s), lambda i, j: (i, j, 0))],
        out_specs=spec,
    )(query, key, value, A_log)
