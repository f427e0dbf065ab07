//! The result of evaluating one candidate: the `jb eval --json` contract, as types. Field
//! names and order are the contract's (tests and `python/jb/tools/eval_table.py` read them);
//! values the worker produced and jb only passes on stay JSON values.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::outcome::StepStatus;
use crate::report::paired::{Pooled, Slowed};

/// One candidate's evaluation (`jb eval --json`).
#[derive(Debug, Clone, Serialize)]
pub struct EvalResult {
    pub workload: String,
    /// `correct`, `incorrect`, `compile_error`, `runtime_error`, `timeout`, `crashed`,
    /// `rejected` (or the status of an export that failed).
    pub status: StepStatus,
    pub reasons: Vec<Value>,
    pub correctness: Correctness,
    /// The XLA baseline's timing.
    pub baseline: Option<Timing>,
    /// The candidate's timing (only when it is correct); the file is `kernel_path`.
    pub kernel: Option<Timing>,
    pub handtuned: Option<Timing>,
    pub handtuned_config: Option<HandtunedSource>,
    pub speedup_vs_xla: Option<f64>,
    pub speedup_ci: Option<[f64; 2]>,
    pub speedup_vs_handtuned: Option<f64>,
    pub speedup_vs_handtuned_ci: Option<[f64; 2]>,
    pub baseline_slowed_in_pair: PerRole<Option<Slowed>>,
    pub speedup_unpaired: Unpaired,
    /// How close the candidate is to the roofline bound (only when it is correct and a peak is known).
    pub speed_of_light: Option<SpeedOfLight>,
    pub measurement: Option<Measurement>,
    pub has_pallas_call: Option<Value>,
    pub interpret: Option<Value>,
    pub trust: Option<String>,
    /// Why a correct candidate has no timing and no speedup (its numbers came from a process
    /// that imported it: see [`crate::outcome::trust::unmeasured_reason`]); null otherwise.
    pub unmeasured: Option<String>,
    pub export: Option<StageDetail>,
    pub compile: Option<StageDetail>,
    pub verify: Option<StageDetail>,
    pub scale: String,
    pub backend: String,
    pub run_id: i64,
    pub kernel_path: PathBuf,
    /// Present (and true) only when the build was interrupted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl EvalResult {
    pub fn is_correct(&self) -> bool {
        self.status == StepStatus::Correct
    }
}

/// Where the hand-tuned configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandtunedSource {
    /// The best configuration `jb tune` found.
    Tuned,
    /// The search space's defaults.
    Default,
}

impl HandtunedSource {
    pub fn as_str(self) -> &'static str {
        match self {
            HandtunedSource::Tuned => "tuned",
            HandtunedSource::Default => "default",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Correctness {
    pub trials: Option<usize>,
    pub seed: Option<Value>,
    pub max_abs_err: Option<Value>,
    pub max_rel_err: Option<Value>,
    pub per_trial: Option<Value>,
    /// Held-out shape variants (jb.variants.summary): {status: judged | specialized |
    /// partly_specialized | none, judged: [{override, ok}], specialized: [{override, reason}]}.
    pub variants: Option<Value>,
}

/// A profile step's timing: its numbers when it succeeded, else why not.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Timing {
    Measured(Measured),
    Failed {
        status: StepStatus,
        reasons: Option<Value>,
        step: String,
    },
}

impl Timing {
    pub fn median_ms(&self) -> Option<f64> {
        match self {
            Timing::Measured(m) => m.median_ms,
            Timing::Failed { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub median_ms: Option<f64>,
    pub wall_median_ms: Option<f64>,
    pub samples: Option<usize>,
    pub tflops: Option<Value>,
    pub interpret: Option<Value>,
    pub step: String,
    pub key: String,
}

/// Something per paired role (`xla`, `handtuned`).
#[derive(Debug, Clone, Serialize)]
pub struct PerRole<T> {
    pub xla: T,
    pub handtuned: T,
}

/// The speed-of-light score and what it is computed from ([`crate::device::roofline::sol_score`]).
#[derive(Debug, Clone, Serialize)]
pub struct SpeedOfLight {
    /// 1 at the roofline bound, 0.5 at XLA's time; `None` with `why` when it cannot be given.
    pub score: Option<f64>,
    /// The roofline bound: max(FLOPs / peak FLOP/s, bytes / peak bandwidth).
    pub roofline_ms: f64,
    pub candidate_ms: f64,
    pub xla_ms: f64,
    /// `paired` (both medians of the interleaved measurement) or `separate` (each program's own step).
    pub times: &'static str,
    pub peak_source: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Ratios of separate measurements (the baseline's profile step over the candidate's).
#[derive(Debug, Clone, Serialize)]
pub struct Unpaired {
    pub vs_xla: Option<f64>,
    pub vs_handtuned: Option<f64>,
}

/// A paired speedup: the best estimate with its interval, this measurement's own, the pooled.
#[derive(Debug, Clone, Serialize)]
pub struct PairedSpeedup {
    pub speedup: Option<f64>,
    pub ci: Option<[f64; 2]>,
    pub this_measurement: Value,
    pub pooled: Option<Pooled>,
}

/// How the candidate's paired measurement went.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub rounds: Option<Value>,
    pub round_iters: Option<Value>,
    pub stop: Option<Value>,
    pub elapsed_s: Option<Value>,
    pub timing_source: Option<Value>,
    pub programs: Option<Vec<ProgramTiming>>,
    pub skipped: Option<Value>,
    pub vs_xla: Option<PairedSpeedup>,
    pub vs_handtuned: Option<PairedSpeedup>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgramTiming {
    pub role: Option<Value>,
    pub median_ms: Option<Value>,
    pub iqr_rel: Option<Value>,
    pub n: Option<Value>,
}

/// The fields of an export, compile or verify step that explain a failure.
#[derive(Debug, Clone, Serialize)]
pub struct StageDetail {
    pub status: StepStatus,
    pub cached: bool,
    /// The step result's named fields that are present and not null.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}
