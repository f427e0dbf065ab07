"""KernelBench Level 2, task 56: Matmul_Sigmoid_Sum.

y = sum(sigmoid(x @ W + b), axis=1, keepdims=True), shape (batch_size, 1), W stored
(input_size, hidden_size). The matmul accumulates in float32, the epilogue and the sum run in
float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "56_Matmul_Sigmoid_Sum",
    "batch_size": 4096,
    "input_size": 8192,
    "hidden_size": 8192,
}

# input_size is kept (it sets the spread of x @ W). hidden_size, the summed axis, shrinks: the
# output is ~hidden_size / 2 and its row-to-row variation only ~sqrt(hidden_size) / 10, so a
# smaller sum keeps the seed- and distribution-sensitivity lints meaningful at 1e-2 rtol.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "hidden_size": 1024},
    "tiny": {"batch_size": 16, "hidden_size": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_Sigmoid_Sum",
    "kernelbench_id": 56,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (in, hidden), bias (hidden,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["input_size"], CONFIG["hidden_size"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(42), 2)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
    return jnp.sum(jax.nn.sigmoid(h), axis=1, keepdims=True).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and hidden size."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "hidden_size": _halve(c["hidden_size"])}]
