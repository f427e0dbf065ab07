"""The evidence behind jb.tolerance: honest and wrong variants of every workload, judged.

For each workload and scale, on the verify trials (seeded, so the table is reproducible), the
judge's noise model is measured exactly as verify measures it (jb.tolerance.NoiseModel), and
these variants of the reference are judged as candidates:

honest
  ``f32acc``     the reference on the same values in float32 (matmul precision highest), rounded
                 to the output dtype: a kernel that keeps every intermediate in f32.
  ``bf16mat``    the reference with the results of every dot, convolution and reduction rounded
                 to bf16 (elementwise work in f32): a kernel chain that stores matmul results in
                 bf16 between fused elementwise stages.
  ``bf16e2e``    the reference with every intermediate computed from bf16 data rounded to bf16
                 (the judge's own ``emu`` evaluation; by construction within its noise).
  ``published``  with ``--published DIR``: the public JAXBench program ``DIR/<workload>/baseline.py``
                 (bf16 end to end) run on jb's inputs with its CONFIG scaled like jb's. Read from
                 where it lies, never copied here; "n/a" where its signature or dtype differs.
wrong
  ``drop_term``  the last term of the longest contraction (dot or convolution; a reduction when
                 there is none) dropped.
  ``drop_bias``  the first bias (an input added to a larger tensor) dropped.
  ``drop_affine`` the first affine scale (an input multiplying a larger tensor) dropped.

A wrong variant's exact effect (its float32 output against the exact answer, relative RMS) is
compared with the noise (the larger relative RMS deviation of the reference and of the bf16
end-to-end evaluation): under BELOW_NOISE times it, it is marked ``~noise``.

Printed per variant: the worst, over trials, of the two k-free ratios - per element
``max |c - hi| / scale`` and in aggregate ``rms(c - hi) / max(sigma, ulp_rms / 2)`` - and the
verdict under the default rule (pass when the ratios are under K_ELEM and K_RMS and the RMS error
is under MAX_REL_RMS of the output's RMS). ``-`` where a wrong variant does not apply (no such
operation), ``no-op`` where it does not change the exact answer on these trials (a constant
parameter, or a bias that a normalisation removes anyway: its float32 output is within 1e-4
relative RMS of the exact answer).
Also the verdict of the flat rule (the workload's atol/rtol against the bf16 reference), the rule
used before. The honest rows must pass and the wrong rows fail; the gap between the largest
honest ratio and the smallest wrong one is the margin k was chosen in.

Usage: python -m jb.tools.tolerance_study [--scale tiny,cpu] [--workloads 8p,12p] [--trials N]
       [--published DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jb import jaxpr_eval, tolerance
from jb.compare import compare, judge, to_host_leaves
from jb.ops.verify import _plan, derive_seed, make_inputs
from jb.workload import load_module, load_workload

ROOT = pathlib.Path(__file__).resolve().parents[3]
HONEST = ("f32acc", "bf16mat", "bf16e2e", "published")
# Published programs that compute another function than jb's workload (their failures are expected,
# kept out of the honest maxima, and listed with the reason).
DIFFERENT_FUNCTION = {
    "26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply": "published normalises over singleton dimensions (documented divergence)",
    "7p_Ragged_Paged_Attention": "published hard-codes its batch scenario (ACTIVE_Q_LENS/KV_LENS), not scaled with CONFIG",
    "40k_Gemm_GroupNorm_Min_BiasAdd": "published hard-codes num_groups=512, not scaled with CONFIG",
}

# A wrong variant whose float32 output is within this relative RMS of the exact answer computes the
# same function (bf16 rounding alone is ~2e-3): it is not a wrong program.
EQUIVALENT = 1e-4
# A wrong variant whose exact effect is under this multiple of the honest bf16 program's own
# deviation (the noise) is indistinguishable from honest rounding in aggregate: no rule that accepts
# honest bf16 programs can be required to reject it (reported as "~noise", caught or not).
BELOW_NOISE = 2.0
WRONG = ("drop_term", "drop_bias", "drop_affine")


# ----------------------------------------------------------------------------------------------
# Variants as jaxpr hooks


def _contraction(e: jaxpr_eval.Eqn) -> int:
    if e.name == "dot_general":
        (lc, _), _ = e.eqn.params["dimension_numbers"]
        shape = e.eqn.invars[0].aval.shape
        return int(np.prod([shape[d] for d in lc])) if lc else 1
    if e.name == "conv_general_dilated":
        rhs = e.eqn.invars[1].aval.shape
        dn = e.eqn.params["dimension_numbers"]
        return int(np.prod(rhs)) // max(1, rhs[dn.rhs_spec[0]])
    return 0


def _zero_last(x, axis: int):
    keep = jax.lax.broadcasted_iota(jnp.int32, x.shape, axis) < x.shape[axis] - 1
    return jnp.where(keep, x, jnp.zeros((), x.dtype))


def _find_longest(fn, inputs, static) -> tuple[str, int] | None:
    """(primitive, index) of the longest contraction (dot/conv), else of the first reduce_sum."""
    found: list[tuple[int, str, int]] = []

    def record(e, ins):
        k = _contraction(e)
        if k:
            found.append((k, e.name, e.index))
        elif e.name == "reduce_sum" and not any(f[1] != "reduce_sum" for f in found):
            found.append((0, e.name, e.index))
        return None

    dyn = [x for i, x in enumerate(inputs) if i not in set(static)]
    jax.make_jaxpr(jaxpr_eval.rewritten(fn, inputs, record, static))(*dyn)
    if not found:
        return None
    best = max(found, key=lambda f: (f[0], -f[2]))
    return best[1], best[2]


def drop_term_hook(target: tuple[str, int]):
    def hook(e, ins):
        if (e.name, e.index) != target:
            return None
        vals = [a.val for a in ins]
        if e.name == "dot_general":
            (lc, _), _ = e.eqn.params["dimension_numbers"]
            vals[0] = _zero_last(vals[0], lc[-1])
        elif e.name == "conv_general_dilated":
            vals[0] = _zero_last(vals[0], e.eqn.params["dimension_numbers"].lhs_spec[1])
        else:  # reduce_sum
            vals[0] = _zero_last(vals[0], e.eqn.params["axes"][-1])
        outs = jaxpr_eval._bind(e.eqn, vals)
        return [jaxpr_eval.Value(v, None, None) for v in outs]

    return hook


def drop_param_hook(prims: dict[str, tuple[int, ...]]):
    """Drop the first operand that is an input parameter smaller than the result (a bias for
    add/sub, an affine scale for mul/div); ``prims`` maps a primitive to the operand positions
    that may be dropped."""
    done = [False]

    def hook(e, ins):
        if done[0] or e.name not in prims:
            return None
        out = e.eqn.outvars[0].aval
        n_out = int(np.prod(out.shape)) if out.shape else 1
        for j in prims[e.name]:
            a = ins[j]
            if a.param is None or not jaxpr_eval._floating(a.val) or e.n_inputs_elems[a.param] >= n_out:
                continue
            other = ins[1 - j].val
            done[0] = True
            val = jnp.broadcast_to(jnp.asarray(other), out.shape).astype(out.dtype)
            return [jaxpr_eval.Value(val, ins[1 - j].low, None)]
        return None

    return hook


def bf16_results_hook(e, ins):
    """Round only the results of dots, convolutions and reductions to bf16."""
    vals = jaxpr_eval._bind(e.eqn, [a.val for a in ins])
    if e.name in ("dot_general", "conv_general_dilated", "reduce_sum"):
        vals = [jaxpr_eval.round_to_bf16(v) if jaxpr_eval._floating(v) and v.dtype == jnp.float32 else v
                for v in vals]
    return [jaxpr_eval.Value(v, None, None) for v in vals]


# ----------------------------------------------------------------------------------------------


def _compiled(fn, inputs, static):
    dyn = [x for i, x in enumerate(inputs) if i not in set(static)]
    return jax.jit(fn).trace(*dyn).lower().compile()


def _dyn(inputs, static):
    return [x for i, x in enumerate(inputs) if i not in set(static)]


def _published(folder: pathlib.Path | None, wl):
    if folder is None:
        return None, "no --published"
    path = folder / wl.name / "baseline.py"
    if not path.is_file():
        return None, "no published program"
    mod = load_module(path, "jb_published")
    for key, value in wl.config.items():
        if key in mod.CONFIG:
            mod.CONFIG[key] = value
    return mod.workload, None


def _rel_rms(hi, out) -> float:
    worst = 0.0
    for h, c in zip(to_host_leaves(hi), to_host_leaves(out)):
        h32, c32 = h.astype(np.float32).ravel(), c.astype(np.float32).ravel()
        ok = np.isfinite(h32) & np.isfinite(c32)
        if not ok.any():
            continue
        rh = math.sqrt(float(np.mean(np.square(h32[ok].astype(np.float64)))))
        re = math.sqrt(float(np.mean(np.square((c32[ok] - h32[ok]).astype(np.float64)))))
        worst = max(worst, re / rh if rh > 0 else (0.0 if re == 0 else math.inf))
    return worst


def study(name: str, scale: str, n_trials: int | None, published: pathlib.Path | None) -> dict:
    folder = ROOT / "workloads" / name
    wl = load_workload(folder, scale)
    rule = tolerance.rule_of(wl)
    raw_rule = tolerance.Rule(k_elem=1.0, k_rms=1.0, floor=rule.floor, max_rel_rms=math.inf, atol=rule.atol,
                              rtol=rule.rtol)
    static = wl.static_argnums
    base = wl.create_inputs()
    t0 = time.perf_counter()
    ref_fn = _compiled(wl.fn, base, static) if not static else jax.jit(wl.fn, static_argnums=static)
    noise = tolerance.NoiseModel(wl, base)
    names = _plan(wl)
    if n_trials:
        names = names[:n_trials]
    trials = [(derive_seed(12345, i), n) for i, n in enumerate(names)]

    programs: dict[str, object] = {}
    exact: dict[str, object] = {}  # the wrong variants in float32 ('highest'): their true effect
    notes: list[str] = list(noise.notes)
    base32 = tolerance.to_float32(base)
    programs["bf16mat"] = _compiled(jaxpr_eval.rewritten(wl.fn, base, bf16_results_hook, static), base, static)
    target = _find_longest(wl.fn, base, static)
    hooks = {
        "drop_term": (lambda: drop_term_hook(target)) if target else None,
        "drop_bias": lambda: drop_param_hook({"add": (1, 0), "sub": (1,)}),
        "drop_affine": lambda: drop_param_hook({"mul": (1, 0), "div": (1,)}),
    }
    for v, make in hooks.items():
        if make is None:
            programs[v] = exact[v] = None
            continue
        programs[v] = _compiled(jaxpr_eval.rewritten(wl.fn, base, make(), static), base, static)
        with jax.default_matmul_precision("highest"):
            exact[v] = _compiled(jaxpr_eval.rewritten(wl.fn, base32, make(), static), base32, static)
    pub_fn, pub_note = _published(published, wl)
    if pub_fn is not None:
        try:
            programs["published"] = jax.jit(pub_fn, static_argnums=static)
        except Exception as exc:  # noqa: BLE001
            pub_note = f"{type(exc).__name__}"
    rows: dict[str, dict] = {v: {"elem": 0.0, "rms": 0.0, "rel_rms": 0.0, "flat_ok": True, "changed": False,
                                  "status": None} for v in HONEST + WRONG}
    sig = {"ref_rel": 0.0, "emu_rel": 0.0}
    for seed, trial in trials:
        inputs = make_inputs(wl, base, seed, trial)
        ref = jax.device_get(ref_fn(*(inputs if static else _dyn(inputs, static))))
        hi, emu = noise.evaluate(inputs)
        if hi is None:
            return {"workload": name, "scale": scale, "error": "; ".join(notes)}
        sig["ref_rel"] = max(sig["ref_rel"], _rel_rms(hi, ref))
        if emu is not None:
            sig["emu_rel"] = max(sig["emu_rel"], _rel_rms(hi, emu))
        outs = {
            "f32acc": jax.tree_util.tree_map(lambda h, r: np.asarray(h).astype(r.dtype), hi, ref),
            "bf16e2e": (jax.tree_util.tree_map(lambda e, r: np.asarray(e).astype(r.dtype), emu, ref)
                        if emu is not None else None),
        }
        dyn = _dyn(inputs, static)
        for v in ("bf16mat",) + WRONG:
            prog = programs.get(v)
            outs[v] = jax.device_get(prog(*dyn)) if prog is not None else None
            if exact.get(v) is not None:
                effect = _rel_rms(hi, jax.device_get(exact[v](*_dyn(tolerance.to_float32(inputs), static))))
                rows[v]["effect"] = max(rows[v].get("effect", 0.0), effect)
        if "published" in programs:
            try:
                outs["published"] = jax.device_get(programs["published"](*inputs))
            except Exception as exc:  # noqa: BLE001
                pub_note = f"{type(exc).__name__}: {str(exc)[:80]}"
                programs.pop("published")
                outs["published"] = None
        for v, out in outs.items():
            row = rows[v]
            if out is None:
                continue
            c = judge(ref, hi, emu, out, raw_rule)
            if c.elem_ratio is None:  # structure/dtype/shape differ
                row["status"] = c.reason
                continue
            # Elements of the smallest output tensor: the aggregate multiple depends on it.
            row["n"] = min(row.get("n", math.inf), min((int(np.size(x)) for x in to_host_leaves(ref)), default=1))
            row["elem"] = max(row["elem"], c.elem_ratio)
            row["rms"] = max(row["rms"], c.rms_ratio)
            row["rel_rms"] = max(row["rel_rms"], _rel_rms(hi, out))
            row["flat_ok"] = row["flat_ok"] and compare(ref, out, rule.atol, rule.rtol).ok
            same = all(np.array_equal(np.asarray(a), np.asarray(b))
                       for a, b in zip(to_host_leaves(ref), to_host_leaves(out)))
            row["changed"] = row["changed"] or not same
            row["seen"] = True
    result = {"workload": name, "scale": scale, "trials": [t for _, t in trials], "rule": rule.as_dict(),
              "noise_rel_rms": sig, "variants": {}, "notes": notes, "seconds": time.perf_counter() - t0}
    for v, row in rows.items():
        if not row.get("seen"):
            why = row["status"] or ("no such operation" if v in WRONG else (pub_note if v == "published" else "n/a"))
            result["variants"][v] = {"applies": False, "why": why}
            continue
        passes = row["elem"] <= rule.k_elem and row["rms"] <= rule.k_rms and row["rel_rms"] <= rule.max_rel_rms
        result["variants"][v] = {"applies": True, "elem": row["elem"], "rms": row["rms"], "rel_rms": row["rel_rms"],
                                 "pass": passes, "flat_pass": row["flat_ok"], "changed": row["changed"],
                                 "effect": row.get("effect")}
        if v in WRONG:
            noise_rel = max(sig["ref_rel"], sig["emu_rel"])
            result["variants"][v]["vs_noise"] = (row.get("effect") or 0.0) / noise_rel if noise_rel > 0 else math.inf
            # Wrong only if it changes the exact answer: dropping a bias before a normalisation
            # that removes it (22k's conv bias before InstanceNorm) changes nothing but rounding.
            result["variants"][v]["changed"] = row["changed"] and (row.get("effect") or 0.0) > EQUIVALENT
    return result


def verdict(x: dict) -> bool:
    """Pass under the current rule constants (recomputed, so earlier --json outputs re-render)."""
    k_rms = max(tolerance.K_RMS, tolerance.K_ELEM / max(x.get("n", math.inf), 1))  # as jb.tolerance.leaf_bound
    return x["elem"] <= tolerance.K_ELEM and x["rms"] <= k_rms and x["rel_rms"] <= tolerance.MAX_REL_RMS


def vs_noise(wl_result: dict, x: dict) -> float:
    """A wrong variant's exact effect over the noise (computed again: older outputs lack it)."""
    n = wl_result["noise_rel_rms"]
    noise = max(n["ref_rel"], n["emu_rel"])
    return (x.get("effect") or 0.0) / noise if noise > 0 else math.inf


def _noop(wl_result: dict, v: str) -> bool:
    """A wrong variant that left the output bitwise equal to the bf16 reference on every trial."""
    r = wl_result["variants"][v]
    return bool(r.get("applies")) and not r["changed"]


def table(results: list[dict]) -> str:
    head = ("| workload | scale | noise ref/emu (rel RMS) | " + " | ".join(HONEST + WRONG) + " |")
    lines = [head, "|" + "---|" * (3 + len(HONEST + WRONG))]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['scale']} | error: {r['error'][:80]} |")
            continue
        cells = []
        for v in HONEST + WRONG:
            x = r["variants"][v]
            if not x["applies"]:
                cells.append("-")
                continue
            ok = verdict(x)
            flag = "ok" if ok else "FAIL"
            flat = "" if x["flat_pass"] == ok else (" (flat: ok)" if x["flat_pass"] else " (flat: FAIL)")
            if v in WRONG and not x["changed"]:
                cells.append("no-op")
                continue
            near = " ~noise" if v in WRONG and vs_noise(r, x) < BELOW_NOISE else ""
            cells.append(f"{x['elem']:.3g}/{x['rms']:.3g} {flag}{near}{flat}")
        n = r["noise_rel_rms"]
        lines.append(f"| {r['workload']} | {r['scale']} | {n['ref_rel']:.2g}/{n['emu_rel']:.2g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(results: list[dict]) -> str:
    honest_e = honest_r = 0.0
    wrong_min = math.inf
    bad_honest, passed_wrong, passed_noise = [], [], []
    for r in results:
        if "error" in r:
            continue
        for v in HONEST:
            x = r["variants"][v]
            if v == "published" and r["workload"] in DIFFERENT_FUNCTION:
                continue
            if x["applies"]:
                honest_e, honest_r = max(honest_e, x["elem"]), max(honest_r, x["rms"])
                if not verdict(x):
                    bad_honest.append(f"{r['workload']}/{r['scale']}/{v}")
        for v in WRONG:
            x = r["variants"][v]
            if not x["applies"] or _noop(r, v):
                continue
            near = vs_noise(r, x) < BELOW_NOISE
            if not near:
                wrong_min = min(wrong_min, max(x["elem"] / tolerance.K_ELEM, x["rms"] / tolerance.K_RMS,
                                               x["rel_rms"] / tolerance.MAX_REL_RMS))
            if verdict(x):
                (passed_noise if near else passed_wrong).append(f"{r['workload']}/{r['scale']}/{v}")
    different = sorted({f"{r['workload']}: {DIFFERENT_FUNCTION[r['workload']]}" for r in results
                        if r["workload"] in DIFFERENT_FUNCTION and "error" not in r
                        and r["variants"]["published"]["applies"] and not verdict(r["variants"]["published"])})
    return "\n".join([
        "published programs of another function (rejected, as they should be): " + ("; ".join(different) or "none"),
        f"rule: K_ELEM={tolerance.K_ELEM} K_RMS={tolerance.K_RMS} FLOOR={tolerance.FLOOR} MAX_REL_RMS={tolerance.MAX_REL_RMS}",
        f"largest honest ratios: per element {honest_e:.3g}, aggregate {honest_r:.3g}",
        f"smallest excess over the bound of a wrong variant out of the noise (1 = at the bound): {wrong_min:.3g}",
        f"honest variants rejected: {', '.join(bad_honest) or 'none'}",
        f"wrong variants out of the noise accepted: {', '.join(passed_wrong) or 'none'}",
        f"wrong variants within the noise (effect < {BELOW_NOISE}x the honest bf16 deviation) accepted: "
        f"{', '.join(passed_noise) or 'none'}",
    ])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", default="tiny,cpu")
    ap.add_argument("--workloads", default="", help="comma-separated ids or folder names (default: all)")
    ap.add_argument("--trials", type=int, default=None, help="only the first N trial classes")
    ap.add_argument("--published", type=pathlib.Path, default=None)
    ap.add_argument("--json", type=pathlib.Path, default=None)
    ap.add_argument("--from-json", type=pathlib.Path, nargs="*", default=None,
                    help="print the table and summary of earlier --json outputs instead of running")
    args = ap.parse_args(argv)
    if args.from_json:
        results = [r for path in args.from_json for r in json.loads(path.read_text())]
        print(table(results))
        print()
        print(summary(results))
        return 0
    folders = sorted(p.name for p in (ROOT / "workloads").iterdir() if (p / "workload.py").is_file())
    if args.workloads:
        wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
        folders = [f for f in folders if any(f == w or f.split("_")[0] == w for w in wanted)]
    folders.sort(key=lambda f: (f.split("_")[0][-1], int(f.split("_")[0][:-1])))
    results = []
    for scale in args.scale.split(","):
        for f in folders:
            try:
                r = study(f, scale, args.trials, args.published)
            except Exception as exc:  # noqa: BLE001 - report and go on
                r = {"workload": f, "scale": scale, "error": f"{type(exc).__name__}: {exc}"}
            results.append(r)
            print(table([r]).splitlines()[-1], file=sys.stderr, flush=True)
            if args.json:  # after every workload: a long run that is stopped keeps what it measured
                args.json.write_text(json.dumps(results, indent=1, default=float))
    print(table(results))
    print()
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
