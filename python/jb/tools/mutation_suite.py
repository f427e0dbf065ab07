"""The checker's strength, per workload: jb's mutants caught, honest variants accepted, a lint.

    python -m jb.tools.mutation_suite                      # all workloads, tiny scale, verify's trials
    python -m jb.tools.mutation_suite 8p 12p --trials 6 --json out.json

For every workload, on verify's trials (seed 12345: reproducible), the reference's output, its
float32 evaluation ``hi`` and its bf16 end-to-end evaluation are made as verify makes them, and:

* every mutant of jb.mutants is run on the trial's inputs and judged with THE correctness rule
  (jb.compare.judge, jb.tolerance.rule_of: what verify, the timed-output check and the recheck
  use). Its exact effect (the mutant in float32, matmul precision highest, against ``hi``, as a
  relative RMS) says whether it must be caught: ``required`` when the effect exceeds BELOW_NOISE
  times the honest bf16 deviation (the larger relative RMS deviation of the reference and of the
  bf16 end-to-end evaluation from ``hi``) on some trial; ``~noise`` when it changes the answer by
  less; ``no-op`` when it does not change it (effect under EQUIVALENT). ``caught``: the rule
  rejects it on at least one trial. A required mutant not caught is a ``miss``.
* honest variants: ``f32acc`` (``hi`` rounded to the output dtype), ``bf16e2e`` (the bf16
  end-to-end evaluation), ``bf16mat`` (dot/conv/reduction results rounded to bf16): accepted
  when the rule passes them on every trial.
* lint (a degenerate workload): an all-zero output must fail; an output equal to one of the
  inputs must fail; every float input must change the exact answer (a const_input mutant that
  is a no-op means the output ignores that input, or only its mean matters); no float input may be constant on every trial
  (zero weights).

Prints one Markdown table (workload, mutants caught / required / generated, misses, honest
accepted / tried, the smallest margins: the weakest caught mutant's worst err/bound and the
strongest honest variant's, lint findings) and the totals. A measuring tool: exit 0 when there is
no miss, no honest rejection and no lint finding.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time

import jax
import numpy as np

from jb import jaxpr_eval, mutants, tolerance
from jb.compare import judge, to_host_leaves
from jb.ops.verify import _plan, derive_seed, make_inputs
from jb.workload import load_workload

ROOT = pathlib.Path(__file__).resolve().parents[3]
SEED = 12345
BELOW_NOISE = 2.0
EQUIVALENT = 1e-4


def _rel_rms(hi, out) -> float:
    worst = 0.0
    for h, c in zip(to_host_leaves(hi), to_host_leaves(out)):
        h64, c64 = h.astype(np.float64).ravel(), c.astype(np.float64).ravel()
        ok = np.isfinite(h64) & np.isfinite(c64)
        if not ok.any():
            continue
        rh = math.sqrt(float(np.mean(np.square(h64[ok]))))
        re = math.sqrt(float(np.mean(np.square(c64[ok] - h64[ok]))))
        bad = float(np.mean(~ok & np.isfinite(h64)))  # non-finite where the answer is finite
        worst = max(worst, (re / rh if rh > 0 else (0.0 if re == 0 else math.inf)) + bad)
    return worst


def _ratio(c) -> float:
    vals = [v for v in (c.elem_ratio, c.rms_ratio) if v is not None]
    return max(vals) if vals else math.inf


def _to_dtype_of(src, like):
    return jax.tree_util.tree_map(lambda s, r: np.asarray(s).astype(np.asarray(r).dtype), src, like)


def study(name: str, scale: str = "tiny", n_trials: int | None = 3) -> dict:
    wl = load_workload(ROOT / "workloads" / name, scale)
    rule = tolerance.rule_of(wl)
    static = wl.static_argnums
    base = wl.create_inputs()
    base32 = tolerance.to_float32(base)
    ref_fn = jax.jit(wl.fn, static_argnums=static)
    noise = tolerance.NoiseModel(wl, base)
    if not noise.ok:
        return {"workload": name, "error": "; ".join(noise.notes)}
    names = _plan(wl)[: n_trials or None]
    trials = [(derive_seed(SEED, i), n) for i, n in enumerate(names)]
    from jb.tools import tolerance_study as ts

    honest_progs = {"bf16mat": jaxpr_eval.rewritten(wl.fn, base, ts.bf16_results_hook, static)}
    honest_progs = {k: jax.jit(v) for k, v in honest_progs.items()}
    muts = mutants.generate(wl, base)
    progs, exact = {}, {}
    for m in muts:
        progs[m.name] = mutants.program(wl, base, m)
        exact[m.name] = mutants.program(wl, base32, m)
    rows = {m.name: {"kind": m.kind, "effect": 0.0, "caught": False, "worst": 0.0, "error": None} for m in muts}
    honest = {k: {"ok": True, "worst": 0.0} for k in ("f32acc", "bf16e2e", "bf16mat")}
    lint = {"zeros_pass": False, "identity_pass": [], "constant_inputs": None}
    noise_rel = 0.0
    const_float: set[int] | None = None
    for seed, trial in trials:
        inputs = make_inputs(wl, base, seed, trial)
        ref = jax.device_get(ref_fn(*inputs))
        hi, emu = noise.evaluate(inputs)
        noise_rel = max(noise_rel, _rel_rms(hi, ref), _rel_rms(hi, emu) if emu is not None else 0.0)
        dyn = [x for i, x in enumerate(inputs) if i not in set(static)]
        outs = {"f32acc": _to_dtype_of(hi, ref), "bf16mat": jax.device_get(honest_progs["bf16mat"](*dyn))}
        if emu is not None:
            outs["bf16e2e"] = _to_dtype_of(emu, ref)
        for k, out in outs.items():
            c = judge(ref, hi, emu, out, rule)
            honest[k]["ok"] &= bool(c.ok)
            honest[k]["worst"] = max(honest[k]["worst"], _ratio(c))
        # lint
        zeros = jax.tree_util.tree_map(lambda r: np.zeros_like(np.asarray(r)), ref)
        if judge(ref, hi, emu, zeros, rule).ok:
            lint["zeros_pass"] = True
        leaves = to_host_leaves(ref)
        if len(leaves) == 1:
            for i, x in enumerate(inputs):
                if i in set(static) or np.shape(x) != leaves[0].shape:
                    continue
                cand = jax.tree_util.tree_map(lambda r, v=x: np.asarray(v).astype(np.asarray(r).dtype), ref)
                if judge(ref, hi, emu, cand, rule).ok and i not in lint["identity_pass"]:
                    lint["identity_pass"].append(i)
        consts = {i for i, x in enumerate(inputs) if i not in set(static) and mutants._floating(x)
                  and np.size(x) > 1 and np.ptp(np.asarray(x, np.float32)) == 0}
        const_float = consts if const_float is None else const_float & consts
        in32 = tolerance.to_float32(inputs)
        for m in muts:
            row = rows[m.name]
            try:
                out = jax.device_get(progs[m.name](inputs))
                with jax.default_matmul_precision("highest"):
                    ex = jax.device_get(exact[m.name](in32))
            except Exception as exc:  # noqa: BLE001 - a mutant that does not run is not counted
                row["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
                continue
            row["effect"] = max(row["effect"], _rel_rms(hi, ex) / max(noise_rel, 1e-30))
            row["abs_effect"] = max(row.get("abs_effect", 0.0), _rel_rms(hi, ex))
            c = judge(ref, hi, emu, out, rule)
            row["worst"] = max(row["worst"], _ratio(c))
            row["caught"] |= not c.ok
    lint["constant_inputs"] = sorted(const_float or ())
    gen = [r for r in rows.values() if r["error"] is None]
    for r in gen:
        r["class"] = ("no-op" if r["abs_effect"] <= EQUIVALENT else
                      "required" if r["effect"] > BELOW_NOISE else "~noise")
    required = [n for n, r in rows.items() if r["error"] is None and r["class"] == "required"]
    caught = [n for n in required if rows[n]["caught"]]
    ignored = [n for n, r in rows.items() if r["kind"] == "const_input" and r["error"] is None and r["class"] == "no-op"]
    findings = []
    if lint["zeros_pass"]:
        findings.append("an all-zero output passes")
    findings += [f"output = input {i} passes" for i in lint["identity_pass"]]
    findings += [f"input {n[len('const_input['):-1]} replaced by its mean changes nothing" for n in ignored]
    findings += [f"input {i} constant on every trial" for i in lint["constant_inputs"]]
    return {
        "workload": name, "scale": scale, "trials": [t for _, t in trials], "noise_rel_rms": noise_rel,
        "generated": len(rows), "ran": len(gen), "required": required, "caught": caught,
        "misses": [n for n in required if not rows[n]["caught"]],
        "weakest_caught": min((rows[n]["worst"] for n in caught), default=None),
        "honest": honest, "honest_worst": max(h["worst"] for h in honest.values()),
        "lint": findings, "mutants": rows,
    }


def _fmt(x, spec=".3g"):
    return "" if x is None else format(x, spec)


def render(results: list[dict]) -> str:
    lines = ["| workload | caught / required (generated) | misses | honest accepted / tried | weakest caught "
             "(err/bound) | strongest honest | lint |", "|---|---|---|---|---|---|---|"]
    tot = {"req": 0, "caught": 0, "gen": 0, "hon": 0, "hon_ok": 0, "lint": 0}
    for r in results:
        if "error" in r:
            lines.append(f"| {r['workload']} | error: {r['error'][:80]} | | | | | |")
            continue
        hon_ok = sum(h["ok"] for h in r["honest"].values())
        tot["req"] += len(r["required"])
        tot["caught"] += len(r["caught"])
        tot["gen"] += r["generated"]
        tot["hon"] += len(r["honest"])
        tot["hon_ok"] += hon_ok
        tot["lint"] += bool(r["lint"])
        rejected = [k for k, h in r["honest"].items() if not h["ok"]]
        misses = ", ".join(r["misses"]) + (("; honest rejected: " + ", ".join(rejected)) if rejected else "")
        lines.append(f"| {r['workload']} | {len(r['caught'])} / {len(r['required'])} ({r['generated']}) | {misses} | "
                     f"{hon_ok} / {len(r['honest'])} | {_fmt(r['weakest_caught'])} | {_fmt(r['honest_worst'])} | "
                     f"{'; '.join(r['lint'])} |")
    lines.append("")
    lines.append(f"total: mutants caught {tot['caught']} / {tot['req']} required ({tot['gen']} generated); "
                 f"honest accepted {tot['hon_ok']} / {tot['hon']}; workloads with lint findings {tot['lint']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from jb.tools.published_check import select, workload_names

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="*")
    ap.add_argument("--scale", default="tiny", choices=("tiny", "cpu", "paper"))
    ap.add_argument("--trials", type=int, default=0, help="trials per workload (default 0: all of verify's)")
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_intermixed_args(argv)
    results = []
    for name in select(workload_names(ROOT), a.workloads):
        t0 = time.perf_counter()
        try:
            r = study(name, a.scale, a.trials or None)
        except Exception as exc:  # noqa: BLE001 - one workload's failure is a row, not the end
            r = {"workload": name, "error": f"{type(exc).__name__}: {exc}"}
        r["seconds"] = round(time.perf_counter() - t0, 1)
        results.append(r)
        print(f"{name}: {len(r.get('caught', []))}/{len(r.get('required', []))} ({r['seconds']} s)",
              file=sys.stderr, flush=True)
        if a.json:
            a.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    print(render(results))
    bad = any("error" in r or r["misses"] or r["lint"] or not all(h["ok"] for h in r["honest"].values())
              for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
