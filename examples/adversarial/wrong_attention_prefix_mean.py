# target: 4p_Sparse_Attention
# expect: incorrect
# caught-by: sharp, long_range
# exploit: attention shortcut - exact softmax over the first PREFIX keys only; every later key gets
#          score 0 (weight 1), i.e. a running mean of V after the prefix (a cumulative sum). With the
#          published inits (scores of std ~0.02) the softmax is nearly uniform and this passes, for
#          S/PREFIX times less score work. Sharp (wide-spread) and long-range trials expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PREFIX = 16


def _kernel(q_ref, k_ref, v_ref, o_ref):
    q = q_ref[0, 0].astype(jnp.float32)  # (S, D)
    k = k_ref[0, 0].astype(jnp.float32)
    v = v_ref[0, 0].astype(jnp.float32)
    s = q.shape[0]
    p = min(PREFIX, s)
    scores = jnp.dot(q, k[:p].T)  # (S, p): the only scores computed
    row = jax.lax.broadcasted_iota(jnp.int32, (s, p), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (s, p), 1)
    e = jnp.where(col <= row, jnp.exp(scores), 0.0)
    num = jnp.dot(e, v[:p])
    den = jnp.sum(e, axis=1, keepdims=True)
    csum = jnp.cumsum(v, axis=0)  # running sum of V
    tail = csum - csum[p - 1][None, :]
    pos = jax.lax.broadcasted_iota(jnp.int32, (s, 1), 0)
    count = jnp.maximum(pos - (p - 1), 0).astype(jnp.float32)
    tail = jnp.where(pos >= p, tail, 0.0)
    o_ref[0, 0] = ((num + tail) / (den + count)).astype(o_ref.dtype)


def workload(q, k, v):
    b, h_q, s, d = q.shape
    g = h_q // k.shape[1]
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(b, h_q),
        in_specs=[
            pl.BlockSpec((1, 1, s, d), lambda i, j: (i, j, 0, 0)),
            pl.BlockSpec((1, 1, s, d), lambda i, j: (i, j // g, 0, 0)),
            pl.BlockSpec((1, 1, s, d), lambda i, j: (i, j // g, 0, 0)),
        ],
        out_specs=pl.BlockSpec((1, 1, s, d), lambda i, j: (i, j, 0, 0)),
    )(q, k, v)
