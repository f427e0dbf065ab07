"""KernelBench Level 2, task 45: Gemm_Sigmoid_LogSumExp.

h = sigmoid(x @ W1.T + b1); z = h @ W2.T + b2; y = logsumexp(z, axis=1), shape (batch_size,).
W1 stored (hidden_size, input_size), W2 (output_size, hidden_size). Both matmuls accumulate in
float32; the sigmoid output is cast to the input dtype before the second matmul (it is that
matmul's operand); the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "45_Gemm_Sigmoid_LogSumExp",
    "batch_size": 16384,
    "input_size": 2048,
    "hidden_size": 4096,
    "output_size": 1024,
}

# input_size and hidden_size (the contracted axes, which set the magnitudes) are kept.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "output_size": 512},
    "tiny": {"batch_size": 16, "output_size": 128},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_Sigmoid_LogSumExp",
    "kernelbench_id": 45,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, w1, b1, w2, b2): x (B, input_size) U[0,1); weights and biases N(0, 0.02)."""
    b, k = CONFIG["batch_size"], CONFIG["input_size"]
    h, n = CONFIG["hidden_size"], CONFIG["output_size"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k1, k2, k3, k4 = jax.random.split(jax.random.key(42), 4)
    w1 = (jax.random.normal(k1, (h, k), jnp.float32) * 0.02).astype(dtype)
    b1 = (jax.random.normal(k2, (h,), jnp.float32) * 0.02).astype(dtype)
    w2 = (jax.random.normal(k3, (n, h), jnp.float32) * 0.02).astype(dtype)
    b2 = (jax.random.normal(k4, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, w1, b1, w2, b2


def workload(x, w1, b1, w2, b2):
    dims = (((1,), (1,)), ((), ()))
    h = jax.lax.dot_general(x, w1, dims, preferred_element_type=jnp.float32) + b1.astype(jnp.float32)
    h = jax.nn.sigmoid(h).astype(x.dtype)
    z = jax.lax.dot_general(h, w2, dims, preferred_element_type=jnp.float32) + b2.astype(jnp.float32)
    return jax.nn.logsumexp(z, axis=1).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output size."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "output_size": _halve(c["output_size"])}]
