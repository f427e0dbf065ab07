"""``verify``: compare an implementation with the reference on fresh inputs, with the anti-gaming checks.

Order matters: the reference runs first, on its own copies of every trial's inputs, and its
outputs are fetched to the host before the implementation is even imported. The harness then
snapshots its own functions (jb.guard), imports the implementation, builds it ahead of time and
runs it on fresh copies of the same trial inputs:

* structure, shape, dtype, finite-where-the-reference-is-finite, and values against the reference
  evaluated in float32 within a multiple of the reference's own rounding noise, measured on the
  same inputs before the implementation is imported (jb.tolerance, jb.compare.judge);
* every output leaf a concrete, ready jax.Array;
* the same inputs twice give the same output (bit-exact on CPU, within tolerance elsewhere);
* inputs checksummed before and after (mutation, deletion/donation);
* harness functions identity-checked after import and after the runs, no threads or child
  processes left running (jb.guard);
* a ``pallas_call`` in the traced program (unless ``allow_pure_jax`` or the impl is not a
  candidate), no host callbacks (pure_callback/io_callback), no closed-over constant as big as an
  input (smaller large constants are recorded in ``notes``).

Secret inputs: the evaluation's seed comes from OS randomness (``secrets``) unless ``args.seed``
replays one; every trial's seed is derived from it. Both are revealed in the result (``seed``,
``seeds``) after the evaluation. Trials: one per class of ``jb.inputs.trial_plan(wl)`` with inputs
from ``jb.inputs.make_trial`` (falling back to DEFAULT_TRIALS and ``resample``), or explicit
``args.trials`` [{seed, dist}].

Held-out shapes, on by default for candidates: the workload's own variants (``Workload.variants()``), or
``args.variants`` (a list of CONFIG overrides, e.g. ``[{"seq_len": 48}]``; ``[]`` turns them off).
Each adds one trial (the first trial's class, its own derived seed) on a workload re-loaded with
that override, so a kernel that hard-codes the scale's shapes and still runs there fails; its
reference and noise are also computed before the implementation is imported. Variant trials carry
a ``variant`` field. A candidate that does not compile at a variant, refuses it at run time or
answers with another output shape is ``specialized`` there (jb.variants: recorded in the trial,
``notes`` and ``variants``, not incorrect); one that answers with the variant's shapes is judged.

Status precedence: rejected > compile_error > runtime_error > incorrect > correct
(unsupported/invalid for baselines that cannot run).
"""

from __future__ import annotations

import secrets

import jax
import numpy as np

from jb import guard, inputs as jb_inputs, outputs as jb_outputs, trust
from jb import variants as jb_variants
from jb.compare import judge, to_host_leaves
from jb.inputs import DISTRIBUTIONS, resample
from jb.ops import common
from jb.tolerance import NoiseModel, rule_of
from jb.workload import load_workload

# The trial classes when jb.inputs has no per-workload plan (trial_plan/make_trial).
DEFAULT_TRIALS = (
    {"seed": 1, "dist": "normal"},
    {"seed": 2, "dist": "uniform"},
    {"seed": 3, "dist": "signed"},
    {"seed": 4, "dist": "small"},
    {"seed": 5, "dist": "large"},
    {"seed": 6, "dist": "sparse"},
)


def draw_seed() -> int:
    """A fresh evaluation seed from OS randomness (never predictable by a candidate)."""
    return secrets.randbits(63)


def derive_seed(master: int, index: int) -> int:
    """Trial ``index``'s seed from the evaluation's seed (replayable from the master alone)."""
    state = np.random.SeedSequence([int(master), int(index)]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def _plan(wl) -> list[str]:
    plan = getattr(jb_inputs, "trial_plan", None)
    if callable(plan):
        return list(plan(wl))
    return [t["dist"] for t in DEFAULT_TRIALS]


def make_inputs(wl, base, seed: int, name: str):
    """Fresh inputs of trial class ``name``: the workload's own plan (jb.inputs.make_trial) when
    there is one, else the generic redraw of jb.inputs.resample."""
    make = getattr(jb_inputs, "make_trial", None)
    if callable(make):
        return tuple(make(wl, base, seed, name))
    return resample(base, seed, name)


def _trials(args: dict, wl, master: int) -> list[dict]:
    """The trials: explicit ``args.trials`` [{seed, dist}], else one per class of the workload's
    plan with seeds derived from the evaluation's seed."""
    names = _plan(wl)
    explicit = args.get("trials")
    if not explicit:
        return [{"seed": derive_seed(master, i), "dist": name} for i, name in enumerate(names)]
    out = []
    for t in explicit:
        seed, dist = int(t.get("seed", 0)), t.get("dist", "normal")
        if dist not in DISTRIBUTIONS and dist not in names:
            raise ValueError(f"unknown trial class {dist!r}; expected one of {sorted(set(DISTRIBUTIONS) | set(names))}")
        out.append({"seed": seed, "dist": dist})
    return out


# Implementations judged as candidates (held-out variants by default); trust's exported programs
# are candidates too. Baselines are configured for one shape (block sizes) and XLA is the reference.
CANDIDATE_KINDS = ("candidate", "exported")


def _variant_overrides(args: dict, wl) -> list:
    """Held-out shape variants: ``args.variants`` when given (``[]`` turns them off), else, for a
    candidate, the workload's own (Workload.variants() / a module-level ``variants(config)``)."""
    if "variants" in args and args["variants"] is not None:
        return list(args["variants"])
    if (args.get("impl") or {}).get("kind", "xla") not in CANDIDATE_KINDS:
        return []
    method = getattr(wl, "variants", None)
    if callable(method):
        return list(method() or [])
    fn = getattr(wl.module, "variants", None)
    if callable(fn):
        return list(fn(dict(wl.config)) or [])
    return []


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


def _same(a, b, exact: bool, again_ok: bool) -> tuple[bool, float]:
    """Whether two runs on the same inputs agree: bit-exact on CPU; elsewhere the second run must
    pass the same judgement as the first (``again_ok``)."""
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
            # Equal values differ by nothing, infinities included (inf - inf is NaN), and so do
            # two NaNs: a deterministic kernel whose output overflows is not "differing by inf".
            same = (x32 == y32) | (np.isnan(x32) & np.isnan(y32))
            d = np.where(same, 0.0, d)
            worst = max(worst, float(np.nanmax(np.where(np.isnan(d), np.inf, d))))
    if exact:
        return worst == 0.0, worst
    return again_ok, worst


def _finite(x: float | None) -> float | None:
    return x if x is not None and np.isfinite(x) else None


def _record_cmp(record: dict, cmp) -> None:
    record.update(
        ok=cmp.ok, reason=cmp.reason, max_abs_err=_finite(cmp.max_abs_err), max_rel_err=_finite(cmp.max_rel_err),
        elem_ratio=_finite(cmp.elem_ratio), rms_ratio=_finite(cmp.rms_ratio), rule=cmp.rule,
    )


def poison_freed(ref) -> None:
    """Fill device memory a kernel's outputs are likely to reuse with NaN (issue 22.4).

    The references were computed on the device and copied to the host; their device buffers are
    free again, and an accelerator's allocator hands freed blocks of a size to the next request
    of that size. A kernel that writes nothing would then return the reference's own output. So
    before each candidate run, blocks of every reference output leaf's shape and dtype are
    allocated, filled with NaN (the largest value for integer leaves) and freed: an output left
    unwritten reads the canary, never an answer."""
    import jax.numpy as jnp

    canaries = []
    for leaf in jax.tree_util.tree_leaves(ref):
        shape, dtype = np.shape(leaf), getattr(leaf, "dtype", np.float32)
        if jnp.issubdtype(dtype, jnp.inexact):
            fill = np.nan
        elif jnp.issubdtype(dtype, jnp.bool_):
            fill = True
        else:
            fill = jnp.iinfo(dtype).max
        canaries.append(jnp.full(shape, fill, dtype))
    for c in canaries:
        c.block_until_ready()
    del canaries


def _reference(built, noise: NoiseModel, inputs) -> dict:
    """The reference's output on ``inputs`` and its float32 / bf16 end-to-end evaluations (host)."""
    ref = jax.device_get(common.run_reference(built, inputs))
    hi, emu = noise.evaluate(inputs)
    return {"ref": ref, "hi": hi, "emu": emu}


def variant_reference(req, override, index: int, master: int, dist: str) -> dict:
    """Held-out variant ``index``: its workload (CONFIG overridden), inputs and reference with its
    noise, from the evaluation's seed alone (jb.ops.recheck rebuilds exactly the same)."""
    if not isinstance(override, dict) or not override:
        raise ValueError(f"a variant must be a non-empty object of CONFIG overrides, got {override!r}")
    vwl = load_workload(req.args["workload"], req.scale)
    unknown = set(override) - set(vwl.config)
    if unknown:
        raise ValueError(f"variant {override!r}: unknown CONFIG keys {sorted(unknown)}")
    vwl.module.CONFIG.update(override)
    vbase = vwl.create_inputs()
    t = {"seed": derive_seed(master, 1000 + index), "dist": dist}
    vinputs = make_inputs(vwl, vbase, t["seed"], t["dist"])
    vref = _reference(common.build_reference(vwl, vbase, req), NoiseModel(vwl, vbase), vinputs)
    return {"override": override, "wl": vwl, "base": vbase, "trial": t, "ref": vref, "inputs": vinputs}


def _specialized(record: dict, why: str, dump_dir, vi: int) -> None:
    jb_variants.specialize(record, why)
    if dump_dir is not None:
        jb_variants.save_marker(dump_dir, jb_outputs.name_of(0, vi), record["reason"])


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    rule = rule_of(wl)
    given = args.get("seed")
    master = int(given) if given is not None else draw_seed()
    trials = _trials(args, wl, master)
    base = wl.create_inputs()
    result = {
        "status": None, "reasons": [], "notes": [], "trials": [], "max_abs_err": None, "max_rel_err": None,
        "tolerance": rule.as_dict(), "has_pallas_call": None, "interpret": False, "interpret_mode": None,
        "error_class": None, "error": None, "scale": req.scale, "backend": req.backend,
        # Revealed with the result, after the evaluation: `jb eval --seed` replays it.
        "seed": master, "seed_source": "given" if given is not None else "os_random",
        "seeds": [t["seed"] for t in trials],
    }

    # 1. The reference, first, each trial on its own copy, with its noise; host copies kept.
    ref_built = common.build_reference(wl, base, req)  # a failing reference is a workload bug: ok:false
    noise = NoiseModel(wl, base)
    result["notes"].extend(noise.notes)
    references = []
    for t in trials:
        references.append(_reference(ref_built, noise, make_inputs(wl, base, t["seed"], t["dist"])))

    variants = []
    for vi, override in enumerate(_variant_overrides(args, wl)):
        v = variant_reference(req, override, vi, master, trials[0]["dist"])
        result["seeds"].append(v["trial"]["seed"])
        variants.append(v)

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

    first = make_inputs(wl, base, trials[0]["seed"], trials[0]["dist"])
    try:
        built = common.build(impl.fn, wl, first, req)
    except common.CandidateFailure as failure:
        return finish(failure.status, **failure.fields())
    del first
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
    # Where the candidate runs in this process (not exportable), jb asks for every output in files
    # too, and has a trusted process judge them again (jb.ops.recheck).
    dump_dir = req.out_dir() if args.get("dump_outputs") else None
    failure: common.CandidateFailure | None = None
    for ti, (t, ref) in enumerate(zip(trials, references)):
        record = {"seed": t["seed"], "dist": t["dist"], "ok": False, "max_abs_err": None, "max_rel_err": None, "reason": None}
        result["trials"].append(record)
        inputs = make_inputs(wl, base, t["seed"], t["dist"])
        before = guard.checksum(inputs)
        poison_freed(ref["ref"])
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
        cmp = judge(ref["ref"], ref["hi"], ref["emu"], out, rule)
        _record_cmp(record, cmp)
        if dump_dir is not None:
            jb_outputs.save(dump_dir, jb_outputs.name_of(ti), to_host_leaves(out))
        poison_freed(ref["ref"])
        try:
            again = common.run(built, inputs)
        except common.CandidateFailure as exc:
            failure = exc
            record["ok"] = False
            record["reason"] = "second run failed: " + exc.message
            break
        again_ok = exact or judge(ref["ref"], ref["hi"], ref["emu"], again, rule).ok
        same, diff = _same(out, again, exact, again_ok)
        record["deterministic"] = same
        if not same:
            record["ok"] = False
            msg = f"two runs on the same inputs differ (max abs diff {diff:.4g})"
            record["reason"] = msg if record["reason"] is None else record["reason"] + "; " + msg
        del out, again, inputs

    if failure is None and not any(r for r in rejects if "mutated" in r or "deleted" in r):
        for vi, v in enumerate(variants):
            t = v["trial"]
            record = {"seed": t["seed"], "dist": t["dist"], "variant": v["override"], "ok": False,
                      "max_abs_err": None, "max_rel_err": None, "reason": None}
            result["trials"].append(record)
            try:
                vbuilt = common.build(impl.fn, v["wl"], v["base"], req)
            except common.CandidateFailure as exc:
                _specialized(record, f"does not compile at this shape ({exc.error_class}): {exc.message}", dump_dir, vi)
                continue
            vbefore = guard.checksum(v["inputs"])
            try:
                out = common.run(vbuilt, v["inputs"])
            except common.CandidateFailure as exc:
                _specialized(record, f"refuses the shape at run time ({exc.error_class}): {exc.message}", dump_dir, vi)
                continue
            problems = _leaf_problems(out) + guard.mutation_reasons(vbefore, guard.checksum(v["inputs"]))
            if problems:
                rejects.extend(r for r in problems if r not in rejects)
                record["reason"] = "; ".join(problems)
                continue
            mismatch = jb_variants.structure_mismatch(v["ref"]["ref"], out)
            if mismatch is not None:
                _specialized(record, f"{mismatch} (built for another shape)", dump_dir, vi)
                continue
            if dump_dir is not None:
                jb_outputs.save(dump_dir, jb_outputs.name_of(0, vi), to_host_leaves(out))
            _record_cmp(record, judge(v["ref"]["ref"], v["ref"]["hi"], v["ref"]["emu"], out, rule))
            del out
    result["variants"] = jb_variants.summary(result["trials"])
    for t in result["trials"]:
        if t.get("specialized"):
            result["notes"].append(f"variant {t['variant']}: {t['reason']}")

    if failure is not None:
        return finish(failure.status, error_class=failure.error_class, error=failure.message)
    failed = [t for t in result["trials"] if not t["ok"]]
    for t in failed:
        if t["reason"]:
            where = f" variant={t['variant']}" if "variant" in t else ""
            result["reasons"].append(f"trial seed={t['seed']} dist={t['dist']}{where}: {t['reason']}")
    return finish("incorrect" if failed else "correct")
