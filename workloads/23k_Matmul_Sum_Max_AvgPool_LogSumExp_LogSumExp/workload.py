"""KernelBench Level 2, task 18: Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.

h = x @ W.T + b (W stored (out_features, in_features)); then, each over axis 1 with keepdims:
sum, max, mean, logsumexp, logsumexp. After the sum the tensor is (batch_size, 1), so the max,
mean and both logsumexps act on a single element and leave it unchanged (as in KernelBench):
y = sum(h, axis=1, keepdims=True), shape (batch_size, 1). The matmul accumulates in float32,
the reductions run in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
}

# in_features is kept (it sets the magnitude of each entry of h); out_features, the summed axis,
# shrinks.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp",
    "kernelbench_id": 18,
    "handtuned": False,
}

# Each output sums out_features entries of magnitude ~1. Rounding h to bf16 before summing (a
# plain bf16 matmul) differs from the float32 sum by ~2e-3 * sqrt(out_features) ~ 0.2 at the
# published size whatever the row's total, and rows whose total is near zero exist: atol covers
# that summation error. Outputs are ~1e2 at the published size and ~20 at tiny.
TOLERANCE = {"atol": 1.0, "rtol": 1e-2}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (out, in), bias (out,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 2)
    weight = (jax.random.normal(k_w, (n, k), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    h = h + bias.astype(jnp.float32)
    h = jnp.sum(h, axis=1, keepdims=True)
    h = jnp.max(h, axis=1, keepdims=True)
    h = jnp.mean(h, axis=1, keepdims=True)
    h = jax.nn.logsumexp(h, axis=1, keepdims=True)
    h = jax.nn.logsumexp(h, axis=1, keepdims=True)
    return h.astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). affine: the bias drawn N(0, 1) instead of N(0, 0.02): the
    output is sum_j (x W^T)_j + sum(bias), and with the published bias the second term (~0.02 *
    sqrt(out)) hides under the tolerance, so a kernel that drops the bias would pass."""
    if name != "affine":
        return None
    from jb import inputs as jbi

    x, weight, bias = inputs
    return x, weight, jbi.like(bias, rng.standard_normal(bias.shape))
