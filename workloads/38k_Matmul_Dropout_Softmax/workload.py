"""KernelBench Level 2, task 66: Matmul_Dropout_Softmax.

h = x @ W.T + b (W stored (out_features, in_features)); dropout is skipped (inference, as in the
JAXBench translation; dropout_p stays in CONFIG); y = softmax(h, axis=1). The matmul accumulates in
float32, the softmax runs in float32 and the output has the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "66_Matmul_Dropout_Softmax",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
    "dropout_p": 0.2,
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
    "operator": "Matmul_Dropout_Softmax",
    "kernelbench_id": 66,
    "handtuned": False,
}

# Softmax over out_features entries: outputs are ~1/out_features (1.2e-4 at the published size,
# max ~4e-3), so atol=1e-2 would accept an all-zero output. The comparison is relative: a bf16
# logit of magnitude 2-4 carries a rounding error of up to 4e-3 which exp turns into a relative
# error of 0.4 %, plus 0.2-0.4 % from rounding the output to bf16, hence rtol 2e-2; atol only
# guards the far tail.
TOLERANCE = {"atol": 1e-6, "rtol": 2e-2}


def create_inputs(dtype=jnp.float32):
    """Returns (x, weight, bias): x (B, in) U[0,1); weight (out, in), bias (out,) N(0, 0.02)."""
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    x = jax.random.uniform(jax.random.key(0), (b, k), jnp.float32).astype(dtype)
    k_w, k_b = jax.random.split(jax.random.key(42), 2)
    weight = (jax.random.normal(k_w, (n, k), jnp.float32) * 0.02).astype(dtype)
    bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, weight, bias


def workload(x, weight, bias):
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    h = h + bias.astype(jnp.float32)
    return jax.nn.softmax(h, axis=1).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["large_logits"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). large_logits: x rescaled so the pre-softmax values have a
    std of ~40 (row maxima > 88: exp overflows float32 without the max subtraction)."""
    if name != "large_logits":
        return None
    from jb import inputs as jbi

    x, weight, bias = inputs
    probe = jbi.host(x)[:8] @ jbi.host(weight).T
    return jbi.like(x, jbi.host(x) * jbi.spread_scale(probe, 40.0)), weight, bias
