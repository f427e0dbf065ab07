"""KernelBench Level 2, task 41: Gemm_BatchNorm_GELU_ReLU.

h = x @ W.T + bias (W stored (out_features, in_features)); BatchNorm1d in training mode: each
feature normalised with the batch mean and biased batch variance (eps 1e-5), then scaled by
bn_weight and shifted by bn_bias (inputs, as in the published function; created as ones and
zeros); then the tanh-approximate GELU and ReLU. W and bias are N(0, 1) as published.
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "41_Gemm_BatchNorm_GELU_ReLU",
    "batch_size": 16384,
    "in_features": 8192,
    "out_features": 8192,
}

# The batch axis is the normalised one: it stays >= 256 so that batch statistics are meaningful.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 512, "in_features": 2048, "out_features": 1024},
    "tiny": {"batch_size": 64, "in_features": 1024, "out_features": 128},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_BatchNorm_GELU_ReLU",
    "kernelbench_id": 41,
    "handtuned": False,
}

# With N(0, 1) weights the GEMM output is ~1e2 while its spread over the batch is ~26: rounding it
# to bf16 (a plain bf16 matmul; error up to 0.5) moves the batch-normalised value by up to ~2e-2,
# plus one output ulp (measured max difference 3.1e-2 at an output of 1.5). Outputs reach ~4.
TOLERANCE = {"atol": 3e-2, "rtol": 1e-2}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, bn_weight, bn_bias) from key(0): x (B, in) U[0,1); weight (out,
    in), bias N(0, 1); bn_weight ones, bn_bias zeros (out,)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    k_x, k_w, k_b = jax.random.split(jax.random.key(0), 3)
    x = jax.random.uniform(k_x, (b, k), jnp.float32).astype(dtype)
    weight = jax.random.normal(k_w, (n, k), jnp.float32).astype(dtype)
    bias = jax.random.normal(k_b, (n,), jnp.float32).astype(dtype)
    return x, weight, bias, jnp.ones((n,), dtype), jnp.zeros((n,), dtype)


def workload(x, weight, bias, bn_weight, bn_bias):
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    h = h + bias.astype(jnp.float32)
    mean = jnp.mean(h, axis=0, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=0, keepdims=True)
    h = (h - mean) * jax.lax.rsqrt(var + 1e-5)
    h = h * bn_weight.astype(jnp.float32) + bn_bias.astype(jnp.float32)
    h = jax.nn.gelu(h, approximate=True)
    return jnp.maximum(h, 0.0).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]  # bn_weight / bn_bias are redrawn in every trial; wider in "affine"
