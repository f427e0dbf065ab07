"""KernelBench Level 2, task 52: Conv2d_Activation_BatchNorm.

h = conv2d(x, W) + bias (3x3, stride 1, VALID); h = tanh(softplus(h)) * h (Mish);
BatchNorm2d in training mode: each channel normalised with the mean and biased variance over
batch, H and W (eps 1e-5), then scaled by bn_weight and shifted by bn_bias (inputs, as in the
published function; created as ones and zeros). W and bias are N(0, 1) as published. x is NCHW
(batch, 64, 128, 128), the output (batch, 128, 126, 126). The convolution runs in NHWC with
float32 accumulation; the epilogue runs in float32 and the output has the input dtype. The
published image size (128 x 128) is not in CONFIG; the cpu and tiny scales add "height"/"width".
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "52_Conv2d_Activation_BatchNorm",
    "batch_size": 64,
    "in_channels": 64,
    "out_channels": 128,
    "kernel_size": 3,
}

SCALES = {
    "paper": {},
    "cpu": {"batch_size": 8, "out_channels": 64, "height": 32, "width": 32},
    "tiny": {"batch_size": 2, "out_channels": 16, "height": 12, "width": 12},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Conv2d_Activation_BatchNorm",
    "kernelbench_id": 52,
    "handtuned": False,
}

# With N(0, 1) weights and bias, a channel's pre-activations have mean ~N(0, 12) and spread ~7,
# so some channels lie almost entirely below zero: their batch statistics come from Mish's
# exponential tail (mish(h) ~ h * exp(h)), where rounding h to bf16 (a plain bf16 convolution,
# absolute error |h| * 2^-9) changes values by 1-3 % relative, and the few values near zero
# normalise to outliers of 20-500. Measured relative differences: 1.2 % at the cpu scale, 2.4 % with
# 61k positions per channel; a simulation of the published channels needs 1.1 %. Hence rtol 3e-2.
TOLERANCE = {"atol": 1e-2, "rtol": 3e-2}


def _uniform(key, shape):
    """U[0, 1) float32 of ``shape``, drawn flat and reshaped: the same values as drawing ``shape``
    directly, but XLA:CPU compiles a flat random kernel several times faster than a rank-4/5 one."""
    return jax.random.uniform(key, (math.prod(shape),), jnp.float32).reshape(shape)


def _normal(key, shape):
    """N(0, 1) float32 of ``shape``, drawn flat and reshaped (same values, faster to compile)."""
    return jax.random.normal(key, (math.prod(shape),), jnp.float32).reshape(shape)


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias, bn_weight, bn_bias) from key(0): x U[0,1); weight (out, in, 3, 3),
    bias N(0, 1); bn_weight ones, bn_bias zeros (out,)."""
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    h, w = CONFIG.get("height", 128), CONFIG.get("width", 128)
    k_x, k_w, k_b = jax.random.split(jax.random.key(0), 3)
    x = _uniform(k_x, (b, cin, h, w)).astype(dtype)
    weight = _normal(k_w, (cout, cin, k, k)).astype(dtype)
    bias = _normal(k_b, (cout,)).astype(dtype)
    return x, weight, bias, jnp.ones((cout,), dtype), jnp.zeros((cout,), dtype)


def _conv2d(x, weight):
    """NCHW x OIHW -> NCHW, stride 1, VALID, float32 accumulation."""
    y = jax.lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
        window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 3, 1, 2))


def workload(x, weight, bias, bn_weight, bn_bias):
    h = _conv2d(x, weight) + bias.astype(jnp.float32)[None, :, None, None]
    h = jnp.tanh(jax.nn.softplus(h)) * h
    mean = jnp.mean(h, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=(0, 2, 3), keepdims=True)
    h = (h - mean) * jax.lax.rsqrt(var + 1e-5)
    h = h * bn_weight.astype(jnp.float32)[None, :, None, None] + bn_bias.astype(jnp.float32)[None, :, None, None]
    return h.astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output channels."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_channels": _halve(c["out_channels"])}]


TRIALS = ["affine"]  # bn_weight / bn_bias are redrawn in every trial; wider in "affine"
