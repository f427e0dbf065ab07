"""KernelBench Level 2, task 86: Matmul_Divide_GELU.

y = gelu((x @ W + b) / 10.0) with the tanh-approximate GELU, W stored (input_size, output_size).
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "86_Matmul_Divide_GELU",
    "batch_size": 4096,
    "input_size": 8192,
    "output_size": 8192,
    "divisor": 10.0,
}

# input_size is kept: with N(0, 0.02) weights it sets the magnitude of x @ W (~1 at 8192), and
# after the division by 10 the output is already only ~0.05.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "output_size": 1024},
    "tiny": {"batch_size": 16, "output_size": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_Divide_GELU",
    "kernelbench_id": 86,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (in, out), bias (out,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["input_size"], CONFIG["output_size"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 2)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
    return jax.nn.gelu(h / 10.0, approximate=True).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output size."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "output_size": _halve(c["output_size"])}]
