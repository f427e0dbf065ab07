"""KernelBench Level 2, task 9: Matmul_Subtract_Multiply_ReLU.

y = relu((x @ W + b - 2.0) * 1.5) with W stored (in_features, out_features).
x is U[0, 1) and W ~ N(0, 0.02), so x @ W has a standard deviation of about
0.02 * sqrt(in_features / 3) ~ 1 at in_features = 8192; only the few percent of entries above
2.0 survive the ReLU. The matmul accumulates in float32, the epilogue runs in float32 and the
output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "9_Matmul_Subtract_Multiply_ReLU",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "subtract_value": 2.0,
    "multiply_value": 1.5,
}

# in_features stays 8192 at every scale: it sets the spread of x @ W, hence which entries pass
# the ReLU (at in_features = 1024 nothing would exceed 2.0 and the output would be all zero).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_Subtract_Multiply_ReLU",
    "kernelbench_id": 9,
    "handtuned": False,
}

# The ReLU threshold sits at x @ W + b = 2.0, where a bf16 value has a rounding error of up to
# 7.8e-3; after "* 1.5" a kernel that rounds the matmul output to bf16 (a plain bf16 matmul) differs
# from the float32 reference by up to 1.2e-2 on outputs close to zero, just above the default
# atol (measured: 121 of 262144 outputs at the published feature sizes). Outputs reach ~4.
TOLERANCE = {"atol": 2e-2, "rtol": 1e-2}


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
    h = (h - 2.0) * 1.5
    return jnp.maximum(h, 0.0).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]
