"""KernelBench Level 2, task 97: Matmul_BatchNorm_BiasAdd_Divide_Swish.

h = x @ W + linear_bias (W stored (in_features, out_features)); BatchNorm1d in eval mode with
the running statistics passed as inputs: (h - bn_mean) / sqrt(bn_var + 1e-5) * bn_weight + bn_bias;
h = h + bias (shape (1,)); h = h / 1.0; y = h * sigmoid(h). bn_momentum only matters for training.
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Fidelity: the normalisation divides by sqrt(bn_var + eps), in the published program's order of
operations (the same function in float32; in bf16 it rounds where the published program does).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "97_Matmul_BatchNorm_BiasAdd_Divide_Swish",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "bn_eps": 1e-05,
    "bn_momentum": 0.1,
    "divide_value": 1.0,
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
    "operator": "Matmul_BatchNorm_BiasAdd_Divide_Swish",
    "kernelbench_id": 97,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, linear_bias, bn_weight, bn_bias, bn_mean, bn_var, bias).

    x (B, in) U[0,1); weight (in, out), linear_bias (out,), bias (1,) N(0, 0.02);
    bn_weight ones, bn_bias zeros, bn_mean zeros, bn_var ones (out,).
    """
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_lb, k_b = jax.random.split(jax.random.key(0xBADC0DE), 3)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    linear_bias = (jax.random.normal(k_lb, (n,), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (1,), jnp.float32) * 0.02).astype(dtype)
    bn_weight = jnp.ones((n,), dtype)
    bn_bias = jnp.zeros((n,), dtype)
    bn_mean = jnp.zeros((n,), dtype)
    bn_var = jnp.ones((n,), dtype)
    return x, weight, linear_bias, bn_weight, bn_bias, bn_mean, bn_var, bias


def workload(x, weight, linear_bias, bn_weight, bn_bias, bn_mean, bn_var, bias):
    f32 = jnp.float32
    h = jnp.dot(x, weight, preferred_element_type=f32) + linear_bias.astype(f32)
    h = (h - bn_mean.astype(f32)) / jnp.sqrt(bn_var.astype(f32) + 1e-5)
    h = bn_weight.astype(f32) * h + bn_bias.astype(f32)
    h = h + bias.astype(f32)
    h = h / 1.0
    return (h * jax.nn.sigmoid(h)).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
