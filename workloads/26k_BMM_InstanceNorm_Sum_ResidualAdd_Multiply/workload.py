"""KernelBench Level 2, task 28: BMM_InstanceNorm_Sum_ResidualAdd_Multiply.

h = x @ W.T + bmm_bias (W stored (out_features, in_features)). KernelBench applies InstanceNorm2d
to h viewed as (batch, 1, 1, out_features): each row is normalised over its out_features entries
(biased variance, eps 1e-5), then scaled by in_weight and shifted by in_bias (per feature).
Then y = (n + y_in) * y_in, with y_in the second input, shape (batch_size, out_features).
The matmul accumulates in float32, the epilogue runs in float32 and the output has the input dtype.

Deliberate divergence from the published JAXBench program (kept, documented): the published 26k
normalises h viewed as (batch, out_features, 1, 1), i.e. over its singleton spatial dimensions,
so every normalised value is (h - h) / sqrt(0 + eps) = 0 and the result is in_bias whatever x and
W are: its GEMM is computed and thrown away (XLA may even remove it). jb keeps KernelBench's
semantics (InstanceNorm2d over the (1, out_features) "image" of each row: a per-row instance
norm), the meaningful program. Effect on the baseline: jb's XLA reference really computes the
(batch x in x out) GEMM plus a row reduction, so its time is that of a GEMM-bound program and not
the published one's (which can be much faster if the dead GEMM is eliminated); speedups on 26k
are relative to this meaningful reference and are not comparable with the published 26k numbers.

Fidelity: jb keeps KernelBench's normalisation over the features (InstanceNorm2d of
x.unsqueeze(1).unsqueeze(1), a (N, 1, 1, C) tensor: statistics over the C features); a listed
exception of jb.tools.published_check (test: python/tests/test_published_semantics.py). The
published program expands to (N, C, 1, 1) and normalises each entry over its own 1x1 extent,
which is 0 whatever x is: its output (in_bias + y) * y ignores x and both weights, a degenerate
workload that a kernel skipping the matmul would compute exactly.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply",
    "batch_size": 4096,
    "in_features": 8192,
    "out_features": 8192,
}

SCALES = {
    "paper": {},
    "cpu": {"batch_size": 256, "out_features": 1024},
    "tiny": {"batch_size": 16, "out_features": 256},
}

META = {
    "category": "kernelbench",
    "model": "KernelBench Level 2",
    "operator": "BMM_InstanceNorm_Sum_ResidualAdd_Multiply",
    "kernelbench_id": 28,
    "handtuned": False,
}


def create_inputs(dtype=jnp.float32):
    """Returns (x, y, weight, bmm_bias, in_weight, in_bias).

    x (B, in), y (B, out) U[0,1) from key(0); weight (out, in), bmm_bias, in_bias (out,)
    N(0, 0.02) from key(42); in_weight ones.
    """
    b, k, n = CONFIG["batch_size"], CONFIG["in_features"], CONFIG["out_features"]
    k_x, k_y = jax.random.split(jax.random.key(0), 2)
    x = jax.random.uniform(k_x, (b, k), jnp.float32).astype(dtype)
    y = jax.random.uniform(k_y, (b, n), jnp.float32).astype(dtype)
    k_w, k_b, k_ib = jax.random.split(jax.random.key(42), 3)
    weight = (jax.random.normal(k_w, (n, k), jnp.float32) * 0.02).astype(dtype)
    bmm_bias = (jax.random.normal(k_b, (n,), jnp.float32) * 0.02).astype(dtype)
    in_weight = jnp.ones((n,), dtype)
    in_bias = (jax.random.normal(k_ib, (n,), jnp.float32) * 0.02).astype(dtype)
    return x, y, weight, bmm_bias, in_weight, in_bias


def workload(x, y, weight, bmm_bias, in_weight, in_bias):
    h = jax.lax.dot_general(x, weight, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    h = h + bmm_bias.astype(jnp.float32)
    mean = jnp.mean(h, axis=1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=1, keepdims=True)
    n = (h - mean) * jax.lax.rsqrt(var + 1e-5)
    n = n * in_weight.astype(jnp.float32) + in_bias.astype(jnp.float32)
    y32 = y.astype(jnp.float32)
    return ((n + y32) * y32).astype(x.dtype)


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): batch and output features."""
    c = config
    return [{"batch_size": _halve(c["batch_size"]), "out_features": _halve(c["out_features"])}]


TRIALS = ["affine"]  # the constant norm parameters are redrawn in every trial; wider in "affine"
