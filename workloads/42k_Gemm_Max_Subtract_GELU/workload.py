"""KernelBench Level 2, task 80: Gemm_Max_Subtract_GELU.

h = x @ W + b (W stored (in_features, out_features)); y = gelu(h - max(h, axis=1, keepdims=True))
with the tanh-approximate GELU, shape (batch_size, out_features). This is the JAXBench form: the
KernelBench original subtracts the mean of a (batch, 1) tensor from itself and is identically
zero. The matmul accumulates in float32, the epilogue runs in float32 and the output has the
input dtype.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "80_Gemm_Max_Subtract_GELU",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "max_dim": 1,
}

# in_features is kept: it sets the spread of h (~1 at 8192), hence how far entries sit below the
# row maximum (GELU of values below -3 is ~0).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_Max_Subtract_GELU",
    "kernelbench_id": 80,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias) from key(0): x (B, in) U[0,1); weight (in, out), bias N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    k_x, k_w, k_b = jax.random.split(jax.random.key(0), 3)
    x = jax.random.uniform(k_x, (b, k), jnp.float32).astype(dtype)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
    h = h - jnp.max(h, axis=1, keepdims=True)
    return jax.nn.gelu(h, approximate=True).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]
