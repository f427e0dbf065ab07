"""``verify``: compare an implementation with the reference on fresh inputs, with the anti-gaming checks.

Order matters: the reference runs first, on its own copies of every trial's inputs, and its
outputs are fetched to the host before the implementation is even imported. The harness then
snapshots its own functions (jb.guard), imports the implementation, builds it ahead of time and
runs it on fresh copies of the same trial inputs:

* structure, shape, dtype, finite-where-the-reference-is-finite and values under the workload's
  tolerance, symmetric (jb.compare);
* every output leaf a concrete, ready jax.Array;
* the same inputs twice give the same output (bit-exact on CPU, within tolerance elsewhere);
* inputs checksummed before and after (mutation, deletion/donation);
* harness functions identity-checked after import and after the runs, no threads or child
  processes left running (jb.guard);
* a ``pallas_call`` in the traced program (unless ``allow_pure_jax`` or the impl is not a
  candidate), no host callbacks (pure_callback/io_callback), no closed-over constant as big as an
  input (smaller large constants are recorded in ``notes``).

Held-out shapes: ``args.variants`` (a list of CONFIG overrides, e.g. ``[{"seq_len": 48}]``) adds one
trial per variant (the first trial's seed and distribution) on a workload re-loaded with that
override, so a kernel that hard-codes the scale's shapes fails; its reference is also computed
before the implementation is imported. Variant trials carry a ``variant`` field.

Status precedence: rejected > compile_error > runtime_error > incorrect > correct
(unsupported/invalid for baselines that cannot run).
"""

from __future__ import annotations

import jax
import numpy as np

from jb import guard, trust
from jb.compare import compare, to_host_leaves
from jb.inputs import DISTRIBUTIONS, resample
from jb.ops import common
from jb.workload import load_workload

DEFAULT_TRIALS = (
    {"seed": 1, "dist": "normal"},
    {"seed": 2, "dist": "uniform"},
    {"seed": 3, "dist": "signed"},
    {"seed": 4, "dist": "small"},
    {"seed": 5, "dist": "large"},
    {"seed": 6, "dist": "sparse"},
)


def _trials(args: dict) -> list[dict]:
    trials = args.get("trials") or list(DEFAULT_TRIALS)
    out = []
    for t in trials:
        seed, dist = int(t.get("seed", 0)), t.get("dist", "normal")
        if dist not in DISTRIBUTIONS:
            raise ValueError(f"unknown distribution {dist!r}; expected one of {DISTRIBUTIONS}")
        out.append({"seed": seed, "dist": dist})
    return out


def _leaf_problems(out) -> list[str]:
    from jax._src import core

    problems = []
    for i, leaf in enumerate(jax.tree_util.tree_leaves(out)):
        if isinstance(leaf, core.Tracer) or not isinstance(leaf, jax.Array):
            problems.append(f"output {i} is a {type(leaf).__name__}, not a concrete jax.Array")
        elif leaf.is_deleted():
            problems.append(f"output {i} was deleted")
        elif not leaf.is_ready():
            problems.append(f"output {i} is not ready after block_until_ready")
    return problems


def _same(a, b, exact: bool, tol: dict) -> tuple[bool, float]:
    la, lb = to_host_leaves(a), to_host_leaves(b)
    if len(la) != len(lb):
        return False, float("inf")
    worst = 0.0
    for x, y in zip(la, lb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, float("inf")
        x32, y32 = x.astype(np.float32), y.astype(np.float32)
        if x32.size:
            with np.errstate(invalid="ignore"):
                d = np.abs(x32 - y32)
            both_nan = np.isnan(x32) & np.isnan(y32)
            d = np.where(both_nan, 0.0, d)
            worst = max(worst, float(np.nanmax(np.where(np.isnan(d), np.inf, d))))
    if exact:
        return worst == 0.0, worst
    return compare(a, b, **tol).ok, worst


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    tol = wl.tolerance
    trials = _trials(args)
    base = wl.create_inputs()
    result = {
        "status": None, "reasons": [], "notes": [], "trials": [], "max_abs_err": None, "max_rel_err": None,
        "tolerance": tol, "has_pallas_call": None, "interpret": False, "interpret_mode": None,
        "error_class": None, "error": None, "scale": req.scale, "backend": req.backend,
    }

    # 1. The reference, first, each trial on its own copy; host copies kept.
    ref_built = common.build_reference(wl, base, req)  # a failing reference is a workload bug: ok:false
    references = []
    for t in trials:
        ref_inputs = resample(base, t["seed"], t["dist"])
        references.append(jax.device_get(common.run_reference(ref_built, ref_inputs)))
        del ref_inputs

    variants = []
    for override in args.get("variants") or []:
        if not isinstance(override, dict) or not override:
            raise ValueError(f"a variant must be a non-empty object of CONFIG overrides, got {override!r}")
        vwl = load_workload(req.args["workload"], req.scale)
        unknown = set(override) - set(vwl.config)
        if unknown:
            raise ValueError(f"variant {override!r}: unknown CONFIG keys {sorted(unknown)}")
        vwl.module.CONFIG.update(override)
        vbase = vwl.create_inputs()
        t = trials[0]
        vref_built = common.build_reference(vwl, vbase, req)
        vref = jax.device_get(common.run_reference(vref_built, resample(vbase, t["seed"], t["dist"])))
        variants.append({"override": override, "wl": vwl, "base": vbase, "trial": t, "ref": vref})
        del vref_built

    # 2. Snapshot the harness, then import the implementation.
    snapshot = guard.baseline()
    impl = req.impl(wl)
    result["impl"] = {"kind": impl.kind, "name": impl.name, "config": impl.config}
    trust.annotate(impl, result)
    rejects: list[str] = list(guard.tampering(snapshot))

    def finish(status: str, **extra) -> dict:
        rejects.extend(r for r in guard.check(snapshot) if r not in rejects)
        if rejects:
            status = "rejected"
            result["tainted"] = True
            guard.restore(snapshot)
        result.update(extra)
        result["status"] = status
        result["reasons"] = rejects + [r for r in result["reasons"] if r not in rejects]
        finite = [t for t in result["trials"] if t.get("max_abs_err") is not None]
        if finite:
            result["max_abs_err"] = max(t["max_abs_err"] for t in finite)
            result["max_rel_err"] = max(t["max_rel_err"] for t in finite)
        return result

    if not impl.ok:
        return finish(impl.status, error_class=impl.error_class, error=impl.error)

    try:
        built = common.build(impl.fn, wl, resample(base, trials[0]["seed"], trials[0]["dist"]), req)
    except common.CandidateFailure as failure:
        return finish(failure.status, **failure.fields())
    rejects.extend(r for r in guard.tampering(snapshot) if r not in rejects)

    report = trust.adjust_report(impl, common.jaxpr_report(built.jaxpr))
    result["has_pallas_call"] = report["has_pallas_call"]
    result["interpret"] = bool(req.interpret and report["has_pallas_call"])
    result["interpret_mode"] = trust.interpret_mode(impl, built.interpret_mode) if report["has_pallas_call"] else None
    result["matmul_flops"] = report["matmul_flops"]
    if impl.kind in ("candidate", "exported"):
        if not report["has_pallas_call"] and not args.get("allow_pure_jax"):
            rejects.append("no pallas_call in the traced program (pure JAX/XLA fallback)")
        if report["host_callbacks"]:
            rejects.append(f"host callbacks in the traced program: {', '.join(report['host_callbacks'])}")
        if report["debug_callbacks"]:
            result["notes"].append("jax.debug callbacks (print/callback) in the traced program")
        share = report["matmul_flops"]["share_outside"]
        if report["has_pallas_call"] and share is not None and share > 0.5:
            result["notes"].append(f"{share:.0%} of the matmul FLOPs are outside pallas_call")
    notes, const_rejects = common.constant_reasons(report, base, built.jaxpr.out_avals)
    result["notes"].extend(notes)
    rejects.extend(const_rejects)

    exact = req.backend == "cpu"
    failure: common.CandidateFailure | None = None
    for t, ref in zip(trials, references):
        record = {"seed": t["seed"], "dist": t["dist"], "ok": False, "max_abs_err": None, "max_rel_err": None, "reason": None}
        result["trials"].append(record)
        inputs = resample(base, t["seed"], t["dist"])
        before = guard.checksum(inputs)
        try:
            out = common.run(built, inputs)
        except common.CandidateFailure as exc:
            failure = exc
            record["reason"] = exc.message
            break
        problems = _leaf_problems(out)
        mutated = guard.mutation_reasons(before, guard.checksum(inputs))
        if problems or mutated:
            rejects.extend(r for r in problems + mutated if r not in rejects)
            record["reason"] = "; ".join(problems + mutated)
            break
        cmp = compare(ref, out, **tol)
        record["max_abs_err"] = cmp.max_abs_err if np.isfinite(cmp.max_abs_err) else None
        record["max_rel_err"] = cmp.max_rel_err if np.isfinite(cmp.max_rel_err) else None
        record["ok"] = cmp.ok
        record["reason"] = cmp.reason
        try:
            again = common.run(built, inputs)
        except common.CandidateFailure as exc:
            failure = exc
            record["ok"] = False
            record["reason"] = "second run failed: " + exc.message
            break
        same, diff = _same(out, again, exact, tol)
        record["deterministic"] = same
        if not same:
            record["ok"] = False
            msg = f"two runs on the same inputs differ (max abs diff {diff:.4g})"
            record["reason"] = msg if record["reason"] is None else record["reason"] + "; " + msg
        del out, again, inputs

    if failure is None and not any(r for r in rejects if "mutated" in r or "deleted" in r):
        for v in variants:
            t = v["trial"]
            record = {"seed": t["seed"], "dist": t["dist"], "variant": v["override"], "ok": False,
                      "max_abs_err": None, "max_rel_err": None, "reason": None}
            result["trials"].append(record)
            try:
                vbuilt = common.build(impl.fn, v["wl"], v["base"], req)
            except common.CandidateFailure as exc:
                record["reason"] = f"variant does not compile ({exc.error_class}): {exc.message}"
                continue
            try:
                out = common.run(vbuilt, resample(v["base"], t["seed"], t["dist"]))
            except common.CandidateFailure as exc:
                record["reason"] = f"variant fails at run time: {exc.message}"
                continue
            cmp = compare(v["ref"], out, **tol)
            record.update(ok=cmp.ok, reason=cmp.reason,
                          max_abs_err=cmp.max_abs_err if np.isfinite(cmp.max_abs_err) else None,
                          max_rel_err=cmp.max_rel_err if np.isfinite(cmp.max_rel_err) else None)

    if failure is not None:
        return finish(failure.status, error_class=failure.error_class, error=failure.message)
    failed = [t for t in result["trials"] if not t["ok"]]
    for t in failed:
        if t["reason"]:
            where = f" variant={t['variant']}" if "variant" in t else ""
            result["reasons"].append(f"trial seed={t['seed']} dist={t['dist']}{where}: {t['reason']}")
    return finish("incorrect" if failed else "correct")
