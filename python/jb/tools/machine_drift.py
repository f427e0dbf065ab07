"""How much this machine's speed drifts on its own: a constant workload, timed in windows.

    python -m jb.tools.machine_drift --seconds 60 --window 5

Runs one fixed single-threaded workload (small matrix products and tanh in numpy, ~15 ms) back to
back for ``--seconds`` and prints the median of every ``--window``-second window and their
spread ((max - min) / median). The program never changes, so any spread is the machine: other
tenants, clocks, the hypervisor. A paired speedup cancels drift that both programs feel alike,
not drift that hits one harder (a two-threaded XLA program more than a one-threaded
interpret-mode kernel), so this spread bounds how stable one measurement can be here.

On the 2-vCPU development VM, with nothing else running: 10.7 % over 60 s (5-s windows
14.59-16.22 ms). This is a measuring tool, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import time


def measure(seconds: float, window: float, clock=time.perf_counter) -> dict:
    """Time the constant workload for ``seconds`` by ``clock``, in windows of ``window`` seconds."""
    import numpy as np  # here, so that main() can make BLAS single-threaded first

    a = np.random.default_rng(0).random((256, 256))
    t0 = clock()
    windows: dict[int, list[float]] = {}
    while (now := clock()) - t0 < seconds:
        x = a  # the constant workload: 20 small matrix products and tanh
        for _ in range(20):
            x = np.tanh(x @ a * 0.01)
        windows.setdefault(int((now - t0) // window), []).append((clock() - now) * 1e3)
    medians = [float(np.median(v)) for _, v in sorted(windows.items()) if v]
    mid = float(np.median(medians))
    return {"window_medians_ms": medians, "spread": (max(medians) - min(medians)) / mid, "runs": sum(map(len, windows.values()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--window", type=float, default=5.0)
    args = ap.parse_args(argv)
    r = measure(args.seconds, args.window)
    print(f"{r['runs']} runs; {args.window:g}-s window medians (ms): " + " ".join(f"{m:.2f}" for m in r["window_medians_ms"]))
    print(f"spread of the window medians: {r['spread'] * 100:.1f} %")
    return 0


if __name__ == "__main__":
    # One thread, set before numpy loads (importing this module elsewhere changes nothing).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    raise SystemExit(main())
