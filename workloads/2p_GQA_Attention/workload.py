"""Grouped-query causal attention of Llama-3.1-405B (MaxText), layout (B, S, H, D).

Query head h reads KV head h // (Hq // Hkv) (the same as repeating K/V x16 along the head axis).
out = softmax(Q K^T / sqrt(D) + causal mask) V; scores and softmax in float32, probabilities cast
to the input dtype for the PV product; masked scores set to -1e9; output (B, S, Hq, D).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "llama3_405b_gqa",
    "model": "Llama-3.1-405B",
    "operator": "gqa_attention",
    "batch": 4,
    "seq_len": 4096,
    "num_query_heads": 128,
    "num_kv_heads": 8,
    "head_dim": 128,
    "emb_dim": 16384,
}

# Group ratio 16 is kept at every scale; emb_dim (= Hq * D, unused by the operator) follows.
SCALES = {
    "paper": {},
    "cpu": {"batch": 1, "seq_len": 256, "num_query_heads": 32, "num_kv_heads": 2, "emb_dim": 4096},
    "tiny": {"batch": 2, "seq_len": 32, "num_query_heads": 32, "num_kv_heads": 2, "emb_dim": 4096},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-405B",
    "operator": "gqa_attention",
    "kernelbench_id": None,
    "handtuned": True,
}

MASK_VALUE = -1e9


def create_inputs(dtype=jnp.bfloat16):
    """Returns (query (B,S,Hq,D), key (B,S,Hkv,D), value (B,S,Hkv,D)), all ~ N(0, 1)."""
    c = CONFIG
    b, s, d = c["batch"], c["seq_len"], c["head_dim"]
    k_q, k_k, k_v = jax.random.split(jax.random.key(42), 3)
    q = jax.random.normal(k_q, (b, s, c["num_query_heads"], d), jnp.float32).astype(dtype)
    k = jax.random.normal(k_k, (b, s, c["num_kv_heads"], d), jnp.float32).astype(dtype)
    v = jax.random.normal(k_v, (b, s, c["num_kv_heads"], d), jnp.float32).astype(dtype)
    return q, k, v


def workload(query, key, value):
    b, s_q, h_q, d = query.shape
    s_k, h_kv = key.shape[1], key.shape[2]
    g = h_q // h_kv
    q = query.reshape(b, s_q, h_kv, g, d).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, S, D)
    k = key.transpose(0, 2, 1, 3)  # (B, Hkv, S, D)
    v = value.transpose(0, 2, 1, 3)
    scores = jnp.einsum("bkgqd,bksd->bkgqs", q, k, preferred_element_type=jnp.float32)
    scores = scores * (d ** -0.5)
    causal = jnp.arange(s_q)[:, None] >= jnp.arange(s_k)[None, :]
    scores = jnp.where(causal, scores, MASK_VALUE)
    probs = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bkgqs,bksd->bkgqd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.transpose(0, 3, 1, 2, 4).reshape(b, s_q, h_q, d).astype(query.dtype)


def get_flops():
    # QK^T and PV over all query heads: 4*B*Hq*S*S*D (causal not halved, as in every jb attention).
    c = CONFIG
    return 4 * c["batch"] * c["num_query_heads"] * c["seq_len"] * c["seq_len"] * c["head_dim"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): sequence length and the GQA ratio (half as many query heads per KV head)."""
    c = config
    return [{"seq_len": _halve(c["seq_len"]), "num_kv_heads": 2 * c["num_kv_heads"]}]


TRIALS = ["sharp", "long_range"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). sharp: Q rescaled so the scores have a std of ~4 (the
    softmax is far from uniform: a mean-of-V or ignore-Q/K shortcut fails); long_range: every query
    leans on a few keys spread over the whole sequence (a windowed or prefix-exact kernel fails)."""
    from jb import inputs as jbi

    q, k, v = inputs  # (B, S, H, D)
    scale = q.shape[-1] ** -0.5
    if name == "sharp":
        # std 2 (twice the published spread): the hand-tuned splash baseline pre-scales Q by
        # D^-0.5 in bf16, a score error ~|score| * 2^-9 that a std of 4 turns into 4-ulp outputs.
        q = jbi.sharpen(q, k, scale, target_std=2.0)
    elif name == "long_range":
        qt, kt = jbi.long_range(rng, jnp.swapaxes(q, 1, 2), jnp.swapaxes(k, 1, 2), scale)
        q, k = jnp.swapaxes(qt, 1, 2), jnp.swapaxes(kt, 1, 2)
    else:
        return None
    return q, k, v
