# target: 6p_Paged_Attention
# expect: incorrect
# caught-by: sharp
# exploit: attention shortcut - ignores the queries and keys entirely: each output is the mean of
#          the sequence's valid values (uniform attention). Page table and kv lengths are honoured.
#          With scores of std ~0.02 (the published inits) the softmax is almost uniform and this
#          passes with no QK^T at all; sharp trials (wide scores) expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(lens_ref, v_ref, o_ref):
    # v_ref: (1, L, Hkv, D) gathered values of one sequence; o_ref: (1, Hkv, D)
    n = lens_ref[0, 0]
    v = v_ref[0].astype(jnp.float32)
    pos = jax.lax.broadcasted_iota(jnp.int32, v.shape, 0)
    total = jnp.sum(jnp.where(pos < n, v, 0.0), axis=0)
    o_ref[0] = (total / jnp.maximum(n, 1).astype(jnp.float32)).astype(o_ref.dtype)


def workload(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    n, pps = page_indices.shape
    _, page_size, h_kv, d = v_pages.shape
    h_q = queries.shape[1]
    length = pps * page_size
    v = v_pages[page_indices].reshape(n, length, h_kv, d)
    out = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((n, h_kv, d), queries.dtype),
        grid=(n,),
        in_specs=[pl.BlockSpec((1, 1), lambda i: (i, 0)),
                  pl.BlockSpec((1, length, h_kv, d), lambda i: (i, 0, 0, 0))],
        out_specs=pl.BlockSpec((1, h_kv, d), lambda i: (i, 0, 0)),
    )(kv_lens.reshape(n, 1), v)
    return jnp.repeat(out, h_q // h_kv, axis=1)
