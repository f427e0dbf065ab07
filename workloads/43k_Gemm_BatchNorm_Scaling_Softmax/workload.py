"""KernelBench Level 2, task 84: Gemm_BatchNorm_Scaling_Softmax.

h = x @ W + b (W stored (in_features, out_features)); BatchNorm1d in eval mode with running
statistics: (h - bn_mean) / sqrt(bn_var + 1e-5) * bn_scale + bn_bias; h = h * scale (shape (1,));
y = softmax(h, axis=1). bn_momentum only matters for training and is unused.
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Fidelity: the normalisation divides by sqrt(bn_var + eps), in the published program's order of
operations (was: times rsqrt). The same function in float32; in bf16 the published order rounds
once more on the per-feature scale, which the softmax amplifies on large logits (the published
program was at 1.11x the aggregate bound on an `affine` trial), and jb's bf16 end-to-end noise
evaluation now rounds where the published program does.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "84_Gemm_BatchNorm_Scaling_Softmax",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "bn_eps": 1e-05,
    "bn_momentum": 0.1,
}

# in_features is kept: it sets the spread of the logits (~1 at 8192).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Gemm_BatchNorm_Scaling_Softmax",
    "kernelbench_id": 84,
    "handtuned": False,
}

# Softmax over out_features entries: outputs are ~1/out_features (1.2e-4 at the published size),
# so atol=1e-2 would accept an all-zero output. The comparison is relative: bf16 rounding of a
# logit of magnitude 2-4 (error up to 4e-3) becomes a 0.4 % relative error after exp, plus
# 0.2-0.4 % from rounding the output to bf16, hence rtol 2e-2; atol only guards the far tail.
TOLERANCE = {"atol": 1e-6, "rtol": 2e-2}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, scale).

    x (B, in) U[0,1); weight (in, out), bias, bn_bias (out,) N(0, 0.02); bn_scale ones,
    bn_mean zeros, bn_var ones (out,); scale ones (1,).
    """
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b, k_bn = jax.random.split(jax.random.key(42), 3)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    bn_bias = (jax.random.normal(k_bn, (n,), jnp.float32) * 0.02).astype(dtype)
    bn_scale = jnp.ones((n,), dtype)
    bn_mean = jnp.zeros((n,), dtype)
    bn_var = jnp.ones((n,), dtype)
    scale = jnp.ones((1,), dtype)
    return x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, scale


def workload(x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, scale):
    f32 = jnp.float32
    h = jnp.dot(x, weight, preferred_element_type=f32) + bias.astype(f32)
    h = (h - bn_mean.astype(f32)) / jnp.sqrt(bn_var.astype(f32) + 1e-5)
    h = bn_scale.astype(f32) * h + bn_bias.astype(f32)
    h = scale.astype(f32) * h
    return jax.nn.softmax(h, axis=1).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine", "large_logits"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs); the BatchNorm parameters are redrawn in every trial (variance
    positive). large_logits: ``scale`` set so the pre-softmax values have a std of ~40 (row maxima
    > 88: exp overflows float32 without the max subtraction)."""
    if name != "large_logits":
        return None
    import numpy as np
    from jb import inputs as jbi

    x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, scale = inputs
    h = jbi.host(x)[:8] @ jbi.host(weight) + jbi.host(bias)
    h = (h - jbi.host(bn_mean)) / np.sqrt(jbi.host(bn_var) + 1e-5) * jbi.host(bn_scale) + jbi.host(bn_bias)
    factor = jbi.spread_scale(h * jbi.host(scale), 40.0)
    return x, weight, bias, bn_scale, bn_bias, bn_mean, bn_var, jbi.like(scale, jbi.host(scale) * factor)
