"""KernelBench Level 2, task 99: Matmul_GELU_Softmax.

y = softmax(gelu(x @ W + b), axis=1) with the tanh-approximate GELU, W stored (in_features,
out_features). The matmul accumulates in float32, the epilogue runs in float32 and the output has
the input dtype.

Fidelity: the GELU is the tanh approximation (jax.nn.gelu's default), as in the published
JAXBench program, whose times are the benchmark's; KernelBench's PyTorch original uses the
exact erf form (they differ by up to ~5e-4; python/tests/test_published_semantics.py).
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "99_Matmul_GELU_Softmax",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
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
    "operator": "Matmul_GELU_Softmax",
    "kernelbench_id": 99,
    "handtuned": False,
}

# Softmax over out_features entries: outputs are ~1/out_features (1.2e-4 at the published size),
# so atol=1e-2 would accept an all-zero output. The comparison is relative: bf16 rounding of a
# logit of magnitude 2-4 (error up to 4e-3) becomes a 0.4 % relative error after exp, plus
# 0.2-0.4 % from rounding the output to bf16, hence rtol 2e-2; atol only guards the far tail.
TOLERANCE = {"atol": 1e-6, "rtol": 2e-2}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (in, out), bias (out,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(42), 2)
    weight = (jax.random.normal(k_w, (k, n), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jnp.dot(x, weight, preferred_element_type=jnp.float32) + bias.astype(jnp.float32)
    return jax.nn.softmax(jax.nn.gelu(h, approximate=True), axis=1).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["large_logits"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). large_logits: x rescaled so the pre-GELU values have a
    std of ~40 (row maxima > 88: exp overflows float32 without the max subtraction)."""
    if name != "large_logits":
        return None
    from jb import inputs as jbi

    x, weight, bias = inputs
    probe = jbi.host(x)[:8] @ jbi.host(weight)
    return jbi.like(x, jbi.host(x) * jbi.spread_scale(probe, 40.0)), weight, bias
