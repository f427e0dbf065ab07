"""KernelBench Level 2, task 88: Gemm_GroupNorm_Swish_Multiply_Swish.

h = x @ W.T + b (W stored (out_features, in_features)); group_norm over 256 groups of
consecutive features (out_features / 256 = 32 each; biased variance, eps 1e-5) with gn_weight,
gn_bias; h = h * sigmoid(h); h = h * multiply_weight; y = h * sigmoid(h).
multiply_weight is N(0, 1) as published.
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "88_Gemm_GroupNorm_Swish_Multiply_Swish",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "num_groups": 256,
}

# in_features is kept (spread of h); the group size out_features / num_groups = 32 is kept.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024, "num_groups": 32},
    "tiny": {"batch_size": 16, "out_features": 256, "num_groups": 8},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_GroupNorm_Swish_Multiply_Swish",
    "kernelbench_id": 88,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, gn_weight, gn_bias, multiply_weight).

    x (B, in) U[0,1); weight (out, in), bias (out,) N(0, 0.02); multiply_weight (out,) N(0, 1);
    gn_weight ones, gn_bias zeros.
    """
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b, k_m = jax.random.split(jax.random.key(42), 3)
    weight = (jax.random.normal(k_w, (n, k), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    multiply_weight = jax.random.normal(k_m, (n,), jnp.float32).astype(dtype)
    return x, weight, bias, jnp.ones((n,), dtype), jnp.zeros((n,), dtype), multiply_weight


def workload(x, weight, bias, gn_weight, gn_bias, multiply_weight):
    groups = CONFIG["num_groups"]
    f32 = jnp.float32
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=f32)
    h = h + bias.astype(f32)
    b, n = h.shape
    g = h.reshape(b, groups, n // groups)
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
    g = (g - mean) * jax.lax.rsqrt(var + 1e-5)
    h = g.reshape(b, n) * gn_weight.astype(f32) + gn_bias.astype(f32)
    h = h * jax.nn.sigmoid(h)
    h = h * multiply_weight.astype(f32)
    return (h * jax.nn.sigmoid(h)).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
