"""KernelBench Level 2, task 23: Conv3d_GroupNorm_Mean.

h = conv3d(x, W) + conv_bias (3x3x3, stride 1, VALID); group_norm over 8 groups of consecutive
channels (statistics over the group's channels and all D x H x W positions; biased variance,
eps 1e-5) with gamma, beta per channel; y = mean of h over all axes but the batch, shape
(batch_size,). x is NCDHW (batch, 3, 24, 32, 32). The convolution runs in NDHWC with float32
accumulation; the epilogue runs in float32 and the output has the input dtype. The published
volume (24 x 32 x 32) is not in CONFIG; the cpu and tiny scales add "depth"/"height"/"width" keys.

Note: with gamma = ones, as published, every normalised group has mean exactly zero, so
y = mean(beta) for every sample (up to rounding) whatever x and W. The output is ~4e-3.
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "23_Conv3d_GroupNorm_Mean",
    "batch_size": 128,
    "in_channels": 3,
    "out_channels": 24,
    "kernel_size": 3,
    "num_groups": 8,
}

SCALES = {
    "paper": {},
    "cpu": {"batch_size": 8, "depth": 8, "height": 16, "width": 16},
    "tiny": {"batch_size": 4, "depth": 6, "height": 8, "width": 8},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Conv3d_GroupNorm_Mean",
    "kernelbench_id": 23,
    "handtuned": False,
}

# The output is mean(beta) ~ 4e-3 (see above), below the default atol of 1e-2, which would accept
# zeros. The reference computes the group statistics in float32, so it is accurate to ~1e-6;
# atol 1e-4 still leaves room for a kernel that rounds the normalised values to bf16 before the
# mean (those errors average out over the ~5e5 values per sample), but not for one that rounds the
# group mean to bf16 before subtracting it.
TOLERANCE = {"atol": 1e-4, "rtol": 1e-2}


def _uniform(key, shape):
    """U[0, 1) float32 of ``shape``, drawn flat and reshaped: the same values as drawing ``shape``
    directly, but XLA:CPU compiles a flat random kernel several times faster than a rank-4/5 one."""
    return jax.random.uniform(key, (math.prod(shape),), jnp.float32).reshape(shape)


def _normal(key, shape):
    """N(0, 1) float32 of ``shape``, drawn flat and reshaped (same values, faster to compile)."""
    return jax.random.normal(key, (math.prod(shape),), jnp.float32).reshape(shape)


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, conv_bias, gamma, beta).

    x U[0,1); weight (out, in, 3, 3, 3), conv_bias, beta N(0, 0.02) from key(42); gamma ones.
    """
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    d, h, w = CONFIG.get("depth", 24), CONFIG.get("height", 32), CONFIG.get("width", 32)
    x = _uniform(jax.random.key(0), (b, cin, d, h, w)).astype(dtype)
    k_w, k_cb, k_beta = jax.random.split(jax.random.key(42), 3)
    weight = (_normal(k_w, (cout, cin, k, k, k)) * 0.02).astype(dtype)
    conv_bias = (_normal(k_cb, (cout,)) * 0.02).astype(dtype)
    beta = (_normal(k_beta, (cout,)) * 0.02).astype(dtype)
    return x, weight, conv_bias, jnp.ones((cout,), dtype), beta


def _conv3d(x, weight):
    """NCDHW x OIDHW -> NCDHW, stride 1, VALID, float32 accumulation."""
    y = jax.lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 4, 1)), jnp.transpose(weight, (2, 3, 4, 1, 0)),
        window_strides=(1, 1, 1), padding="VALID",
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 4, 1, 2, 3))


def workload(x, weight, conv_bias, gamma, beta):
    groups = CONFIG["num_groups"]
    f32 = jnp.float32
    h = _conv3d(x, weight) + conv_bias.astype(f32)[None, :, None, None, None]
    b, c = h.shape[:2]
    g = h.reshape(b, groups, -1)
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
    h = ((g - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(h.shape)
    h = h * gamma.astype(f32)[None, :, None, None, None] + beta.astype(f32)[None, :, None, None, None]
    return jnp.mean(h, axis=(1, 2, 3, 4)).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch (24 channels in 8 groups kept)."""
    c = config
    return [{"batch_size": _halve(c["batch_size"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
