//! Achieved throughput against a device's peak: the one place TFLOP/s and utilisation are
//! computed (the profile worker reports FLOPs and times; `jb eval`, the agent's feedback and
//! the report derive these from them).

/// FLOP/s of a program doing `flops` in `ms` milliseconds (`None` unless the time is positive
/// and both are finite).
pub fn flops_per_s(flops: f64, ms: f64) -> Option<f64> {
    (ms > 0.0 && flops.is_finite() && ms.is_finite()).then(|| flops / (ms / 1e3))
}

/// Achieved TFLOP/s.
pub fn tflops(flops: f64, ms: f64) -> Option<f64> {
    flops_per_s(flops, ms).map(|f| f / 1e12)
}

/// The fraction of a peak FLOP/s achieved.
pub fn utilisation(flops: f64, ms: f64, peak_flops_per_s: f64) -> Option<f64> {
    (peak_flops_per_s > 0.0)
        .then(|| flops_per_s(flops, ms).map(|f| f / peak_flops_per_s))
        .flatten()
}

/// The speed-of-light score (as SOL-ExecBench defines it): `1 / (1 + (t - t_sol) / (t_base - t_sol))`
/// for a kernel taking `t_ms` where the roofline bound is `t_sol_ms` and the baseline (XLA) takes
/// `t_base_ms`: 1 at the bound, 0.5 at the baseline's time, towards 0 as it gets slower. `None`
/// when a time is not positive or the baseline is not slower than the bound (the peak is then
/// wrong for this device: a measured CPU peak below what XLA reaches).
pub fn sol_score(t_ms: f64, t_sol_ms: f64, t_base_ms: f64) -> Option<f64> {
    let finite = t_ms.is_finite() && t_sol_ms.is_finite() && t_base_ms.is_finite();
    (finite && t_ms > 0.0 && t_sol_ms > 0.0 && t_base_ms > t_sol_ms)
        .then(|| 1.0 / (1.0 + (t_ms - t_sol_ms) / (t_base_ms - t_sol_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_of_light_score() {
        assert_eq!(sol_score(1.0, 1.0, 3.0), Some(1.0));
        assert_eq!(sol_score(3.0, 1.0, 3.0), Some(0.5));
        let slow = sol_score(21.0, 1.0, 3.0).unwrap();
        assert!((slow - 1.0 / 11.0).abs() < 1e-12, "{slow}");
        // Below the bound: above 1 (the roofline guard judges that).
        assert!(sol_score(0.5, 1.0, 3.0).unwrap() > 1.0);
        assert_eq!(sol_score(2.0, 1.0, 0.9), None);
        assert_eq!(sol_score(2.0, 0.0, 3.0), None);
        assert_eq!(sol_score(f64::NAN, 1.0, 3.0), None);
    }

    #[test]
    fn throughput() {
        assert_eq!(tflops(2e12, 1000.0), Some(2.0));
        assert_eq!(tflops(2e9, 1.0), Some(2.0));
        assert_eq!(utilisation(1e12, 1000.0, 4e12), Some(0.25));
        assert_eq!(tflops(0.0, 1.0), Some(0.0));
        assert_eq!(tflops(1.0, 0.0), None);
        assert_eq!(utilisation(1.0, 1.0, 0.0), None);
    }
}
