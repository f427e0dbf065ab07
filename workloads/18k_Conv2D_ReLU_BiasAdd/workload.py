"""KernelBench Level 2, task 1: Conv2D_ReLU_BiasAdd.

y = relu(conv2d(x, W) + conv_bias) + bias, with a 3x3 stride-1 unpadded ("VALID") convolution.
x is NCHW (batch, in_channels, 128, 128), W OIHW (out, in, 3, 3), bias (out, 1, 1); the output is
(batch, out_channels, 126, 126). The convolution runs in NHWC (transpose in, transpose out) with
float32 accumulation; the epilogue runs in float32 and the output has the input dtype.
The published image size (128 x 128) is not in CONFIG; the cpu and tiny scales add
"height"/"width" keys.
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "1_Conv2D_ReLU_BiasAdd",
    "batch_size": 128,
    "in_channels": 64,
    "out_channels": 128,
    "kernel_size": 3,
}

# in_channels is kept (with N(0, 0.02) weights it sets the magnitude of the convolution).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 8, "out_channels": 64, "height": 32, "width": 32},
    "tiny": {"batch_size": 2, "out_channels": 16, "height": 12, "width": 12},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Conv2D_ReLU_BiasAdd",
    "kernelbench_id": 1,
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
    """Returns (x, weight, conv_bias, bias): x U[0,1); weight, conv_bias, bias N(0, 0.02)."""
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    h, w = CONFIG.get("height", 128), CONFIG.get("width", 128)
    x = _uniform(jax.random.key(0), (b, cin, h, w)).astype(dtype)
    k_w, k_cb, k_b = jax.random.split(jax.random.key(0xBADC0DE), 3)
    weight = (_normal(k_w, (cout, cin, k, k)) * 0.02).astype(dtype)
    conv_bias = (_normal(k_cb, (cout,)) * 0.02).astype(dtype)
    bias = (_normal(k_b, (cout, 1, 1)) * 0.02).astype(dtype)
    return x, weight, conv_bias, bias


def _conv2d(x, weight):
    """NCHW x OIHW -> NCHW, stride 1, VALID, float32 accumulation."""
    y = jax.lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
        window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 3, 1, 2))


def workload(x, weight, conv_bias, bias):
    h = _conv2d(x, weight) + conv_bias.astype(jnp.float32)[None, :, None, None]
    h = jnp.maximum(h, 0.0) + bias.astype(jnp.float32)[None]
    return h.astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output channels."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_channels": _halve(c["out_channels"])}]
