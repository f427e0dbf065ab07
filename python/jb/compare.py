"""Comparison of a candidate's outputs with the reference.

Two rules. ``judge`` (what verify uses): structure, shape, dtype and finiteness against the
reference, then values against the float32 evaluation of the reference within a multiple of the
reference's own rounding noise (jb.tolerance). ``compare``: the flat rule, symmetric in float32 -
numpy's allclose is asymmetric (the tolerance scales with its second argument only); jb uses
``|a - b| <= atol + rtol * max(|a|, |b|)`` elementwise, the same whichever side is the reference.
The flat rule is the fallback where no noise can be measured, and what workloads ask for with
``TOLERANCE["rule"] = "flat"``.
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
    elem_ratio: float | None = None  # noise rule: worst |err| / per-element bound
    rms_ratio: float | None = None  # noise rule: worst RMS error / aggregate bound
    rule: str = "flat"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def to_host_leaves(out) -> list[np.ndarray]:
    import jax

    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(out)]


def _structure(reference, candidate) -> tuple[Comparison | None, list, list]:
    """(failure or None, reference leaves, candidate leaves): structure, shape, dtype, finiteness."""
    import jax

    ref_def = jax.tree_util.tree_structure(reference)
    cand_def = jax.tree_util.tree_structure(candidate)
    if ref_def != cand_def:
        return Comparison(False, float("inf"), float("inf"), f"output structure {cand_def} != reference {ref_def}"), [], []
    refs, cands = to_host_leaves(reference), to_host_leaves(candidate)
    for i, (r, c) in enumerate(zip(refs, cands)):
        if r.shape != c.shape:
            return Comparison(False, float("inf"), float("inf"), f"output {i}: shape {c.shape} != reference {r.shape}"), [], []
        if r.dtype != c.dtype:
            return Comparison(False, float("inf"), float("inf"), f"output {i}: dtype {c.dtype} != reference {r.dtype}"), [], []
        if np.any(np.isfinite(r.astype(np.float32)) & ~np.isfinite(c.astype(np.float32))):
            return Comparison(False, float("inf"), float("inf"), f"output {i}: non-finite values where the reference is finite"), [], []
    return None, refs, cands


def _is_float(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.floating) or a.dtype.name == "bfloat16"


def judge(reference, hi, emu, candidate, rule) -> Comparison:
    """The noise rule (jb.tolerance): ``reference`` is the reference's own output, ``hi`` its
    float32 evaluation and ``emu`` its bf16 end-to-end evaluation (None when unavailable) on the
    same inputs. Falls back to the flat rule where ``hi`` is None, for non-float outputs and when
    ``rule.kind`` is ``flat``."""
    from jb import tolerance

    if rule.kind == "flat" or hi is None:
        return compare(reference, candidate, rule.atol, rule.rtol)
    failed, refs, cands = _structure(reference, candidate)
    if failed is not None:
        return failed
    his = to_host_leaves(hi)
    emus = to_host_leaves(emu) if emu is not None else [None] * len(refs)
    if len(his) != len(refs) or len(emus) != len(refs):
        return compare(reference, candidate, rule.atol, rule.rtol)
    out = Comparison(True, 0.0, 0.0, None, 0.0, 0.0, "noise")
    for i, (r, h, e, c) in enumerate(zip(refs, his, emus, cands)):
        if r.size == 0:
            continue
        if not _is_float(r) or h.size != r.size:
            flat = compare(r, c, rule.atol, rule.rtol)
            out.max_abs_err = max(out.max_abs_err, flat.max_abs_err)
            out.max_rel_err = max(out.max_rel_err, flat.max_rel_err)
            if not flat.ok:
                out.ok, out.reason = False, f"output {i}: {flat.reason}"
                return out
            continue
        b = tolerance.leaf_bound(r, h, e if e is not None and e.size == r.size else None, rule)
        v = tolerance.judge_leaf(b, c)
        # Reported errors are against the reference's own output, as the flat rule reports them.
        abs_err, rel_err = _errors(r, c)
        out.max_abs_err = max(out.max_abs_err, abs_err)
        out.max_rel_err = max(out.max_rel_err, rel_err)
        out.elem_ratio = max(out.elem_ratio or 0.0, v.elem_ratio)
        out.rms_ratio = max(out.rms_ratio or 0.0, v.rms_ratio)
        if not v.ok and out.ok:
            out.ok, out.reason = False, f"output {i}: {v.reason}"
    return out


def _errors(r: np.ndarray, c: np.ndarray) -> tuple[float, float]:
    """(max abs, max symmetric relative) difference over the reference's finite elements."""
    r32, c32 = r.astype(np.float32), c.astype(np.float32)
    finite = np.isfinite(r32)
    diff = np.where(finite, np.abs(r32 - c32), 0.0)
    scale = np.maximum(np.abs(r32), np.abs(c32))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(finite & (scale > 0), diff / scale, 0.0)
    return float(diff.max()), float(rel.max())


def compare(reference, candidate, atol: float, rtol: float) -> Comparison:
    """The flat rule: structure, shape, dtype, finiteness, then ``|a - b| <= atol + rtol * max(|a|, |b|)``."""
    failed, refs, cands = _structure(reference, candidate)
    if failed is not None:
        return failed
    worst_abs, worst_rel = 0.0, 0.0
    for i, (r, c) in enumerate(zip(refs, cands)):
        r32, c32 = r.astype(np.float32), c.astype(np.float32)
        ref_finite = np.isfinite(r32)
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
