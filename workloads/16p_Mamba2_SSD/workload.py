"""Mamba-2 state space duality (SSD), quadratic "masked attention" form.

C -> query, B -> key, x -> value. a_t = sigmoid(A_log_t) per (batch, head, position) (A_log is
float32); L[i, j] = exp(cumsum(log a)[i] - cumsum(log a)[j]) = prod_{t=j+1..i} a_t for i >= j,
else 0. Scores S = (Q K^T) * L in float32; each row is divided by max(|sum_j S[i, j]|, 1); output
S @ V with S rounded to the input dtype, float32 accumulation, output in the input dtype.
"""

import functools
import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "mamba2_2_7b_ssd",
    "model": "Mamba-2-2.7B",
    "operator": "state_space_duality",
    "batch": 4,
    "seq_len": 4096,
    "num_heads": 64,
    "head_dim": 64,
    "d_state": 128,
    "d_model": 2560,
}

# head_dim 64 kept at cpu scale (the operator is per head; d_state/d_model are not used by it).
SCALES = {
    "paper": {},
    "cpu": {"batch": 1, "seq_len": 512, "num_heads": 16, "head_dim": 64},
    "tiny": {"batch": 2, "seq_len": 64, "num_heads": 4, "head_dim": 16},
}

META = {
    "category": "priority",
    "model": "Mamba-2-2.7B",
    "operator": "state_space_duality",
    "kernelbench_id": None,
    "handtuned": False,
}


def create_inputs(dtype=jnp.bfloat16):
    """Returns (query, key, value) (B, H, S, D) ~ N(0,1) and A_log (B, H, S) ~ N(-4, 0.5) in float32
    whatever dtype is; key(42)."""
    c = CONFIG
    return _create(c["batch"], c["num_heads"], c["seq_len"], c["head_dim"], jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _create(b, h, s, d, dtype):
    return tuple(_normals(jax.random.key(42), [((b, h, s, d), 1.0, 0.0, dtype)] * 3
                          + [((b, h, s), 0.5, -4.0, jnp.float32)]))


def _normals(key, specs):
    """Normal draws for several inputs from ONE threefry call (one random op per input compiles
    several times slower on CPU). specs: (shape, std, mean, dtype) per input."""
    sizes = [math.prod(shape) for shape, *_ in specs]
    z = jax.random.normal(key, (sum(sizes),), jnp.float32)
    out, offset = [], 0
    for (shape, std, mean, dtype), size in zip(specs, sizes):
        out.append((z[offset:offset + size].reshape(shape) * std + mean).astype(dtype))
        offset += size
    return out


def workload(query, key, value, A_log):
    s = query.shape[2]
    cum = jnp.cumsum(jax.nn.log_sigmoid(A_log.astype(jnp.float32)), axis=-1)  # (B, H, S)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    diff = cum[..., :, None] - cum[..., None, :]
    decay = jnp.where(causal, jnp.exp(jnp.where(causal, diff, 0.0)), 0.0)
    scores = jnp.einsum("bhsd,bhtd->bhst", query, key, preferred_element_type=jnp.float32) * decay
    row_sum = jnp.sum(scores, axis=-1, keepdims=True)
    scores = scores / jnp.maximum(jnp.abs(row_sum), 1.0)
    out = jnp.einsum("bhst,bhtd->bhsd", scores.astype(value.dtype), value, preferred_element_type=jnp.float32)
    return out.astype(query.dtype)


def get_flops():
    # Published: the two S x S x D matmuls over the full score matrix, 4 * B * H * S^2 * D.
    b, h, s, d = CONFIG["batch"], CONFIG["num_heads"], CONFIG["seq_len"], CONFIG["head_dim"]
    return 4 * b * h * s * s * d


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): sequence length."""
    c = config
    return [{"seq_len": _halve(c["seq_len"])}]


TRIALS = ["long_range"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). long_range: slow decay, a_t = sigmoid(A_log) in [0.98,
    0.9997] (A_log ~ U(4, 8)) instead of ~0.02 (A_log ~ N(-4, 0.5)): the state remembers hundreds
    of steps back, so a kernel that truncates the causal band fails."""
    if name != "long_range":
        return None
    from jb import inputs as jbi

    q, k, v, a_log = inputs
    return q, k, v, jbi.like(a_log, rng.uniform(4.0, 8.0, a_log.shape))
