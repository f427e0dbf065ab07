"""Statistics of paired measurements: per-round ratios, their median and a bootstrap 95 % interval.

A paired measurement times several programs in alternating rounds (jb.ops.profile). For a pair
(base, candidate) each round gives one ratio ``t_base / t_candidate`` (a speedup); the speedup is
the median of the per-round ratios and its uncertainty a percentile bootstrap interval of that
median: rounds are resampled with replacement ``n_boot`` times, the median of each resample taken,
and the 2.5th and 97.5th percentiles of those medians are the interval. Rounds are the unit of
resampling because the two sides of a round share the machine's state (clock, load, caches), which
is what pairing is for.

The generator is seeded (``seed``), so the interval of a given list of rounds is reproducible.
numpy only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

CONFIDENCE = 0.95
N_BOOT = 2000


@dataclasses.dataclass
class Interval:
    point: float | None
    ci_low: float | None
    ci_high: float | None
    n: int

    @property
    def half_width(self) -> float | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0

    @property
    def relative_half_width(self) -> float | None:
        """Half the interval's width over the point estimate (None when undefined)."""
        hw = self.half_width
        if hw is None or not self.point:
            return None
        return hw / abs(self.point)

    def as_dict(self) -> dict:
        return {"point": self.point, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


def median(values) -> float | None:
    arr = np.asarray(list(values), dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    return float(np.median(arr)) if arr.size else None


def bootstrap_median(values, n_boot: int = N_BOOT, confidence: float = CONFIDENCE, seed: int = 0) -> Interval:
    """Median of ``values`` with a percentile-bootstrap interval (non-finite values dropped).

    One value gives a degenerate interval [v, v]; none gives all None.
    """
    arr = np.asarray(list(values), dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    n = int(arr.size)
    if n == 0:
        return Interval(None, None, None, 0)
    point = float(np.median(arr))
    if n == 1:
        return Interval(point, point, point, 1)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    meds = np.median(arr[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(meds, [alpha, 1.0 - alpha])
    return Interval(point, float(lo), float(hi), n)


def round_ratios(base_rounds, cand_rounds) -> list[float]:
    """Per-round speedups ``base / candidate`` (rounds where either side is missing or zero dropped)."""
    out = []
    for b, c in zip(base_rounds, cand_rounds):
        if b is None or c is None or not np.isfinite(b) or not np.isfinite(c) or c <= 0 or b <= 0:
            continue
        out.append(float(b) / float(c))
    return out


def converged(intervals, target: float) -> bool:
    """True when every interval's half-width is at most ``target`` times its point estimate."""
    for iv in intervals:
        rel = iv.relative_half_width
        if rel is None or rel > target:
            return False
    return True


def spread(values) -> float | None:
    """(max - min) / median: the run-to-run spread of repeated measurements."""
    arr = np.asarray(list(values), dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return None
    med = float(np.median(arr))
    return float((arr.max() - arr.min()) / med) if med else None


def summary(samples) -> dict:
    """Median, spread and the usual moments of one program's per-iteration times (ms)."""
    arr = np.asarray(list(samples), dtype=np.float64)
    if arr.size == 0:
        return {"median_ms": None, "mean_ms": None, "std_ms": None, "min_ms": None, "max_ms": None,
                "p10_ms": None, "p90_ms": None, "iqr_rel": None, "n": 0}
    q10, q25, q50, q75, q90 = np.percentile(arr, [10, 25, 50, 75, 90])
    return {
        "median_ms": float(q50),
        "mean_ms": float(arr.mean()),
        "std_ms": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "min_ms": float(arr.min()),
        "max_ms": float(arr.max()),
        "p10_ms": float(q10),
        "p90_ms": float(q90),
        # Interquartile range over the median: the spread of this program's samples.
        "iqr_rel": float((q75 - q25) / q50) if q50 else None,
        "n": int(arr.size),
    }
