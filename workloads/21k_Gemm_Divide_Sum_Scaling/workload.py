"""KernelBench Level 2, task 14: Gemm_Divide_Sum_Scaling.

h = x @ W.T (no bias; W stored (hidden_size, input_size), precision HIGHEST); h = h / 2;
s = sum(h, axis=1, keepdims=True); y = s * 1.5, shape (batch_size, 1).
W ~ N(0, 1) (not 0.02) as published, so s is of order 1e3. The matmul accumulates in float32,
the sum runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "14_Gemm_Divide_Sum_Scaling",
    "batch_size": 4096,
    "input_size": 8192,
    "hidden_size": 8192,
    "scaling_factor": 1.5,
}

# input_size is kept (it sets the magnitude of each product); hidden_size, the summed axis, shrinks.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "hidden_size": 1024},
    "tiny": {"batch_size": 16, "hidden_size": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_Divide_Sum_Scaling",
    "kernelbench_id": 14,
    "handtuned": False,
}

# Each output is a sum of hidden_size products of magnitude ~50 (N(0, 1) weights). A kernel that
# rounds x @ W.T to bf16 before summing (as a plain bf16 matmul does) differs from the float32
# sum by ~0.1 * sqrt(hidden_size) ~ 10 at the published size, independently of the row's total,
# and rows whose total is near zero exist: atol covers that summation error. The outputs
# are ~3e3 (so zeros, or a seed change, still fail by far).
TOLERANCE = {"atol": 32.0, "rtol": 1e-2}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight): x (B, input_size) U[0,1); weight (hidden_size, input_size) N(0, 1)."""
    b, k, n = CONFIG["batch_size"], CONFIG["input_size"], CONFIG["hidden_size"]
    k_x, k_w = jax.random.split(jax.random.key(0), 2)
    x = jax.random.uniform(k_x, (b, k), jnp.float32).astype(dtype)
    weight = jax.random.normal(k_w, (n, k), jnp.float32).astype(dtype)
    return x, weight


def workload(x, weight):
    h = jax.lax.dot_general(
        x, weight, (((1,), (1,)), ((), ())),
        precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32,
    )
    h = h / 2.0
    s = jnp.sum(h, axis=1, keepdims=True)
    return (s * 1.5).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and hidden size."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "hidden_size": _halve(c["hidden_size"])}]
