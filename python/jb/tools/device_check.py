"""Check jb's measurement on this machine's device, in one command (``jb doctor --device-check``).

    python -m jb.tools.device_check [--scale paper|cpu|tiny] [--workloads 8p,12p,...] [--budget S] [--json]

1. The XLA baselines of a handful of workloads (default 1p, 8p, 9p, 12p, 41k) at paper scale on an
   accelerator (tiny on CPU unless ``--scale``), through the real ``profile`` op: the profiler trace
   is written and parsed (on a GPU the timing source must be ``trace:device_modules``).
2. Paired speedups (interleaved rounds, bootstrap 95 % interval): the portable Pallas RMSNorm
   (examples/portable/rmsnorm_pallas.py, lowers on GPU) against XLA on 12p, and the workload's own
   function as a "candidate" against XLA on 8p, whose speedup must come out near 1x (a check of the
   pairing itself).

Prints one table (or JSON). Exit code 0 when every row ran (and, on an accelerator, every time came
from the device trace), else 1. Sized to finish in under 8 minutes on one GPU at paper scale.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import jax

from jb.ops import profile

ROOT = pathlib.Path(__file__).resolve().parents[3]
DEFAULT_WORKLOADS = ("1p", "8p", "9p", "12p", "41k")
PORTABLE_RMSNORM = "examples/portable/rmsnorm_pallas.py"


def _folder(prefix: str) -> pathlib.Path:
    for p in sorted((ROOT / "workloads").iterdir()):
        if p.is_dir() and p.name.split("_")[0] == prefix:
            return p
    raise SystemExit(f"no workload {prefix!r} under {ROOT / 'workloads'}")


def _profile(workload: pathlib.Path, scale: str, impl: dict, out_dir: pathlib.Path, **extra) -> dict:
    args = {"workload": str(workload), "scale": scale, "backend": jax.default_backend(),
            "impl": impl, "out_dir": str(out_dir), **extra}
    t0 = time.perf_counter()
    result = profile.run(args)
    result["_wall_s"] = time.perf_counter() - t0
    return result


def _fmt(x, digits=4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _row(workload: str, program: str, r: dict, speedup: dict | None = None) -> dict:
    ok = r.get("status") == "ok"
    paired = r.get("paired") or {}
    programs = {p["role"]: p for p in paired.get("programs", [])}
    return {
        "workload": workload,
        "program": program,
        "status": r.get("status"),
        "timing_source": r.get("timing_source"),
        "median_ms": r.get("median_ms") if ok else None,
        "iqr_rel": (programs.get("impl") or {}).get("iqr_rel"),
        "xla_median_ms": (programs.get("xla") or {}).get("median_ms"),
        "gflop": r["flops"] / 1e9 if ok and r.get("flops") else None,
        "speedup": (speedup or {}).get("point"),
        "ci_low": (speedup or {}).get("ci_low"),
        "ci_high": (speedup or {}).get("ci_high"),
        "rounds": paired.get("rounds"),
        "stop": paired.get("stop"),
        "trace_events": (r.get("timing") or {}).get("trace_events"),
        "seconds": r.get("_wall_s"),
        "reasons": r.get("reasons") or [],
        "error": r.get("error"),
    }


def run(scale: str, workloads: list[str], budget: float, iters: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="jb_device_check_") as tmp:
        tmp = pathlib.Path(tmp)
        for i, prefix in enumerate(workloads):
            folder = _folder(prefix)
            r = _profile(folder, scale, {"kind": "xla"}, tmp / f"xla{i}", iters=iters)
            rows.append(_row(folder.name, "XLA baseline", r))
        if "12p" in workloads or not workloads:
            folder = _folder("12p")
            r = _profile(folder, scale, {"kind": "candidate", "path": str(ROOT / PORTABLE_RMSNORM)},
                         tmp / "pair_rmsnorm", pair=[{"kind": "xla"}], budget_s=budget)
            rows.append(_row(folder.name, "portable Pallas vs XLA (paired)", r, r.get("speedup_vs_xla")))
        folder = _folder("8p" if "8p" in workloads else workloads[0])
        r = _profile(folder, scale, {"kind": "candidate", "path": str(folder / "workload.py")},
                     tmp / "pair_self", pair=[{"kind": "xla"}], budget_s=budget)
        rows.append(_row(folder.name, "XLA vs itself (paired, expect 1x)", r, r.get("speedup_vs_xla")))
    return rows


def problems(rows: list[dict], backend: str) -> list[str]:
    out = []
    for r in rows:
        if r["status"] != "ok":
            out.append(f"{r['workload']} {r['program']}: {r['status']} {r['error'] or ''} {'; '.join(r['reasons'])}".strip())
        elif backend != "cpu" and r["timing_source"] != "trace:device_modules":
            out.append(f"{r['workload']} {r['program']}: timing from {r['timing_source']}, not the device trace")
        if "itself" in r["program"] and r["ci_low"] is not None and not (r["ci_low"] <= 1.0 <= r["ci_high"]) \
                and abs(r["speedup"] - 1.0) > 0.05:
            out.append(f"{r['workload']} {r['program']}: {r['speedup']:.3f}x [{r['ci_low']:.3f}, {r['ci_high']:.3f}], not ~1x")
    return out


def table(rows: list[dict]) -> str:
    cols = [("workload", "workload"), ("program", "program"), ("status", "status"), ("timing_source", "timing"),
            ("median_ms", "ms"), ("iqr_rel", "IQR/med"), ("gflop", "GFLOP"), ("speedup", "speedup"),
            ("ci", "95% CI"), ("rounds", "rounds"), ("stop", "stop"), ("trace_events", "events"), ("seconds", "s")]
    lines = []
    cells = []
    for r in rows:
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r["ci_low"] is not None else "-"
        cells.append([ci if k == "ci" else _fmt(r.get(k)) for k, _ in cols])
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (_, h) in enumerate(cols)]
    lines.append("  ".join(h.ljust(w) for (_, h), w in zip(cols, widths)))
    lines.append("  ".join("-" * w for w in widths))
    for c in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default=None, help="paper on an accelerator, tiny on CPU by default")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--budget", type=float, default=None, help="seconds per paired measurement (20 on an accelerator, 3 on CPU)")
    ap.add_argument("--iters", type=int, default=None, help="timed iterations of each XLA baseline (50; 10 on CPU)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    backend = jax.default_backend()
    cpu = backend == "cpu"
    scale = args.scale or ("tiny" if cpu else "paper")
    budget = args.budget if args.budget is not None else (3.0 if cpu else 20.0)
    iters = args.iters or (10 if cpu else 50)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    t0 = time.perf_counter()
    rows = run(scale, workloads, budget, iters)
    found = problems(rows, backend)
    device = jax.devices()[0].device_kind
    if args.json:
        print(json.dumps({"backend": backend, "device_kind": device, "scale": scale, "rows": rows,
                          "problems": found, "seconds": time.perf_counter() - t0}, indent=2, default=str))
    else:
        print(f"device check: {device} ({backend}), scale {scale}, {time.perf_counter() - t0:.0f} s")
        print(table(rows))
        for p in found:
            print(f"PROBLEM: {p}")
        if cpu:
            print("note: on CPU this is a smoke test (Pallas in interpret mode); run it on a GPU for the device trace")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
