#!/usr/bin/env python3
"""Agent-study throughput: an agent batch of 24 distinct correct candidates and 8 wrong ones over
three workloads (12p RMSNorm, 8p GEMM, 41k Gemm+Add+ReLU), evaluated by `jb agent --method
best-of-n --answers-dir`, at one scale. Reports evaluations per hour and the per-stage breakdown
(from the run database: every step's duration, by kind).

    python3 benches/scripts/agent_batch.py --scale tiny [--jb target/release/jb] [--burn]

The candidates are the example kernels of `candidates/` (distinct by a comment and, for the GEMMs,
by block size) and mutants of them that are wrong (a dropped scale, a dropped bias, a transposed
operand...). A warm-up study (one candidate per workload, same cache) first fills the XLA
baselines and starts nothing else that the batch would not; the timed study is the batch alone.
`--burn` runs a busy loop on one core for the duration (the "another job on the cores" case).
Nothing here is a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]

WORKLOADS = {
    "12p_RMSNorm": "candidates/12p_RMSNorm/rmsnorm_pallas.py",
    "8p_GEMM": "candidates/8p_GEMM/gemm_pallas.py",
    "41k_Gemm_Add_ReLU": "candidates/41k_Gemm_Add_ReLU/gemm_add_relu_pallas.py",
}

# Wrong variants: (workload, old text, new text). Each must change the source.
WRONG = [
    ("12p_RMSNorm", "(y * scale_ref[...].astype(jnp.float32))", "(y)"),
    ("12p_RMSNorm", "jnp.mean(x * x, axis=-1, keepdims=True)", "jnp.mean(x, axis=-1, keepdims=True)"),
    ("12p_RMSNorm", "mean_sq + eps", "mean_sq + 1.0"),
    ("8p_GEMM", "acc_ref[...] += jnp.dot(", "acc_ref[...] = jnp.dot("),
    ("8p_GEMM", "o_ref[...] = acc_ref[...].astype(o_ref.dtype)", "o_ref[...] = (acc_ref[...] * 0.5).astype(o_ref.dtype)"),
    ("8p_GEMM", "@pl.when(k == 0)", "@pl.when(k == 1)"),
    ("41k_Gemm_Add_ReLU", "h = acc_ref[...] + b_ref[...].astype(jnp.float32)", "h = acc_ref[...]"),
    ("41k_Gemm_Add_ReLU", "jnp.maximum(h, 0.0)", "jnp.abs(h)"),
]


def answers(dir: pathlib.Path) -> dict[str, int]:
    counts = {}
    for wl, rel in WORKLOADS.items():
        src = (REPO / rel).read_text()
        folder = dir / wl
        folder.mkdir(parents=True)
        n = 0
        for i in range(8):
            (folder / f"c{i:02d}.py").write_text(f"# distinct correct candidate {i}\n" + src)
            n += 1
        for j, (w, old, new) in enumerate(x for x in WRONG if x[0] == wl):
            assert old in src, (wl, old)
            (folder / f"w{j:02d}.py").write_text(f"# wrong candidate {j}\n" + src.replace(old, new, 1))
            n += 1
        counts[wl] = n
    return counts


def warmup_answers(dir: pathlib.Path) -> None:
    for wl, rel in WORKLOADS.items():
        (dir / wl).mkdir(parents=True)
        (dir / wl / "warm.py").write_text("# warm-up\n" + (REPO / rel).read_text())


def stages(db: pathlib.Path, run_ids: list[int]) -> dict[str, dict]:
    con = sqlite3.connect(db)
    marks = ",".join("?" * len(run_ids))
    rows = con.execute(
        f"SELECT a.kind, r.duration_ms, r.cached FROM step_results r JOIN actions a ON a.key = r.key "
        f"WHERE r.run_id IN ({marks})", run_ids).fetchall()
    out: dict[str, dict] = {}
    for kind, ms, cached in rows:
        if cached:
            continue
        out.setdefault(kind, []).append(ms / 1e3)
    return {k: {"n": len(v), "total_s": round(sum(v), 2), "median_s": round(statistics.median(v), 3),
                "max_s": round(max(v), 3)} for k, v in sorted(out.items())}


def run_ids_after(db: pathlib.Path, t0: float) -> list[int]:
    con = sqlite3.connect(db)
    return [r[0] for r in con.execute("SELECT run_id FROM runs WHERE started_at >= ?", (t0,))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="tiny", choices=["tiny", "cpu"])
    ap.add_argument("--jb", default=str(REPO / "target/release/jb"))
    ap.add_argument("--burn", action="store_true", help="a busy loop on one core meanwhile")
    ap.add_argument("--label", default="")
    ap.add_argument("--keep", action="store_true", help="keep the temporary cache")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="jb-agent-bench-"))
    env = dict(os.environ, JB_CACHE_DIR=str(tmp / "cache"))
    env.setdefault("JB_PYENV", str(REPO / "cache/pyenv"))
    base = [args.jb, "--scale", args.scale, "--json", "agent", "--method", "best-of-n",
            "--workload", *WORKLOADS]
    warm = tmp / "warm"
    warmup_answers(warm)
    burner = None
    if args.burn:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        t = time.time()
        w = subprocess.run(base + ["--samples", "1", "--answers-dir", str(warm)], env=env,
                           capture_output=True, text=True, cwd=REPO)
        warm_s = time.time() - t
        if w.returncode not in (0, 1):
            print(w.stderr[-3000:], file=sys.stderr)
            return 3
        batch = tmp / "batch"
        counts = answers(batch)
        per_wl = max(counts.values())
        t0 = time.time()
        r = subprocess.run(base + ["--samples", str(per_wl), "--answers-dir", str(batch)], env=env,
                           capture_output=True, text=True, cwd=REPO)
        wall = time.time() - t0
    finally:
        if burner:
            burner.kill()
    if r.returncode not in (0, 1):
        print(r.stderr[-3000:], file=sys.stderr)
        return 3
    out = json.loads(r.stdout)
    n = sum(counts.values())
    db = tmp / "cache" / "jb.sqlite"
    report = {
        "label": args.label, "scale": args.scale, "burn": args.burn, "candidates": n,
        "warmup_s": round(warm_s, 1), "wall_s": round(wall, 1),
        "s_per_eval": round(wall / n, 2), "evals_per_hour": round(n / wall * 3600),
        "outcomes": out.get("outcomes") or {k: v for k, v in out.items() if k == "summary"},
        "stages": stages(db, run_ids_after(db, t0)),
    }
    print(json.dumps(report, indent=1))
    if not args.keep:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
