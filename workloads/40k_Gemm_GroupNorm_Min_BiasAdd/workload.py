"""KernelBench Level 2, task 75: Gemm_GroupNorm_Min_BiasAdd.

h = x @ W.T + linear_bias (W stored (out_features, in_features)); group_norm over 512 groups of
consecutive features (out_features / 512 = 16 each; biased variance, eps 1e-5) with gn_weight,
gn_bias; m = min(h, axis=1, keepdims=True), shape (batch_size, 1); y = m + bias with bias of shape
(1, out_features, 1, 1): broadcasting gives y[0, c, i, 0] = m[i] + bias[c], shape
(1, out_features, batch_size, 1), as in KernelBench.
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "75_Gemm_GroupNorm_Min_BiasAdd",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "num_groups": 512,
}

# in_features is kept (spread of h); the group size out_features / num_groups = 16 is kept.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024, "num_groups": 64},
    "tiny": {"batch_size": 16, "out_features": 256, "num_groups": 16},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_GroupNorm_Min_BiasAdd",
    "kernelbench_id": 75,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, linear_bias, gn_weight, gn_bias, bias).

    x (B, in) U[0,1); weight (out, in), linear_bias (out,), bias (1, out, 1, 1) N(0, 0.02);
    gn_weight ones, gn_bias zeros.
    """
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_lb, k_b = jax.random.split(jax.random.key(0xBADC0DE), 3)
    weight = (jax.random.normal(k_w, (n, k), jnp.float32) * 0.02).astype(dtype)
    linear_bias = (jax.random.normal(k_lb, (n,), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (1, n, 1, 1), jnp.float32) * 0.02).astype(dtype)
    return x, weight, linear_bias, jnp.ones((n,), dtype), jnp.zeros((n,), dtype), bias


def workload(x, weight, linear_bias, gn_weight, gn_bias, bias):
    groups = CONFIG["num_groups"]
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    h = h + linear_bias.astype(jnp.float32)
    b, n = h.shape
    g = h.reshape(b, groups, n // groups)
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
    g = (g - mean) * jax.lax.rsqrt(var + 1e-5)
    h = g.reshape(b, n) * gn_weight.astype(jnp.float32) + gn_bias.astype(jnp.float32)
    m = jnp.min(h, axis=1, keepdims=True)  # (B, 1)
    return (m + bias.astype(jnp.float32)).astype(x.dtype)  # (1, out, B, 1)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
