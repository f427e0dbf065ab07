"""Op ``recheck``: judge a sandboxed verify step's outputs in a process that never imports the
candidate.

A candidate that cannot be exported is verified in the sandbox, in its own process, where it could
forge the verdict (patch the comparison, overwrite the reference copies, answer for the op). That
step also wrote each trial's output to files (``jb.outputs``); this op, run by a pooled trusted
worker, rebuilds the same trials from the same seed (jb drew it, not the candidate), recomputes the
reference and its noise, and judges the files. Args: workload, scale, backend, seed, trials?,
variants?, impl (its kind decides the default variants, as in verify), outputs_dir (the folder
holding ``outputs/``). Result: status (``correct``, ``incorrect``, or ``rejected`` when an
output the verdict implies is missing or malformed; a shape variant with no output file is one the
candidate is specialized away from, recorded ``specialized`` and not judged, as verify does), reasons, trials [{seed, dist, variant?, ok,
max_abs_err, max_rel_err, reason}].
"""

from __future__ import annotations

import pathlib

import jax

from jb import outputs
from jb.compare import judge
from jb.ops import common
from jb.ops.verify import _record_cmp, _reference, _trials, _variant_overrides, make_inputs, variant_reference
from jb.tolerance import NoiseModel, rule_of


def _as_reference_tree(reference, leaves):
    ref_def = jax.tree_util.tree_structure(reference)
    if ref_def.num_leaves != len(leaves):
        raise ValueError(f"{len(leaves)} output leaves, the reference has {ref_def.num_leaves}")
    return jax.tree_util.tree_unflatten(ref_def, leaves)


def run(args: dict) -> dict:
    req = common.Request.from_args(args)
    wl = req.workload()
    rule = rule_of(wl)
    if args.get("seed") is None:
        raise ValueError("recheck needs the seed the sandboxed verify step was given")
    master = int(args["seed"])
    where = pathlib.Path(args["outputs_dir"])
    trials = _trials(args, wl, master)
    base = wl.create_inputs()
    ref_built = common.build_reference(wl, base, req)
    noise = NoiseModel(wl, base)
    result = {"status": None, "reasons": [], "trials": [], "seed": master}
    missing: list[str] = []

    def check(record: dict, ref: dict, name: str) -> None:
        try:
            out = _as_reference_tree(ref["ref"], outputs.load(where, name))
        except ValueError as exc:
            record["reason"] = str(exc)
            missing.append(f"{name}: {exc}")
            return
        _record_cmp(record, judge(ref["ref"], ref["hi"], ref["emu"], out, rule))

    for i, t in enumerate(trials):
        record = {"seed": t["seed"], "dist": t["dist"], "ok": False, "max_abs_err": None, "max_rel_err": None, "reason": None}
        result["trials"].append(record)
        ref = _reference(ref_built, noise, make_inputs(wl, base, t["seed"], t["dist"]))
        check(record, ref, outputs.name_of(i))
    for vi, override in enumerate(_variant_overrides(args, wl)):
        v = variant_reference(req, override, vi, master, trials[0]["dist"])
        t = v["trial"]
        record = {"seed": t["seed"], "dist": t["dist"], "variant": override, "ok": False,
                  "max_abs_err": None, "max_rel_err": None, "reason": None}
        result["trials"].append(record)
        if not (where / outputs.DIR / f"{outputs.name_of(0, vi)}.npz").exists():
            # The sandboxed step writes no output for a variant its candidate does not serve
            # (specialized: does not compile there); the variant is then not judged, as in verify.
            record.update(ok=True, specialized=True, reason=None,
                          specialized_reason="no output written: specialized per the sandboxed step")
        else:
            check(record, v["ref"], outputs.name_of(0, vi))
            record.setdefault("specialized", False)
        del v

    if missing:
        result["status"] = "rejected"
        result["reasons"] = [f"the sandboxed verify step answered correct but its outputs do not show it: {m}" for m in missing]
        return result
    bad = [t for t in result["trials"] if not t["ok"]]
    for t in bad:
        where_ = f" variant={t['variant']}" if "variant" in t else ""
        result["reasons"].append(f"trial seed={t['seed']} dist={t['dist']}{where_}: {t['reason']}")
    result["status"] = "incorrect" if bad else "correct"
    return result
