//! The paper's aggregate statistics: per-benchmark best speedup floored at 1x, geomean and mean
//! over all benchmarks, KernelBench's fast_p, and fast1@N over a sample budget.

/// The thresholds of fast_p.
pub const FAST_P: [f64; 6] = [0.0, 0.5, 0.8, 1.0, 1.5, 2.0];

/// One benchmark's samples in budget order: `Some(speedup)` for a correct, timed kernel,
/// `None` for anything else.
pub type Trajectory = Vec<Option<f64>>;

/// The best speedup among the first `n` samples (all of them when `n` is None).
pub fn best(traj: &[Option<f64>], n: Option<usize>) -> Option<f64> {
    let take = n.unwrap_or(traj.len()).min(traj.len());
    traj[..take].iter().flatten().copied().reduce(f64::max)
}

/// Geometric mean of the per-benchmark best speedups, each floored at 1x (a benchmark without a
/// correct kernel counts as 1x). None for no benchmarks.
pub fn geomean_floor1(best: &[Option<f64>]) -> Option<f64> {
    if best.is_empty() {
        return None;
    }
    let s: f64 = best.iter().map(|b| b.unwrap_or(1.0).max(1.0).ln()).sum();
    Some((s / best.len() as f64).exp())
}

/// Arithmetic mean of the per-benchmark best speedups floored at 1x.
pub fn mean_floor1(best: &[Option<f64>]) -> Option<f64> {
    if best.is_empty() {
        return None;
    }
    Some(best.iter().map(|b| b.unwrap_or(1.0).max(1.0)).sum::<f64>() / best.len() as f64)
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
}
