"""KernelBench Level 2, task 22: Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.

h = x @ W.T + b (W stored (hidden_size, input_size)); h = h * 2.0; h = h + h;
h = clip(h, -10, 10); l = logsumexp(h, axis=1, keepdims=True); y = l * mish(l), shape
(batch_size, 1), with mish(t) = t * tanh(softplus(t)). The matmul accumulates in float32, the
epilogue runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish",
    "batch_size": 4096,
    "input_size": 8192,
    "hidden_size": 8192,
    "scale_factor": 2.0,
    "clamp_min": -10.0,
    "clamp_max": 10.0,
}

# input_size is kept: it sets the spread of x @ W.T (~1 at 8192, ~4 after the scaling), hence how
# often the clamp at +-10 is reached.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "hidden_size": 1024},
    "tiny": {"batch_size": 16, "hidden_size": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish",
    "kernelbench_id": 22,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (hidden, in), bias (hidden,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["input_size"], CONFIG["hidden_size"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(42), 2)
    weight = (jax.random.normal(k_w, (n, k), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    h = h + bias.astype(jnp.float32)
    h = h * 2.0
    h = h + h
    h = jnp.clip(h, -10.0, 10.0)
    l = jax.nn.logsumexp(h, axis=1, keepdims=True)
    y = l * (l * jnp.tanh(jax.nn.softplus(l)))  # l * mish(l)
    return y.astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and hidden size."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "hidden_size": _halve(c["hidden_size"])}]
