"""KernelBench Level 2, task 37: Matmul_Swish_Sum_GroupNorm.

h = x @ W (W stored (in_features, out_features)); h = h * sigmoid(h); h = h + bias;
y = group_norm(h) over 64 groups of consecutive features (out_features / 64 each; biased
variance, eps 1e-5), scaled by gn_weight and shifted by gn_bias (per feature).
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "37_Matmul_Swish_Sum_GroupNorm",
    "batch_size": 8192,
    "in_features": 4096,
    "out_features": 4096,
    "num_groups": 64,
}

# in_features is kept (spread of h); the group size out_features / num_groups = 64 is kept.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 512, "out_features": 1024, "num_groups": 16},
    "tiny": {"batch_size": 16, "out_features": 256, "num_groups": 4},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_Swish_Sum_GroupNorm",
    "kernelbench_id": 37,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, gn_weight, gn_bias).

    x (B, in) U[0,1); weight (in, out), bias (out,) N(0, 0.02); gn_weight ones, gn_bias zeros.
    """
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 2)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias, jnp.ones((n,), dtype), jnp.zeros((n,), dtype)


def workload(x, weight, bias, gn_weight, gn_bias):
    groups = CONFIG["num_groups"]
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32)
    h = h * jax.nn.sigmoid(h)
    h = h + bias.astype(jnp.float32)
    b, n = h.shape
    g = h.reshape(b, groups, n // groups)
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
    g = (g - mean) * jax.lax.rsqrt(var + 1e-5)
    y = g.reshape(b, n) * gn_weight.astype(jnp.float32) + gn_bias.astype(jnp.float32)
    return y.astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
