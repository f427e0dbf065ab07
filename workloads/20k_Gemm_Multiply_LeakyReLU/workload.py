"""KernelBench Level 2, task 12: Gemm_Multiply_LeakyReLU.

y = leaky_relu((x @ W + b) * 2.0, negative_slope=0.1) with W stored (in_features, out_features).
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "12_Gemm_Multiply_LeakyReLU",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "multiplier": 2.0,
    "negative_slope": 0.1,
}

# in_features is kept: with N(0, 0.02) weights it sets the magnitude of x @ W (~1 at 8192).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_Multiply_LeakyReLU",
    "kernelbench_id": 12,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (in, out), bias (out,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 2)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
    h = h * 2.0
    return jnp.where(h >= 0.0, h, 0.1 * h).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]
