"""Comparison of a candidate's outputs with the reference.

Two rules. ``judge`` (what verify, recheck and - on the device, ``DeviceCheck`` - the profile
step's timed-output check use, on the same per-leaf ``bounds``): structure, shape, dtype and finiteness against the
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


@dataclasses.dataclass
class FlatLeaf:
    """One output judged by the flat rule (integer outputs, no float32 evaluation)."""

    ref: np.ndarray
    atol: float
    rtol: float


def bounds(reference, hi, emu, rule) -> list | None:
    """The allowed error of every output leaf of ``reference`` (a ``tolerance.LeafBound`` or a
    ``FlatLeaf`` per leaf), the one definition ``judge`` and the device check of timed outputs
    (``device_checker``) both apply. None where the whole output falls back to the flat rule."""
    from jb import tolerance

    if rule.kind == "flat" or hi is None:
        return None
    refs = to_host_leaves(reference)
    his = to_host_leaves(hi)
    emus = to_host_leaves(emu) if emu is not None else [None] * len(refs)
    if len(his) != len(refs) or len(emus) != len(refs):
        return None
    out = []
    for r, h, e in zip(refs, his, emus):
        if r.size == 0 or not _is_float(r) or h.size != r.size:
            out.append(FlatLeaf(r, rule.atol, rule.rtol))
        else:
            out.append(tolerance.leaf_bound(r, h, e if e is not None and e.size == r.size else None, rule))
    return out


def judge(reference, hi, emu, candidate, rule, leaf_bounds: list | None = None) -> Comparison:
    """The noise rule (jb.tolerance): ``reference`` is the reference's own output, ``hi`` its
    float32 evaluation and ``emu`` its bf16 end-to-end evaluation (None when unavailable) on the
    same inputs. Falls back to the flat rule where ``hi`` is None, for non-float outputs and when
    ``rule.kind`` is ``flat``. ``leaf_bounds``: ``bounds(reference, hi, emu, rule)`` if already
    computed."""
    from jb import tolerance

    leaf_bounds = leaf_bounds if leaf_bounds is not None else bounds(reference, hi, emu, rule)
    if leaf_bounds is None:
        return compare(reference, candidate, rule.atol, rule.rtol)
    failed, refs, cands = _structure(reference, candidate)
    if failed is not None:
        return failed
    out = Comparison(True, 0.0, 0.0, None, 0.0, 0.0, "noise")
    for i, (r, b, c) in enumerate(zip(refs, leaf_bounds, cands)):
        if r.size == 0:
            continue
        if isinstance(b, FlatLeaf):
            flat = compare(r, c, b.atol, b.rtol)
            out.max_abs_err = max(out.max_abs_err, flat.max_abs_err)
            out.max_rel_err = max(out.max_rel_err, flat.max_rel_err)
            if not flat.ok:
                out.ok, out.reason = False, f"output {i}: {flat.reason}"
                return out
            continue
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


class DeviceCheck:
    """``judge`` on the device, for outputs that must not leave it (the timed iterations of
    ``profile``): the same per-leaf bounds (``bounds``), compiled once per input set before the
    implementation is imported. ``dispatch(outputs)`` returns a device result; ``verdict(result)``
    turns it into a ``Comparison`` with ``judge``'s thresholds (per element within the bound,
    non-finite where the reference is finite counts, RMS within the aggregate bound; the flat rule
    for flat leaves)."""

    def __init__(self, reference, hi, emu, rule):
        import jax
        import jax.numpy as jnp

        self.rule = rule
        self.leaf_bounds = bounds(reference, hi, emu, rule)
        refs = to_host_leaves(reference)
        if self.leaf_bounds is None:
            self.leaf_bounds = [FlatLeaf(r, rule.atol, rule.rtol) for r in refs]
        self.kind = "noise" if any(not isinstance(b, FlatLeaf) for b in self.leaf_bounds) else "flat"
        consts = []
        for r, b in zip(refs, self.leaf_bounds):
            ref_finite = np.isfinite(r.astype(np.float32))
            if isinstance(b, FlatLeaf):
                consts.append((jnp.asarray(r.astype(np.float32)), jnp.asarray(ref_finite)))
            else:
                consts.append((jnp.asarray(b.hi), jnp.asarray(b.bound.astype(np.float32)), jnp.asarray(b.finite),
                               jnp.asarray(ref_finite), jnp.float32(b.rms_bound), jnp.float32(max(int(b.finite.sum()), 1))))
        self._consts = consts
        flat_params = [(b.atol, b.rtol) if isinstance(b, FlatLeaf) else None for b in self.leaf_bounds]

        def check(consts, outs):
            bad, ratio, rms_ratio = [], [], []
            for params, k, c in zip(flat_params, consts, outs):
                c32 = c.astype(jnp.float32)
                if params is not None:
                    r32, ref_finite = k
                    diff = jnp.where(ref_finite, jnp.abs(r32 - c32), 0.0)
                    scale = jnp.maximum(jnp.abs(r32), jnp.abs(c32))
                    wrong = (ref_finite & ~jnp.isfinite(c32)) | (diff > params[0] + params[1] * scale)
                    bad.append(jnp.sum(wrong, dtype=jnp.int32))
                    ratio.append(jnp.max(jnp.where(jnp.isfinite(diff), diff, 0.0), initial=0.0))
                    rms_ratio.append(jnp.zeros((), jnp.float32))
                    continue
                h, bound, finite, ref_finite, rms_bound, n = k
                err = jnp.where(finite, jnp.abs(c32 - h), 0.0)
                wrong = (ref_finite & ~jnp.isfinite(c32)) | (err > bound)
                bad.append(jnp.sum(wrong, dtype=jnp.int32))
                ratio.append(jnp.max(jnp.where(bound > 0, err / jnp.where(bound > 0, bound, 1.0), jnp.where(err > 0, jnp.inf, 0.0)), initial=0.0))
                rms = jnp.sqrt(jnp.sum(jnp.where(finite, err * err, 0.0)) / n)
                rms_ratio.append(jnp.where(rms_bound > 0, rms / jnp.where(rms_bound > 0, rms_bound, 1.0), jnp.where(rms > 0, jnp.inf, 0.0)))
            return jnp.stack(bad), jnp.stack(ratio), jnp.stack(rms_ratio)

        self._fn = jax.jit(check).lower(consts, [jnp.asarray(r) for r in refs]).compile()

    def dispatch(self, leaves):
        return self._fn(self._consts, list(leaves))

    def verdict(self, result) -> Comparison:
        bad, ratio, rms_ratio = (np.asarray(x) for x in result)
        for i, b in enumerate(self.leaf_bounds):
            if int(bad[i]):
                what = (f"outside atol={b.atol}, rtol={b.rtol} (max abs err {float(ratio[i]):.4g})" if isinstance(b, FlatLeaf)
                        else f"beyond the noise bound (worst {float(ratio[i]):.3g}x its bound)")
                return Comparison(False, float("nan"), float("nan"), f"output {i}: {int(bad[i])} elements {what}", rule=self.kind)
            if not isinstance(b, FlatLeaf) and float(rms_ratio[i]) > 1.0:
                return Comparison(False, float("nan"), float("nan"),
                                  f"output {i}: RMS error {float(rms_ratio[i]):.3g}x the aggregate bound", rule=self.kind)
        noise = [i for i, b in enumerate(self.leaf_bounds) if not isinstance(b, FlatLeaf)]
        return Comparison(True, float("nan"), float("nan"), None,
                          float(max((ratio[i] for i in noise), default=0.0)) if noise else None,
                          float(max((rms_ratio[i] for i in noise), default=0.0)) if noise else None, self.kind)


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
