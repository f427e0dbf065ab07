"""KernelBench Level 2, task 95: Matmul_Add_Swish_Tanh_GELU_Hardtanh.

h = x @ W + b + add_value; h = h * sigmoid(h); h = tanh(h); h = gelu(h) (tanh approximation);
y = clip(h, -1, 1). W stored (in_features, out_features).
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
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
    "operator": "Matmul_Add_Swish_Tanh_GELU_Hardtanh",
    "kernelbench_id": 95,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, add_value): x (B, in) U[0,1); the rest N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b, k_a = jax.random.split(jax.random.key(0xBADC0DE), 3)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    add_value = (jax.random.normal(k_a, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias, add_value


def workload(x, weight, bias, add_value):
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32)
    h = h + bias.astype(jnp.float32) + add_value.astype(jnp.float32)
    h = h * jax.nn.sigmoid(h)
    h = jnp.tanh(h)
    h = jax.nn.gelu(h, approximate=True)
    return jnp.clip(h, -1.0, 1.0).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]
