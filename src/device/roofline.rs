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

#[cfg(test)]
mod tests {
    use super::*;

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
