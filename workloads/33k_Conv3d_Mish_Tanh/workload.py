"""KernelBench Level 2, task 47: Conv3d_Mish_Tanh.

y = tanh(mish(conv3d(x, W) + b)), 3x3x3 stride-1 VALID convolution, mish(t) = t * tanh(softplus(t)).
x is NCDHW (batch, 32, 32, 64, 64), the output (batch, 64, 30, 62, 62). The convolution runs in
NDHWC with float32 accumulation; the epilogue runs in float32 and the output has the input dtype.
The published volume (32 x 64 x 64) is not in CONFIG; the cpu and tiny scales add
"depth"/"height"/"width" keys.
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "47_Conv3d_Mish_Tanh",
    "batch_size": 16,
    "in_channels": 32,
    "out_channels": 64,
    "kernel_size": 3,
}

# in_channels is kept (with N(0, 0.02) weights it sets the magnitude of the convolution).
SCALES = {
    "paper": {},
    "cpu": {"batch_size": 1, "out_channels": 32, "depth": 8, "height": 24, "width": 24},
    "tiny": {"batch_size": 1, "out_channels": 16, "depth": 5, "height": 8, "width": 8},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "Conv3d_Mish_Tanh",
    "kernelbench_id": 47,
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
    """Returns (x, weight, bias): x U[0,1); weight (out, in, 3, 3, 3), bias (out,) N(0, 0.02)."""
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    d, h, w = CONFIG.get("depth", 32), CONFIG.get("height", 64), CONFIG.get("width", 64)
    x = _uniform(jax.random.key(0), (b, cin, d, h, w)).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(0xBADC0DE), 2)
    weight = (_normal(k_w, (cout, cin, k, k, k)) * 0.02).astype(dtype)
    bias = (_normal(k_b, (cout,)) * 0.02).astype(dtype)
    return x, weight, bias


def _conv3d(x, weight):
    """NCDHW x OIDHW -> NCDHW, stride 1, VALID, float32 accumulation."""
    y = jax.lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 4, 1)), jnp.transpose(weight, (2, 3, 4, 1, 0)),
        window_strides=(1, 1, 1), padding="VALID",
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 4, 1, 2, 3))


def workload(x, weight, bias):
    h = _conv3d(x, weight) + bias.astype(jnp.float32)[None, :, None, None, None]
    h = h * jnp.tanh(jax.nn.softplus(h))
    return jnp.tanh(h).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output channels."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_channels": _halve(c["out_channels"])}]
