//! Accounting of a method's samples: the outcome of every sample, the best speedup so far after
//! each, and the method's summary — geomean of the per-benchmark best speedup with a floor of 1x
//! (a benchmark without a correct kernel counts as 1x), the mean of the same, the benchmarks
//! with a correct kernel, and fast1@N (the share of benchmarks whose best kernel so far beats
//! XLA after N samples each). The numbers come from [`crate::stats`], as the report's do.
//!
//! Only timings the judge took without ever importing the candidate (trust `artifact`, see
//! [`crate::outcome::trust::speedup_allowed`]) count: a correct sample timed in its own process
//! is [`Outcome::CorrectUnmeasured`], correct but never a speedup, in no geomean or fast1@N.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{self, Trajectory};

/// What became of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The agent gave no answer (an HTTP error the endpoint meant, a malformed answer, a failed
    /// command).
    ApiError,
    /// The answer had no ```python block.
    NoCode,
    /// The code did not import, trace or compile.
    CompileError,
    /// It compiled but failed while running (exception, timeout, crash).
    RuntimeError,
    /// It ran but the output is wrong, or it broke a harness rule (no `pallas_call`, tampering).
    Incorrect,
    /// The harness itself failed on it (not the candidate's fault; not cached, retried on rerun).
    EvalError,
    /// Correct, and not faster than XLA (or not timed).
    CorrectSlower,
    /// Correct and faster than XLA.
    CorrectFaster,
    /// Correct, but timed only where its own code ran (trust `sandboxed` or `unsandboxed`): no
    /// speedup counts for it.
    CorrectUnmeasured,
}

impl Outcome {
    pub const ALL: [Outcome; 9] = [
        Outcome::ApiError,
        Outcome::NoCode,
        Outcome::CompileError,
        Outcome::RuntimeError,
        Outcome::Incorrect,
        Outcome::EvalError,
        Outcome::CorrectSlower,
        Outcome::CorrectFaster,
        Outcome::CorrectUnmeasured,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::ApiError => "api_error",
            Outcome::NoCode => "no_code",
            Outcome::CompileError => "compile_error",
            Outcome::RuntimeError => "runtime_error",
            Outcome::Incorrect => "incorrect",
            Outcome::EvalError => "eval_error",
            Outcome::CorrectSlower => "correct_slower",
            Outcome::CorrectFaster => "correct_faster",
            Outcome::CorrectUnmeasured => "correct_unmeasured",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    pub fn is_correct(self) -> bool {
        matches!(
            self,
            Outcome::CorrectSlower | Outcome::CorrectFaster | Outcome::CorrectUnmeasured
        )
    }

    /// Whether the sample's speedup counts (correct and timed by a judge that never imported
    /// it).
    pub fn is_timed(self) -> bool {
        matches!(self, Outcome::CorrectSlower | Outcome::CorrectFaster)
    }

    /// Whether the sample produced code that was evaluated.
    pub fn has_code(self) -> bool {
        !matches!(self, Outcome::ApiError | Outcome::NoCode)
    }

    /// The class of an evaluated candidate from `jb eval`'s status, speedup and trust. That
    /// status is the worst of the candidate's stages, so a kernel rejected while profiled is
    /// `Incorrect` whatever speedup its timing showed; a correct one whose trust is not
    /// `artifact` is `CorrectUnmeasured` whatever speedup it claims.
    pub fn of_eval(status: &str, speedup: Option<f64>, trust: Option<&str>) -> Outcome {
        use crate::outcome::status::{OutcomeClass, StepStatus};
        match status.parse::<StepStatus>().map(StepStatus::outcome_class) {
            Ok(OutcomeClass::Correct) if status == "correct" => {
                if !crate::outcome::trust::speedup_allowed(trust) {
                    Outcome::CorrectUnmeasured
                } else if speedup.is_some_and(|s| s > 1.0) {
                    Outcome::CorrectFaster
                } else {
                    Outcome::CorrectSlower
                }
            }
            Ok(OutcomeClass::CompileError) => Outcome::CompileError,
            Ok(OutcomeClass::RuntimeError) => Outcome::RuntimeError,
            Ok(OutcomeClass::Incorrect) => Outcome::Incorrect,
            _ => Outcome::EvalError,
        }
    }
}

/// The speedups of a benchmark's samples in budget order: `Some` for a correct sample timed
/// where the candidate never ran (a `CorrectUnmeasured` sample's number is dropped here too).
pub fn trajectory(samples: &[(Outcome, Option<f64>)]) -> Trajectory {
    samples
        .iter()
        .map(|(o, s)| if o.is_timed() { *s } else { None })
        .collect()
}

/// The best speedup after each sample (`None` until a sample is correct and timed).
pub fn best_so_far(samples: &[(Outcome, Option<f64>)]) -> Vec<Option<f64>> {
    stats::best_so_far(&trajectory(samples))
}

/// One benchmark's samples, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkSummary {
    pub workload: String,
    pub samples: usize,
    /// Outcome name -> count (every outcome listed, zeros included).
    pub outcomes: BTreeMap<String, usize>,
    pub correct: bool,
    /// The best speedup of a correct sample (may be below 1).
    pub best_speedup: Option<f64>,
    /// `best_speedup` with the floor of 1x.
    pub floored_speedup: f64,
    /// Best speedup after sample 1, 2, ...
    pub best_so_far: Vec<Option<f64>>,
}

impl BenchmarkSummary {
    pub fn new(workload: &str, samples: &[(Outcome, Option<f64>)]) -> Self {
        let mut outcomes: BTreeMap<String, usize> = Outcome::ALL
            .iter()
            .map(|o| (o.as_str().to_string(), 0))
            .collect();
        for (o, _) in samples {
            *outcomes.entry(o.as_str().to_string()).or_default() += 1;
        }
        let curve = best_so_far(samples);
        let best = curve.last().copied().flatten();
        BenchmarkSummary {
            workload: workload.to_string(),
            samples: samples.len(),
            outcomes,
            correct: samples.iter().any(|(o, _)| o.is_correct()),
            best_speedup: best,
            floored_speedup: stats::floored(best),
            best_so_far: curve,
        }
    }

    /// Whether the best kernel after `n` samples (all of them when fewer) beats XLA.
    pub fn fast_after(&self, n: usize) -> bool {
        stats::best(&self.best_so_far, Some(n)).is_some_and(|s| s > 1.0)
    }
}

/// A method's summary over its benchmarks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodSummary {
    pub benchmarks: usize,
    pub samples: usize,
    /// Geomean of the per-benchmark best speedup, floor 1x.
    pub geomean_speedup: f64,
    /// Arithmetic mean of the same.
    pub mean_speedup: f64,
    /// Benchmarks with at least one correct sample.
    pub correct: usize,
    /// Benchmarks whose best kernel beats XLA (fast1 at the full budget).
    pub faster: usize,
    /// fast1@N for N = 1, 2, ... up to the largest number of samples of a benchmark.
    pub fast1: Vec<f64>,
    pub outcomes: BTreeMap<String, usize>,
}

pub fn summarize(benches: &[BenchmarkSummary]) -> MethodSummary {
    let bests: Vec<Option<f64>> = benches.iter().map(|b| b.best_speedup).collect();
    let curves: Vec<Trajectory> = benches.iter().map(|b| b.best_so_far.clone()).collect();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for b in benches {
        for (k, v) in &b.outcomes {
            *outcomes.entry(k.clone()).or_default() += v;
        }
    }
    MethodSummary {
        benchmarks: benches.len(),
        samples: benches.iter().map(|b| b.samples).sum(),
        geomean_speedup: stats::geomean_floor1(&bests).unwrap_or(1.0),
        mean_speedup: stats::mean_floor1(&bests).unwrap_or(1.0),
        correct: benches.iter().filter(|b| b.correct).count(),
        faster: benches.iter().filter(|b| b.fast_after(b.samples)).count(),
        fast1: stats::fast1_at_n(&curves),
        outcomes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    #[test]
    fn outcome_classes_of_eval_statuses() {
        let a = Some("artifact");
        assert_eq!(Outcome::of_eval("correct", Some(1.2), a), CorrectFaster);
        assert_eq!(Outcome::of_eval("correct", Some(1.0), a), CorrectSlower);
        assert_eq!(Outcome::of_eval("correct", None, a), CorrectSlower);
        assert_eq!(Outcome::of_eval("compile_error", None, a), CompileError);
        assert_eq!(Outcome::of_eval("timeout", None, a), RuntimeError);
        assert_eq!(Outcome::of_eval("rejected", None, a), Incorrect);
        assert_eq!(Outcome::of_eval("rejected", Some(45.7), a), Incorrect);
        assert_eq!(Outcome::of_eval("incorrect", Some(2.0), a), Incorrect);
        assert_eq!(Outcome::of_eval("error", None, a), EvalError);
        // Timed in the candidate's own process: correct, never faster.
        for t in [Some("sandboxed"), Some("unsandboxed"), None] {
            assert_eq!(Outcome::of_eval("correct", Some(7.3), t), CorrectUnmeasured);
        }
        assert_eq!(
            Outcome::of_eval("incorrect", Some(7.3), Some("sandboxed")),
            Incorrect
        );
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
    }

    #[test]
    fn best_so_far_counts_only_correct_timed_samples() {
        let s = [
            (NoCode, None),
            (Incorrect, Some(9.0)),
            (CorrectSlower, Some(0.5)),
            (CorrectFaster, Some(1.5)),
            (CorrectSlower, Some(0.9)),
        ];
        assert_eq!(
            best_so_far(&s),
            [None, None, Some(0.5), Some(1.5), Some(1.5)]
        );
    }

    #[test]
    fn geomean_with_floor_and_fast1_curve() {
        let a = BenchmarkSummary::new("a", &[(CompileError, None), (CorrectFaster, Some(4.0))]);
        let b = BenchmarkSummary::new("b", &[(CorrectSlower, Some(0.5)), (Incorrect, None)]);
        let c = BenchmarkSummary::new("c", &[(ApiError, None), (NoCode, None)]);
        let d = BenchmarkSummary::new("d", &[(CorrectFaster, Some(2.0)), (NoCode, None)]);
        assert_eq!(b.floored_speedup, 1.0);
        assert_eq!(b.best_speedup, Some(0.5));
        assert!(!c.correct && c.best_speedup.is_none());
        let m = summarize(&[a, b, c, d]);
        // floors: 4, 1, 1, 2 -> geomean 8^(1/4), mean 2
        assert!((m.geomean_speedup - 8f64.powf(0.25)).abs() < 1e-12);
        assert!((m.mean_speedup - 2.0).abs() < 1e-12);
        assert_eq!(m.correct, 3);
        assert_eq!(m.faster, 2);
        assert_eq!(m.fast1, vec![0.25, 0.5]);
        assert_eq!(m.samples, 8);
        assert_eq!(m.outcomes["no_code"], 2);
        assert_eq!(m.outcomes["correct_faster"], 2);
        assert_eq!(m.outcomes["eval_error"], 0);
    }

    #[test]
    fn fast1_uses_the_final_best_for_shorter_benchmarks() {
        let a = BenchmarkSummary::new("a", &[(CorrectFaster, Some(1.1))]);
        let b = BenchmarkSummary::new(
            "b",
            &[(NoCode, None), (NoCode, None), (CorrectFaster, Some(3.0))],
        );
        let m = summarize(&[a, b]);
        assert_eq!(m.fast1, vec![0.5, 0.5, 1.0]);
    }

    /// The gc.callbacks attack's 7.3x (trust sandboxed): counted correct, never in the geomean,
    /// the best speedup or fast1@N, even if a speedup number reached the sample.
    #[test]
    fn unmeasured_samples_count_correct_but_never_faster() {
        let forged = Outcome::of_eval("correct", Some(7.3), Some("sandboxed"));
        let a = BenchmarkSummary::new("a", &[(forged, Some(7.3))]);
        let b = BenchmarkSummary::new("b", &[(CorrectFaster, Some(2.0))]);
        assert!(a.correct);
        assert_eq!(a.best_speedup, None);
        assert_eq!(a.floored_speedup, 1.0);
        assert!(!a.fast_after(1));
        let m = summarize(&[a, b]);
        assert!((m.geomean_speedup - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(m.correct, 2);
        assert_eq!(m.faster, 1);
        assert_eq!(m.fast1, vec![0.5]);
        assert_eq!(m.outcomes["correct_unmeasured"], 1);
        assert_eq!(m.outcomes["correct_faster"], 1);
    }

    #[test]
    fn empty_is_neutral() {
        let m = summarize(&[]);
        assert_eq!(m.geomean_speedup, 1.0);
        assert_eq!(m.mean_speedup, 1.0);
        assert!(m.fast1.is_empty());
    }
}
