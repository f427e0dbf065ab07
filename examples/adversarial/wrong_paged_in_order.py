# target: 6p_Paged_Attention
# expect: incorrect
# caught-by: random_pages (every trial)
# exploit: ignores the page table and the kv lengths: sequence i reads pages
#          [i*pages_per_seq, (i+1)*pages_per_seq) in order and attends to every position (exactly
#          what create_inputs builds: an identity page table and full lengths). Contiguous reads,
#          no scalar prefetch, no masking. Random page tables and lengths expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(q_ref, k_ref, v_ref, o_ref):
    # q_ref (1, Hq, D); k_ref, v_ref (pps, page_size, Hkv, D) = the sequence's pages, in order
    q = q_ref[0].astype(jnp.float32)
    pps, page_size, h_kv, d = k_ref.shape
    k = k_ref[...].astype(jnp.float32).reshape(pps * page_size, h_kv, d)
    v = v_ref[...].astype(jnp.float32).reshape(pps * page_size, h_kv, d)
    g = q.shape[0] // h_kv
    outs = []
    for h in range(h_kv):
        qh = q[h * g:(h + 1) * g]  # (g, D)
        s = jnp.dot(qh, k[:, h, :].T) * (d ** -0.5)
        p = jax.nn.softmax(s, axis=-1)
        outs.append(jnp.dot(p, v[:, h, :]))
    o_ref[0] = jnp.concatenate(outs, axis=0).astype(o_ref.dtype)


def workload(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    n, pps = page_indices.shape
    _, page_size, h_kv, d = k_pages.shape
    h_q = queries.shape[1]
    page_block = pl.BlockSpec((pps, page_size, h_kv, d), lambda i: (i, 0, 0, 0))
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((n, h_q, d), queries.dtype),
        grid=(n,),
        in_specs=[pl.BlockSpec((1, h_q, d), lambda i: (i, 0, 0)), page_block, page_block],
        out_specs=pl.BlockSpec((1, h_q, d), lambda i: (i, 0, 0)),
    )(queries[:n], k_pages, v_pages)
