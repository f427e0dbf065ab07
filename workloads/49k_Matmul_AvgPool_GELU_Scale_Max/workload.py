"""KernelBench Level 2, task 98: Matmul_AvgPool_GELU_Scale_Max.

h = x @ W + b (W stored (in_features, out_features)); p = average pool over windows of 16
consecutive features (stride 16, lax.reduce_window), shape (batch_size, out_features / 16);
y = max(gelu(p) * 2.0, axis=1) with the tanh-approximate GELU, shape (batch_size,). The matmul
accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).

Fidelity: the average pool adds its 16 values in the input dtype, as the published program does
(its whole epilogue is bf16). XLA:CPU accumulates a bf16 reduce_window in bf16 (twice the error
of one rounding over 16 terms), which the published program was then judged beside a float32
pool: 1.1x the aggregate bound on a `small` trial. The function is the same in float32.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "98_Matmul_AvgPool_GELU_Scale_Max",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "pool_kernel_size": 16,
    "scale_factor": 2.0,
}

# in_features is kept (spread of h); out_features stays a multiple of the pool size 16.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_AvgPool_GELU_Scale_Max",
    "kernelbench_id": 98,
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
    # The pool sums in the input dtype, as the published program does (h is bf16 there).
    hx = h.astype(x.dtype)
    p = jax.lax.reduce_window(hx, jnp.zeros((), hx.dtype), jax.lax.add, (1, 16), (1, 16), "VALID")
    p = p.astype(jnp.float32) / 16.0
    y = jax.nn.gelu(p, approximate=True) * 2.0
    return jnp.max(y, axis=1).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]
