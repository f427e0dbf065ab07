//! The statistics, in one place (the report, `jb agent`'s accounting and the pooled speedups of
//! `jb eval` use these): the median (numpy's: the mean of the two middle values of an even
//! count; python/jb/stats.py and this module are checked against the same cases in
//! python/tests/fixtures/stats/median_cases.json), the best-so-far curve, per-benchmark best speedup floored at 1x,
//! geomean and mean over all benchmarks, KernelBench's fast_p and fast1@N over a sample budget,
//! each of the last two both on point estimates (the paper's definition) and on the lower bound
//! of the speedup's 95 % interval (a kernel counts as faster than p only when its interval lies
//! above p). Intervals come from the paired measurement (bootstrap in python/jb/stats.py); this
//! module never resamples.

use serde::Serialize;

/// The thresholds of fast_p.
pub const FAST_P: [f64; 6] = [0.0, 0.5, 0.8, 1.0, 1.5, 2.0];

/// A speedup and, where it was measured paired, its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Speedup {
    pub point: f64,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

impl Speedup {
    pub fn point(point: f64) -> Speedup {
        Speedup {
            point,
            ci_low: None,
            ci_high: None,
        }
    }

    /// From a `{point, ci_low, ci_high}` object (the profile op's `speedup_vs_xla`).
    pub fn from_json(v: &serde_json::Value) -> Option<Speedup> {
        let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let point = f("point").filter(|p| p.is_finite() && *p > 0.0)?;
        let (lo, hi) = match (f("ci_low"), f("ci_high")) {
            (Some(lo), Some(hi)) if lo <= hi => (Some(lo), Some(hi)),
            _ => (None, None),
        };
        Some(Speedup {
            point,
            ci_low: lo,
            ci_high: hi,
        })
    }

    pub fn interval(&self) -> Option<(f64, f64)> {
        Some((self.ci_low?, self.ci_high?))
    }
}

/// The median: the middle value, or the mean of the two middle values of an even count
/// (non-finite values dropped; None for none).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The median with a distribution-free 95 % interval: the order statistics x(j) and x(n+1-j)
/// with j the largest rank such that P(Binomial(n, 1/2) < j) <= 2.5 % (coverage >= 95 % for any
/// continuous distribution). Used where rounds of several measurements are pooled on the Rust
/// side; a single measurement's interval is the profile op's bootstrap. Below 6 values the
/// interval is [min, max]. Returns (median, low, high).
pub fn median_interval(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let med = median(&v)?;
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // Cumulative binomial(n, 1/2) in log space: ln C(n, k) - n ln 2.
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_c = 0.0f64;
    let mut cdf = 0.0f64;
    // j: the largest k with P(X <= k) <= 2.5 % (the median lies below x(k+1) with that chance).
    let mut j = 0usize;
    for k in 0..n {
        cdf += (ln_c - ln2n).exp();
        if cdf > 0.025 {
            break;
        }
        j = k;
        ln_c += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    let j = j.min((n - 1) / 2);
    Some((med, v[j], v[n - 1 - j]))
}

/// One benchmark's samples in budget order: `Some(speedup)` for a correct, timed kernel,
/// `None` for anything else.
pub type Trajectory = Vec<Option<f64>>;

/// A trajectory with intervals: the lower bound of each correct kernel's interval (None for a
/// kernel measured without one, or anything not correct).
pub type LowerTrajectory = Vec<Option<f64>>;

/// The best speedup among the first `n` samples (all of them when `n` is None).
pub fn best(traj: &[Option<f64>], n: Option<usize>) -> Option<f64> {
    let take = n.unwrap_or(traj.len()).min(traj.len());
    traj[..take].iter().flatten().copied().reduce(f64::max)
}

/// The best speedup after each sample: the running maximum of a trajectory (`None` until a
/// sample has a speedup).
pub fn best_so_far(traj: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut best: Option<f64> = None;
    traj.iter()
        .map(|s| {
            if let Some(s) = s {
                best = Some(best.map_or(*s, |b: f64| b.max(*s)));
            }
            best
        })
        .collect()
}

/// A benchmark's best speedup with the floor of 1x (no correct kernel counts as 1x).
pub fn floored(best: Option<f64>) -> f64 {
    best.map_or(1.0, |b| b.max(1.0))
}

/// Geometric mean of the per-benchmark best speedups, each floored at 1x (a benchmark without a
/// correct kernel counts as 1x). None for no benchmarks.
pub fn geomean_floor1(best: &[Option<f64>]) -> Option<f64> {
    if best.is_empty() {
        return None;
    }
    let s: f64 = best.iter().map(|b| floored(*b).ln()).sum();
    Some((s / best.len() as f64).exp())
}

/// Arithmetic mean of the per-benchmark best speedups floored at 1x.
pub fn mean_floor1(best: &[Option<f64>]) -> Option<f64> {
    if best.is_empty() {
        return None;
    }
    Some(best.iter().map(|b| floored(*b)).sum::<f64>() / best.len() as f64)
}

/// Share of benchmarks whose best correct kernel is faster than `p` times XLA (speedup > p).
pub fn fast_p(best: &[Option<f64>], p: f64) -> Option<f64> {
    if best.is_empty() {
        return None;
    }
    Some(best.iter().filter(|b| b.is_some_and(|s| s > p)).count() as f64 / best.len() as f64)
}

/// fast1@N for N = 1..=max budget: the share of benchmarks whose best-so-far kernel after N
/// samples beats XLA. Benchmarks with fewer samples keep their final best.
pub fn fast1_at_n(trajs: &[Trajectory]) -> Vec<f64> {
    let max = trajs.iter().map(Vec::len).max().unwrap_or(0);
    (1..=max)
        .map(|n| {
            let bests: Vec<Option<f64>> = trajs.iter().map(|t| best(t, Some(n))).collect();
            fast_p(&bests, 1.0).unwrap_or(0.0)
        })
        .collect()
}

/// fast1@N counted on interval lower bounds: a benchmark counts after N samples when one of
/// its first N kernels has an interval entirely above 1x.
pub fn fast1_at_n_lower(lowers: &[LowerTrajectory]) -> Vec<f64> {
    fast1_at_n(lowers)
}

/// The geomean (floor 1x) of best-so-far speedups after N samples, N = 1..=max budget.
pub fn best_so_far_geomean(trajs: &[Trajectory]) -> Vec<f64> {
    let max = trajs.iter().map(Vec::len).max().unwrap_or(0);
    (1..=max)
        .map(|n| {
            let bests: Vec<Option<f64>> = trajs.iter().map(|t| best(t, Some(n))).collect();
            geomean_floor1(&bests).unwrap_or(1.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_and_fractions() {
        let b = [Some(4.0), Some(0.5), None, Some(1.0)];
        assert!((geomean_floor1(&b).unwrap() - 4f64.powf(0.25)).abs() < 1e-12);
        assert!((mean_floor1(&b).unwrap() - 7.0 / 4.0).abs() < 1e-12);
        assert_eq!(fast_p(&b, 0.0), Some(0.75));
        assert_eq!(fast_p(&b, 1.0), Some(0.25));
        let t = vec![
            vec![None, Some(1.5)],
            vec![Some(0.9)],
            vec![None, None, Some(2.0)],
        ];
        assert_eq!(fast1_at_n(&t), vec![0.0, 1.0 / 3.0, 2.0 / 3.0]);
        assert!(geomean_floor1(&[]).is_none());
    }

    #[test]
    fn median_of_even_counts_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[f64::NAN, 1.0]), Some(1.0));
        assert_eq!(median(&[]), None);
    }

    /// The cases python/tests/test_stats_agreement.py checks `jb.stats.median` with.
    #[test]
    fn median_agrees_with_the_python_side() {
        let text = include_str!("../python/tests/fixtures/stats/median_cases.json");
        let cases: serde_json::Value = serde_json::from_str(text).unwrap();
        for case in cases["median"].as_array().unwrap() {
            let values: Vec<f64> = case["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => s.parse::<f64>().unwrap(),
                    v => v.as_f64().unwrap(),
                })
                .collect();
            let got = median(&values);
            match case["median"].as_f64() {
                Some(want) => assert!((got.unwrap() - want).abs() < 1e-12, "{case}: {got:?}"),
                None => assert_eq!(got, None, "{case}"),
            }
        }
    }

    #[test]
    fn order_statistic_interval_covers_the_median() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let (m, lo, hi) = median_interval(&v).unwrap();
        assert_eq!(m, 50.5);
        // Binomial(100, 1/2): P(X <= 39) = 0.0176, P(X <= 40) = 0.0284: ranks 40 and 61.
        assert_eq!((lo, hi), (40.0, 61.0));
        let (_, lo, hi) = median_interval(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((lo, hi), (1.0, 3.0));
        assert!(median_interval(&[]).is_none());
    }

    #[test]
    fn interval_counts_are_stricter_than_point_counts() {
        // Point estimates above 1x, but one interval reaches below 1x.
        let points = [Some(1.2), Some(1.05), None];
        let lowers = [Some(1.1), Some(0.97), None];
        assert_eq!(fast_p(&points, 1.0), Some(2.0 / 3.0));
        assert_eq!(fast_p(&lowers, 1.0), Some(1.0 / 3.0));
        let t = vec![vec![Some(0.97), Some(1.1)], vec![None, Some(0.99)]];
        assert_eq!(fast1_at_n_lower(&t), vec![0.0, 0.5]);
        let s =
            Speedup::from_json(&serde_json::json!({"point": 1.2, "ci_low": 1.1, "ci_high": 1.3}))
                .unwrap();
        assert_eq!(s.interval(), Some((1.1, 1.3)));
        let bare = Speedup::from_json(&serde_json::json!({"point": 1.2, "ci_low": null})).unwrap();
        assert_eq!(bare.interval(), None);
        assert!(Speedup::from_json(&serde_json::json!({"point": null})).is_none());
    }
}
