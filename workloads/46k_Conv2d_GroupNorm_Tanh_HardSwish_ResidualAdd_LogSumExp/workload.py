"""KernelBench Level 2, task 92: Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.

c = conv2d(x, W) + b (3x3, stride 1, VALID); n = group_norm(c) over 16 groups of consecutive
channels (statistics over the group's channels and all H x W positions; biased variance, eps
1e-5) with gn_weight, gn_bias; t = tanh(n); s = hardswish(t) = t * relu6(t + 3) / 6;
r = c + s; y = logsumexp(r, axis=1, keepdims=True) over the channels, shape (batch, 1, H-2, W-2).
x is NCHW (batch, 8, 128, 128). The convolution runs in NHWC with float32 accumulation; the
epilogue runs in float32 and the output has the input dtype. The published image size
(128 x 128) is not in CONFIG; the cpu and tiny scales add "height"/"width" keys.
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp",
    "batch_size": 128,
    "in_channels": 8,
    "out_channels": 64,
    "kernel_size": 3,
    "groups": 16,
}

# Channels and groups are kept (the logsumexp runs over the 64 channels).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 4, "height": 64, "width": 64},
    "tiny": {"batch_size": 2, "height": 12, "width": 12},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp",
    "kernelbench_id": 92,
    "handtuned": False,
}


def _uniform(key, shape):
    """U[0, 1) float32 of ``shape``, drawn flat and reshaped: the same values as drawing ``shape``
    directly, but XLA:CPU compiles a flat random kernel several times faster than a rank-4/5 one."""
    return jax.random.uniform(key, (math.prod(shape),), jnp.float32).reshape(shape)


def _normal(key, shape):
    """N(0, 1) float32 of ``shape``, drawn flat and reshaped (same values, faster to compile)."""
    return jax.random.normal(key, (math.prod(shape),), jnp.float32).reshape(shape)


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, gn_weight, gn_bias).

    x U[0,1); weight (out, in, 3, 3), bias (out,) N(0, 0.02) from key(42); gn_weight ones,
    gn_bias zeros.
    """
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    h, w = CONFIG.get("height", 128), CONFIG.get("width", 128)
    x = _uniform(jax.random.key(0), (b, cin, h, w)).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(42), 2)
    weight = (_normal(k_w, (cout, cin, k, k)) * 0.02).astype(dtype)
    bias = (_normal(k_b, (cout,)) * 0.02).astype(dtype)
    return x, weight, bias, jnp.ones((cout,), dtype), jnp.zeros((cout,), dtype)


def _conv2d(x, weight):
    """NCHW x OIHW -> NCHW, stride 1, VALID, float32 accumulation."""
    y = jax.lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
        window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 3, 1, 2))


def workload(x, weight, bias, gn_weight, gn_bias):
    groups = CONFIG["groups"]
    f32 = jnp.float32
    c = _conv2d(x, weight) + bias.astype(f32)[None, :, None, None]
    b = c.shape[0]
    g = c.reshape(b, groups, -1)
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
    n = ((g - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(c.shape)
    n = n * gn_weight.astype(f32)[None, :, None, None] + gn_bias.astype(f32)[None, :, None, None]
    t = jnp.tanh(n)
    s = t * jnp.clip(t + 3.0, 0.0, 6.0) / 6.0
    return jax.nn.logsumexp(c + s, axis=1, keepdims=True).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output channels."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_channels": _halve(c["out_channels"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
