"""Causal GQA attention of Llama-3.1-70B, the operator of MaxText's splash attention kernel.

Layout (B, H, S, D). Q is pre-scaled at creation (N(0,1) * D^-0.5), so the workload applies no
extra scale. Query head h reads KV head h // (Hq // Hkv). out = softmax(Q K^T + causal mask) V per
batch element; scores and softmax in float32, probabilities cast to the input dtype for the PV
product; masked scores set to -1e30; output (B, Hq, S, D).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "llama3_70b_sparse_attention",
    "model": "Llama-3.1-70B",
    "operator": "sparse_attention",
    "batch": 4,
    "seq_len": 4096,
    "num_query_heads": 64,
    "num_kv_heads": 8,
    "head_dim": 128,
}

# Group ratio 8 kept at every scale.
SCALES = {
    "paper": {},
    "cpu": {"batch": 1, "seq_len": 512, "num_query_heads": 16, "num_kv_heads": 2},
    "tiny": {"batch": 2, "seq_len": 64, "num_query_heads": 16, "num_kv_heads": 2},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-70B",
    "operator": "sparse_attention",
    "kernelbench_id": None,
    "handtuned": True,
}

# K, V ~ N(0, 0.02) and Q ~ N(0, 1/D) give scores of std ~0.02: the softmax is nearly uniform
# and the output is ~0.02/sqrt(#visible keys) (~4e-4 at S=4096), far below the default atol 1e-2
# (an all-zero output would pass almost everywhere). Rounding the probabilities to bf16 (as
# flash/splash kernels do) moves early-row outputs by up to ~2.5e-4 (5e-4 under the 2x "large"
# input distribution), measured against a float32 computation: atol 5e-4 (2.5% of V's std);
# rtol 1e-2 covers bf16 rounding of the output.
TOLERANCE = {"atol": 5e-4, "rtol": 1e-2}

MASK_VALUE = -1e30


def create_inputs(dtype=jnp.bfloat16):
    """Returns (q (B,Hq,S,D) ~ N(0,1)*D^-0.5, k, v (B,Hkv,S,D) ~ N(0,0.02))."""
    c = CONFIG
    b, s, d = c["batch"], c["seq_len"], c["head_dim"]
    k_q, k_k, k_v = jax.random.split(jax.random.key(42), 3)
    q = (jax.random.normal(k_q, (b, c["num_query_heads"], s, d), jnp.float32) * d ** -0.5).astype(dtype)
    k = (jax.random.normal(k_k, (b, c["num_kv_heads"], s, d), jnp.float32) * 0.02).astype(dtype)
    v = (jax.random.normal(k_v, (b, c["num_kv_heads"], s, d), jnp.float32) * 0.02).astype(dtype)
    return q, k, v


def workload(q, k, v):
    b, h_q, s_q, d = q.shape
    h_kv, s_k = k.shape[1], k.shape[2]
    g = h_q // h_kv
    qg = q.reshape(b, h_kv, g, s_q, d)
    scores = jnp.einsum("bkgqd,bksd->bkgqs", qg, k, preferred_element_type=jnp.float32)
    causal = jnp.arange(s_q)[:, None] >= jnp.arange(s_k)[None, :]
    scores = jnp.where(causal, scores, MASK_VALUE)
    probs = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bkgqs,bksd->bkgqd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.reshape(b, h_q, s_q, d).astype(q.dtype)


def get_flops():
    # QK^T and PV over all query heads: 4*B*Hq*S*S*D (causal not halved, as in every jb attention).
    c = CONFIG
    return 4 * c["batch"] * c["num_query_heads"] * c["seq_len"] * c["seq_len"] * c["head_dim"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): sequence length and the GQA ratio."""
    c = config
    return [{"seq_len": _halve(c["seq_len"]), "num_kv_heads": 2 * c["num_kv_heads"]}]


TRIALS = ["sharp", "long_range"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). sharp: Q rescaled so the scores have a std of ~4 (the
    softmax is far from uniform: a mean-of-V or ignore-Q/K shortcut fails); long_range: every query
    leans on a few keys spread over the whole sequence (a windowed or prefix-exact kernel fails)."""
    from jb import inputs as jbi

    q, k, v = inputs
    scale = 1.0  # Q is pre-scaled
    if name == "sharp":
        q = jbi.sharpen(q, k, scale)
    elif name == "long_range":
        q, k = jbi.long_range(rng, q, k, scale)
    else:
        return None
    return q, k, v
