"""KernelBench Level 2, task 67: Conv2d_GELU_GlobalAvgPool.

h = gelu(conv2d(x, W) + b) with a 3x3 stride-1 VALID convolution and the tanh-approximate GELU;
y = mean of h over H and W (adaptive average pool to 1x1, squeezed), shape (batch, out_channels).
x is NCHW (batch, 8, 256, 256). The convolution runs in NHWC with float32 accumulation; the
epilogue runs in float32 and the output has the input dtype. The published image size
(256 x 256) is not in CONFIG; the cpu and tiny scales add "height"/"width" keys.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "67_Conv2d_GELU_GlobalAvgPool",
    "batch_size": 128,
    "in_channels": 8,
    "out_channels": 64,
    "kernel_size": 3,
}

# Channel counts are kept: the output is one value per channel.
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 4, "height": 64, "width": 64},
    "tiny": {"batch_size": 2, "height": 12, "width": 12},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Conv2d_GELU_GlobalAvgPool",
    "kernelbench_id": 67,
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
    """Returns (x, weight, bias): x U[0,1); weight (out, in, 3, 3), bias (out,) N(0, 0.02)."""
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    h, w = CONFIG.get("height", 256), CONFIG.get("width", 256)
    x = _uniform(jax.random.key(0), (b, cin, h, w)).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 2)
    weight = (_normal(k_w, (cout, cin, k, k)) * 0.02).astype(dtype)
    bias = (_normal(k_b, (cout,)) * 0.02).astype(dtype)
    return x, weight, bias


def _conv2d(x, weight):
    """NCHW x OIHW -> NCHW, stride 1, VALID, float32 accumulation."""
    y = jax.lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(weight, (2, 3, 1, 0)),
        window_strides=(1, 1), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 3, 1, 2))


def workload(x, weight, bias):
    h = _conv2d(x, weight) + bias.astype(jnp.float32)[None, :, None, None]
    h = jax.nn.gelu(h, approximate=True)
    return jnp.mean(h, axis=(2, 3)).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output channels."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_channels": _halve(c["out_channels"])}]
