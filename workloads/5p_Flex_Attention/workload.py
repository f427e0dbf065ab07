"""Flex attention of Llama-3.1-70B (MaxText attention_op): causal MHA with a score modifier.

The score modifier is a learned relative-position bias per head: scores = Q K^T / sqrt(D) + bias[h],
then the causal mask (-1e30) and softmax. Layout (B, H, S, D), bias (H, S, S); output (B, H, S, D).
As in the published program, the scores, the bias add, the softmax and the PV product are computed
in the input dtype (bf16 end to end: the dots accumulate in float32 inside the MXU and round their
result to bf16); jb's earlier version kept scores and softmax in float32.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "llama3_70b_flex_attention",
    "model": "Llama-3.1-70B",
    "operator": "flex_attention",
    "batch": 4,
    "seq_len": 4096,
    "num_heads": 64,
    "head_dim": 128,
}

SCALES = {
    "paper": {},
    "cpu": {"batch": 1, "seq_len": 1024, "num_heads": 4},
    "tiny": {"batch": 2, "seq_len": 64, "num_heads": 4},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-70B",
    "operator": "flex_attention",
    "kernelbench_id": None,
    "handtuned": False,
}

# K, V ~ N(0, 0.02) and a N(0, 0.01) bias give scores of std ~0.02: the softmax is nearly uniform
# and the output is ~0.02/sqrt(#visible keys) (~4e-4 at S=4096); jb's "sharp" and "long_range"
# trials make it far from uniform (outputs ~V, ~0.08 at most). The reference is bf16 end to end as
# published; an honest kernel that keeps scores and softmax in float32 (flash/splash numerics)
# differs from it by up to 2.4e-4 on the generic trials and 1.6e-3 on the sharp/long-range ones
# (measured at tiny scale, 2 seeds each): atol 2e-3; rtol 2e-2 covers bf16 rounding of the
# probabilities and the output. Attention shortcuts (mean of V, ignored Q/K) are off by ~1e-2.
TOLERANCE = {"atol": 2e-3, "rtol": 2e-2}

MASK_VALUE = -1e30


def create_inputs(dtype=jnp.bfloat16):
    """Returns (q ~ N(0,1), k, v ~ N(0,0.02), all (B,H,S,D); rel_pos_bias (H,S,S) ~ N(0,0.01))."""
    c = CONFIG
    b, h, s, d = c["batch"], c["num_heads"], c["seq_len"], c["head_dim"]
    k_q, k_k, k_v, k_b = jax.random.split(jax.random.key(42), 4)
    q = jax.random.normal(k_q, (b, h, s, d), jnp.float32).astype(dtype)
    k = (jax.random.normal(k_k, (b, h, s, d), jnp.float32) * 0.02).astype(dtype)
    v = (jax.random.normal(k_v, (b, h, s, d), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (h, s, s), jnp.float32) * 0.01).astype(dtype)
    return q, k, v, bias


def workload(q, k, v, rel_pos_bias):
    s_q, d = q.shape[2], q.shape[3]
    s_k = k.shape[2]
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k)  # input dtype
    scores = scores * jnp.asarray(d ** -0.5, scores.dtype) + rel_pos_bias[None].astype(scores.dtype)
    causal = jnp.arange(s_q)[:, None] >= jnp.arange(s_k)[None, :]
    scores = jnp.where(causal, scores, jnp.asarray(MASK_VALUE, scores.dtype))
    probs = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs.astype(v.dtype), v).astype(q.dtype)


def get_flops():
    # QK^T and PV: 4*B*H*S*S*D (causal not halved; the bias add and softmax are not counted, as in
    # every jb attention workload).
    c = CONFIG
    return 4 * c["batch"] * c["num_heads"] * c["seq_len"] * c["seq_len"] * c["head_dim"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): sequence length and head count (the bias follows)."""
    c = config
    return [{"seq_len": _halve(c["seq_len"]), "num_heads": _halve(c["num_heads"])}]


TRIALS = ["sharp", "long_range"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). sharp: Q rescaled so the scores have a std of ~4 (the
    softmax is far from uniform: a mean-of-V or ignore-Q/K shortcut fails); long_range: every query
    leans on a few keys spread over the whole sequence (a windowed or prefix-exact kernel fails)."""
    from jb import inputs as jbi

    q, k, v, bias = inputs
    scale = q.shape[-1] ** -0.5
    if name == "sharp":
        q = jbi.sharpen(q, k, scale)
    elif name == "long_range":
        q, k = jbi.long_range(rng, q, k, scale)
    else:
        return None
    return q, k, v, bias
