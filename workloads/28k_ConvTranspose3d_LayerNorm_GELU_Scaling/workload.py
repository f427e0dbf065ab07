"""KernelBench Level 2, task 34: ConvTranspose3d_LayerNorm_GELU_Scaling.

h = conv_transpose3d(x, W) + conv_bias with kernel 4, stride 2, padding 1; x is NCDHW
(batch, 32, 16, 32, 32) and W (in, out, 4, 4, 4) in PyTorch's ConvTranspose layout, so h is
(batch, 64, 32, 64, 64). As in the published program, the transposed convolution is computed by
zero-dilating the input explicitly (a zero tensor with the input scattered at every stride-th
position) and running a plain stride-1 convolution (padding kernel - 1 - padding = 2 on each side)
with the spatially flipped kernel, in NDHWC with float32 accumulation. (A convolution with
lhs_dilation computes the same function but is a different XLA program, with a different time:
the baseline is the paper's program.)
Then LayerNorm(out_channels) as KernelBench applies it: over the LAST axis, W_out = 64 (which
equals out_channels), biased variance, eps 1e-5, with ln_weight, ln_bias; then the tanh-approximate
GELU and * 1.0. W is N(0, 1) as published. The epilogue runs in float32 and the output has the
input dtype. The published volume (16 x 32 x 32) is not in CONFIG; the cpu and tiny scales add
"depth"/"height"/"width" keys, keeping 2 * width == out_channels.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "34_ConvTranspose3d_LayerNorm_GELU_Scaling",
    "batch_size": 32,
    "in_channels": 32,
    "out_channels": 64,
    "kernel_size": 4,
    "stride": 2,
    "padding": 1,
    "bias": True,
    "eps": 1e-05,
    "scaling_factor": 1.0,
}

SCALES = {
    "paper": {},
    "cpu": {"batch_size": 1, "in_channels": 8, "depth": 2, "height": 4, "width": 32},
    "tiny": {"batch_size": 1, "in_channels": 4, "out_channels": 16, "depth": 2, "height": 4, "width": 8},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "ConvTranspose3d_LayerNorm_GELU_Scaling",
    "kernelbench_id": 34,
    "handtuned": False,
}

# The LayerNorm runs over only 64 values whose common offset is several times their spread, so a
# kernel that rounds the transposed-convolution output to bf16 moves normalised values by up to
# ~1.5e-2, plus one output ulp (measured max difference 3.1e-2 at an output of 2). Outputs reach ~4.
TOLERANCE = {"atol": 2e-2, "rtol": 1e-2}


def _uniform(key, shape):
    """U[0, 1) float32 of ``shape``, drawn flat and reshaped: the same values as drawing ``shape``
    directly, but XLA:CPU compiles a flat random kernel several times faster than a rank-4/5 one."""
    return jax.random.uniform(key, (math.prod(shape),), jnp.float32).reshape(shape)


def _normal(key, shape):
    """N(0, 1) float32 of ``shape``, drawn flat and reshaped (same values, faster to compile)."""
    return jax.random.normal(key, (math.prod(shape),), jnp.float32).reshape(shape)


def create_inputs(dtype=jnp.float32):
    """Returns (x, conv_weight, conv_bias, ln_weight, ln_bias).

    x U[0,1) and conv_weight (in, out, 4, 4, 4) N(0, 1) from key(0); conv_bias zeros (out,);
    ln_weight ones, ln_bias zeros (out,).
    """
    b, cin, cout, k = (CONFIG[n] for n in ("batch_size", "in_channels", "out_channels", "kernel_size"))
    d, h, w = CONFIG.get("depth", 16), CONFIG.get("height", 32), CONFIG.get("width", 32)
    k_x, k_w = jax.random.split(jax.random.key(0), 2)
    x = _uniform(k_x, (b, cin, d, h, w)).astype(dtype)
    conv_weight = _normal(k_w, (cin, cout, k, k, k)).astype(dtype)
    conv_bias = jnp.zeros((cout,), dtype)
    return x, conv_weight, conv_bias, jnp.ones((cout,), dtype), jnp.zeros((cout,), dtype)


def _conv_transpose3d(x, weight, stride, padding):
    """PyTorch ConvTranspose3d: NCDHW x (in, out, k, k, k) -> NCDHW, float32 accumulation."""
    k = weight.shape[2]
    flipped = weight[:, :, ::-1, ::-1, ::-1]
    rhs = jnp.transpose(flipped, (2, 3, 4, 0, 1))  # DHWIO with I = in, O = out
    pad = k - 1 - padding
    xl = jnp.transpose(x, (0, 2, 3, 4, 1))  # NDHWC
    n, d, h, w, c = xl.shape
    dilated = jnp.zeros((n, (d - 1) * stride + 1, (h - 1) * stride + 1, (w - 1) * stride + 1, c), xl.dtype)
    dilated = dilated.at[:, ::stride, ::stride, ::stride, :].set(xl)
    y = jax.lax.conv_general_dilated(
        dilated, rhs, window_strides=(1, 1, 1), padding=[(pad, pad)] * 3,
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"), preferred_element_type=jnp.float32,
    )
    return jnp.transpose(y, (0, 4, 1, 2, 3))


def workload(x, conv_weight, conv_bias, ln_weight, ln_bias):
    f32 = jnp.float32
    h = _conv_transpose3d(x, conv_weight, 2, 1) + conv_bias.astype(f32)[None, :, None, None, None]
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
    h = (h - mean) * jax.lax.rsqrt(var + 1e-5)
    h = h * ln_weight.astype(f32) + ln_bias.astype(f32)
    h = jax.nn.gelu(h, approximate=True)
    return (h * 1.0).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and input
    channels (out_channels stays: the LayerNorm runs over the output width, 2 * width == out_channels)."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "in_channels": _halve(c["in_channels"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
