"""Fresh input sets for verification and timing.

``create_inputs`` of a workload uses fixed seeds. To give each correctness trial fresh values (so a
kernel that caches results across calls, or that hard-codes the seed's statistics, fails), each
floating-point input leaf is redrawn from a distribution at the leaf's own scale:
``mean(orig) + std(orig) * z`` with z from the named distribution. Leaves that are constant
(masks of ones, zero biases, BatchNorm running variances) and all integer leaves (labels, page
tables, lengths, group sizes) keep their values, so they keep their meaning. Python scalars (static
arguments) are passed through.

The magnitude distributions (``small``, ``large``) rescale only the first floating-point input
(the activations); weights keep their scale. Rescaling every input compounds in multi-input
workloads (MLA scores would move by 4^3), turning attention into argmax and making a correct bf16
kernel fail, or shrinking outputs until a kernel returning zeros passes.
"""

from __future__ import annotations

import numpy as np

DISTRIBUTIONS = ("normal", "uniform", "signed", "small", "large", "sparse")


def _standard_sample(rng: np.random.Generator, dist: str, shape) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    if dist == "uniform":  # [0, 1) rescaled to unit variance, mean 0.5*sqrt(12)
        return (rng.random(shape, dtype=np.float32) - 0.5) * np.float32(np.sqrt(12.0))
    if dist == "signed":  # random signs of magnitude ~1: a bimodal distribution
        return np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32) * (
            0.75 + 0.5 * rng.random(shape, dtype=np.float32)
        )
    if dist == "small":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.25)
    if dist == "large":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(2.0)
    if dist == "normal_unit":  # internal: the shape of small/large without their magnitude
        return rng.standard_normal(shape, dtype=np.float32)
    if dist == "sparse":
        z = rng.standard_normal(shape, dtype=np.float32) * np.float32(2.0)
        return np.where(rng.random(shape) < 0.75, np.float32(0.0), z)
    raise ValueError(f"unknown distribution {dist!r}; expected one of {DISTRIBUTIONS}")


def resample(inputs, seed: int, dist: str = "normal"):
    """Return a tuple like ``inputs`` with every non-constant float leaf redrawn."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    first_float = [True]

    def redraw(leaf):
        if not isinstance(leaf, (jax.Array, np.ndarray)):
            return leaf
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf
        host = np.asarray(leaf, dtype=np.float32)
        if host.size <= 1:
            return leaf
        mean, std = float(host.mean()), float(host.std())
        if std == 0.0 or not np.isfinite(std):
            return leaf
        leaf_dist = dist
        if dist in ("small", "large") and not first_float[0]:
            leaf_dist = "normal_unit"
        first_float[0] = False
        z = _standard_sample(rng, leaf_dist, host.shape)
        if dist == "sparse":
            new = z * std + np.where(z == 0, 0.0, mean)
        else:
            new = mean + std * z
        return jnp.asarray(new.astype(np.float32), dtype=leaf.dtype)

    return tuple(jax.tree_util.tree_map(redraw, tuple(inputs)))
