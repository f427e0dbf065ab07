"""Paged decode attention of Llama-3.1-70B (MaxText paged_attention_kernel_v2), GQA.

Each of num_seqs sequences has one query token (row cu_q_lens[i] of queries) and a KV cache stored
in pages: page_indices[i] lists its pages in k_pages / v_pages (total_pages, page_size, Hkv, D).
Query head h reads KV head h // (Hq // Hkv); keys at positions >= kv_lens[i] are masked (-1e30).
out[i] = softmax(q K^T / sqrt(D)) V; scores and softmax in float32, probabilities cast to the
input dtype for the PV product; output (num_seqs, Hq, D).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "llama3_70b_paged_attention",
    "model": "Llama-3.1-70B",
    "operator": "paged_attention",
    "num_seqs": 64,
    "max_seq_len": 4096,
    "num_query_heads": 64,
    "num_kv_heads": 8,
    "head_dim": 128,
    "page_size": 16,
    "pages_per_seq": 256,
}

# Group ratio 8, head_dim 128 and page size 16 kept; max_seq_len = pages_per_seq * page_size.
SCALES = {
    "paper": {},
    "cpu": {"num_seqs": 8, "max_seq_len": 1024, "num_query_heads": 32, "num_kv_heads": 4,
            "pages_per_seq": 64},
    "tiny": {"num_seqs": 4, "max_seq_len": 128, "num_query_heads": 16, "num_kv_heads": 2,
             "pages_per_seq": 8},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-70B",
    "operator": "paged_attention",
    "kernelbench_id": None,
    "handtuned": True,
}

# K, V ~ N(0, 0.02) and Q ~ N(0, 1) give scores of std ~0.02: the softmax is nearly uniform and
# each output is ~0.02/sqrt(kv_len) (~3e-4 at kv_len 4096). jb's trials therefore draw random kv
# lengths (some within one page: outputs ~V itself, ~0.02) and a "sharp" trial (scores of std ~4).
# Under sharp scores an honest kernel that rounds the scores to bf16 (the hand-tuned Pallas
# paged_attention does) moves outputs by up to ~5e-4 (measured 4.9e-4 at tiny scale): atol 5e-4
# (2.5% of V's std, as 4p/5p); rtol 1e-2 covers bf16 rounding of the output. An all-zero or
# query-ignoring output is off by ~1e-2 on the short and sharp trials.
TOLERANCE = {"atol": 5e-4, "rtol": 1e-2}

MASK_VALUE = -1e30


def create_inputs(dtype=jnp.bfloat16):
    """Returns (queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens).

    queries (num_seqs, Hq, D) ~ N(0,1); k_pages, v_pages (num_seqs*pages_per_seq, page_size, Hkv, D)
    ~ N(0,0.02); kv_lens = max_seq_len for every sequence; sequence i owns pages
    [i*pages_per_seq, (i+1)*pages_per_seq); cu_q_lens = 0..num_seqs (one query token each).
    """
    c = CONFIG
    n, h_q, h_kv, d = c["num_seqs"], c["num_query_heads"], c["num_kv_heads"], c["head_dim"]
    total_pages = n * c["pages_per_seq"]
    k_q, k_k, k_v = jax.random.split(jax.random.key(42), 3)
    queries = jax.random.normal(k_q, (n, h_q, d), jnp.float32).astype(dtype)
    page_shape = (total_pages, c["page_size"], h_kv, d)
    k_pages = (jax.random.normal(k_k, page_shape, jnp.float32) * 0.02).astype(dtype)
    v_pages = (jax.random.normal(k_v, page_shape, jnp.float32) * 0.02).astype(dtype)
    kv_lens = jnp.full((n,), c["max_seq_len"], jnp.int32)
    page_indices = jnp.arange(total_pages, dtype=jnp.int32).reshape(n, c["pages_per_seq"])
    cu_q_lens = jnp.arange(n + 1, dtype=jnp.int32)
    return queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens


def workload(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    n, pages_per_seq = page_indices.shape
    _, page_size, h_kv, d = k_pages.shape
    h_q = queries.shape[1]
    g = h_q // h_kv
    length = pages_per_seq * page_size
    q = queries[cu_q_lens[:-1]].reshape(n, h_kv, g, d)  # the decode token of each sequence
    k = k_pages[page_indices].reshape(n, length, h_kv, d)
    v = v_pages[page_indices].reshape(n, length, h_kv, d)
    scores = jnp.einsum("nkgd,nlkd->nkgl", q, k, preferred_element_type=jnp.float32) * (d ** -0.5)
    valid = jnp.arange(length)[None, :] < kv_lens[:, None]
    scores = jnp.where(valid[:, None, None, :], scores, MASK_VALUE)
    probs = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("nkgl,nlkd->nkgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.reshape(n, h_q, d).astype(queries.dtype)


def get_flops():
    # Real work only: 4 * Hq * D * sum(kv_lens) (QK^T and PV of one query token per sequence);
    # create_inputs gives every sequence kv_len = max_seq_len.
    c = CONFIG
    return 4 * c["num_seqs"] * c["num_query_heads"] * c["max_seq_len"] * c["head_dim"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): sequence count and page size (pages per sequence halved: same max_seq_len)."""
    c = config
    return [{"num_seqs": _halve(c["num_seqs"]), "page_size": 2 * c["page_size"], "pages_per_seq": c["pages_per_seq"] // 2}]


TRIALS = ["random_pages", "sharp"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs), every trial: a random page table (each sequence gets random,
    scattered pages of the pool) and random kv lengths (one full, one within the first page, the
    rest uniform in [1, max]). random_pages: half the sequences short (< 2 pages), half full.
    sharp: Q rescaled so the scores have a std of ~4 (a kernel ignoring Q/K fails)."""
    import numpy as np
    from jb import inputs as jbi

    queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens = inputs
    n, pps = page_indices.shape
    total, page_size = k_pages.shape[0], k_pages.shape[1]
    max_len = pps * page_size
    table = rng.permutation(total)[: n * pps].reshape(n, pps)
    if name == "random_pages":
        lens = np.where(np.arange(n) % 2 == 0, rng.integers(1, 2 * page_size, n), max_len)
    else:
        lens = rng.integers(1, max_len + 1, n)
        lens[0] = max_len
        if n > 1:
            lens[1] = rng.integers(1, page_size + 1)
    lens = rng.permutation(np.minimum(lens, max_len))
    if name == "sharp":
        queries = jbi.sharpen(queries, k_pages, queries.shape[-1] ** -0.5)
    return (queries, k_pages, v_pages, jbi.like(kv_lens, lens), jbi.like(page_indices, table), cu_q_lens)
