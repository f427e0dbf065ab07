"""Symmetric comparison of outputs in float32 under a workload's tolerance.

numpy's allclose is asymmetric (the tolerance scales with its second argument only). jb uses
``|a - b| <= atol + rtol * max(|a|, |b|)`` elementwise, the same whichever side is the reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    reason: str | None = None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def to_host_leaves(out) -> list[np.ndarray]:
    import jax

    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]


def compare(reference, candidate, atol: float, rtol: float) -> Comparison:
    """Compare two output pytrees: structure, shape, dtype, finiteness, then values."""
    import jax

    ref_def = jax.tree_util.tree_structure(reference)
    cand_def = jax.tree_util.tree_structure(candidate)
    if ref_def != cand_def:
        return Comparison(False, float("inf"), float("inf"), f"output structure {cand_def} != reference {ref_def}")
    worst_abs, worst_rel = 0.0, 0.0
    for i, (r, c) in enumerate(zip(to_host_leaves(reference), to_host_leaves(candidate))):
        if r.shape != c.shape:
            return Comparison(False, float("inf"), float("inf"), f"output {i}: shape {c.shape} != reference {r.shape}")
        if r.dtype != c.dtype:
            return Comparison(False, float("inf"), float("inf"), f"output {i}: dtype {c.dtype} != reference {r.dtype}")
        r32, c32 = r.astype(np.float32), c.astype(np.float32)
        ref_finite = np.isfinite(r32)
        if np.any(ref_finite & ~np.isfinite(c32)):
            return Comparison(False, float("inf"), float("inf"), f"output {i}: non-finite values where the reference is finite")
        if r32.size == 0:
            continue
        diff = np.abs(r32 - c32)
        diff = np.where(ref_finite, diff, 0.0)
        scale = np.maximum(np.abs(r32), np.abs(c32))
        worst_abs = max(worst_abs, float(diff.max()))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(scale > 0, diff / scale, 0.0)
        worst_rel = max(worst_rel, float(rel.max()))
        bad = diff > atol + rtol * scale
        if np.any(bad):
            n = int(bad.sum())
            return Comparison(
                False, worst_abs, worst_rel,
                f"output {i}: {n} of {r32.size} elements outside atol={atol}, rtol={rtol} (max abs err {float(diff.max()):.4g})",
            )
    return Comparison(True, worst_abs, worst_rel, None)
