"""Quick wall-clock timing of a workload's XLA baseline: ``python -m jb.tools.time_xla 12p --scale cpu``.

A development aid for sizing scales; the profiled numbers come from jb's profile step.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import jax

from jb.workload import load_workload

ROOT = pathlib.Path(__file__).resolve().parents[3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("prefixes", nargs="+", help="workload ids such as 12p or 19k, or 'all'")
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    folders = sorted(p for p in (ROOT / "workloads").iterdir() if p.is_dir())
    wanted = args.prefixes
    for folder in folders:
        if "all" not in wanted and folder.name.split("_")[0] not in wanted:
            continue
        wl = load_workload(folder, args.scale)
        inputs = wl.create_inputs()
        f = wl.jitted()
        t0 = time.perf_counter()
        out = jax.block_until_ready(f(*inputs))
        compile_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(3):
            jax.block_until_ready(f(*inputs))
        samples = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*inputs))
            samples.append((time.perf_counter() - t0) * 1e3)
        shapes = [tuple(x.shape) for x in jax.tree_util.tree_leaves(out)]
        flops = wl.flops()
        print(f"{folder.name:60s} median {statistics.median(samples):9.2f} ms  first call {compile_ms:8.1f} ms  out {shapes}  flops {flops}")


if __name__ == "__main__":
    main()
