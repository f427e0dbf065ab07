//! Kernel-generation methods (best-of-N, iterative refinement, beam search, ... and the plain
//! candidate files of the `eval` pipeline): their samples per benchmark, in the order they were
//! drawn. A [`MethodSource`] fills [`MethodData`] from the run database or from upstream results;
//! the report's method comparison (the paper's table 2), fast_p and fast1@N are computed from
//! whatever sources return, and say so when none has data.

use std::collections::BTreeMap;

use serde::Serialize;

use super::records::RecordSet;
use super::ReportError;
use crate::cache::Cache;
use crate::stats::Speedup;

/// The paper's per-sample outcome classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Compile or API error, or no code.
    CompileError,
    /// Runtime error, timeout or crash.
    RuntimeError,
    /// Ran, but the output is wrong (or the kernel was caught gaming the harness).
    WrongOutput,
    Correct,
    /// Not evaluated (skipped, unsupported, invalid).
    NotEvaluated,
}

impl Outcome {
    pub fn from_status(status: &str) -> Outcome {
        use crate::outcome::status::{OutcomeClass, StepStatus};
        match status.parse::<StepStatus>().map(StepStatus::outcome_class) {
            Ok(OutcomeClass::Correct) => Outcome::Correct,
            Ok(OutcomeClass::Incorrect) => Outcome::WrongOutput,
            Ok(OutcomeClass::CompileError) => Outcome::CompileError,
            Ok(OutcomeClass::RuntimeError) => Outcome::RuntimeError,
            // Agent-level statuses (no code came back).
            Err(_) if matches!(status, "translate_error" | "api_error") => Outcome::CompileError,
            Ok(OutcomeClass::EvalError) | Err(_) => Outcome::NotEvaluated,
        }
    }
}

/// One sample (one generated kernel) of a method for one benchmark.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MethodSample {
    /// Position in the method's budget for this benchmark, from 1.
    pub index: usize,
    /// The kernel's status (`correct`, `incorrect`, `compile_error`, ...).
    pub status: String,
    pub outcome: Outcome,
    /// Median device time of a correct kernel.
    pub median_ms: Option<f64>,
    /// Speedup over XLA as the source computed it; the report recomputes it from the XLA
    /// baseline record where it has one.
    pub speedup: Option<f64>,
    /// The speedups measured paired with XLA and with the hand-tuned kernel (same process,
    /// interleaved rounds), with their 95 % intervals: preferred over a ratio of separate
    /// measurements wherever present.
    pub paired_xla: Option<Speedup>,
    pub paired_handtuned: Option<Speedup>,
    /// A label (candidate file, chain/turn) for tables.
    pub label: String,
    /// The step and run-database key of the record the timing (or the status) came from.
    pub step: Option<String>,
    pub key: Option<String>,
    pub interpret: bool,
    /// The weakest `trust` of its compile, verify and profile records (`artifact`: the judge
    /// ran the exported program; `sandboxed`/`unsandboxed`: the candidate's own process did).
    pub trust: Option<String>,
    /// Why a correct sample has no time and no speedup (it was timed where its own code ran:
    /// [`crate::outcome::trust::unmeasured_reason`]).
    pub unmeasured: Option<String>,
}

/// Everything one method produced, by benchmark (workload folder name).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MethodData {
    pub name: String,
    pub description: String,
    pub samples: BTreeMap<String, Vec<MethodSample>>,
}

/// Where method results come from. Implementations read the run database (`cache`, when the
/// report is built by `jb report`) or only the records at hand (`records`; the `aggregate` step
/// passes no cache). A source with nothing to report returns an empty list.
pub trait MethodSource {
    fn load(
        &self,
        records: &RecordSet,
        cache: Option<&Cache>,
    ) -> Result<Vec<MethodData>, ReportError>;
}

/// The candidate files of the `eval` pipeline (`candidates/<workload>/<name>.py`), as one method
/// whose samples are the files in name order.
pub struct CandidateFiles;

/// The status of one candidate from its compile, verify and profile records: the first step
/// that did not pass decides.
pub fn candidate_sample(
    records: &RecordSet,
    pipeline: &str,
    workload: &str,
    extra: &[(&str, &str)],
    label: String,
    index: usize,
) -> Option<MethodSample> {
    let export = records.find(pipeline, "export", workload, extra);
    let compile = records.find(pipeline, "compile", workload, extra);
    let verify = records.find(pipeline, "verify", workload, extra);
    let profile = records.find(pipeline, "profile", workload, extra);
    let judged: Vec<Option<&serde_json::Value>> = [compile, verify, profile]
        .iter()
        .map(|r| r.map(|r| &r.result))
        .collect();
    let trust = crate::outcome::trust::derive(export.map(|e| &e.result), &judged);
    // An export that failed (rejected, compile_error) decides: nothing after it was judged.
    if let Some(e) = export.filter(|e| !matches!(e.status.as_str(), "ok" | "not_exportable")) {
        return Some(MethodSample {
            index,
            status: e.status.clone(),
            outcome: Outcome::from_status(&e.status),
            median_ms: None,
            speedup: None,
            paired_xla: None,
            paired_handtuned: None,
            label,
            step: Some(e.step_id.clone()),
            key: Some(e.key.clone()),
            interpret: false,
            trust,
            unmeasured: None,
        });
    }
    let first = compile.or(verify).or(profile)?;
    let mut sample = MethodSample {
        index,
        status: first.status.clone(),
        outcome: Outcome::NotEvaluated,
        median_ms: None,
        speedup: None,
        paired_xla: None,
        paired_handtuned: None,
        label,
        step: Some(first.step_id.clone()),
        key: Some(first.key.clone()),
        interpret: compile.is_some_and(|c| c.interpret()),
        trust,
        unmeasured: None,
    };
    let failed = [compile, verify]
        .into_iter()
        .flatten()
        .find(|r| !matches!(r.status.as_str(), "ok" | "correct"));
    if let Some(r) = failed {
        sample.status = r.status.clone();
        sample.step = Some(r.step_id.clone());
        sample.key = Some(r.key.clone());
    } else if let Some(v) = verify {
        sample.status = v.status.clone();
        sample.step = Some(v.step_id.clone());
        sample.key = Some(v.key.clone());
        match profile {
            Some(p)
                if p.status == "ok"
                    && !crate::outcome::trust::speedup_allowed(sample.trust.as_deref()) =>
            {
                // Timed where its own code ran: correct, but no time and no speedup count.
                sample.unmeasured =
                    crate::outcome::trust::unmeasured_reason(sample.trust.as_deref());
                sample.step = Some(p.step_id.clone());
                sample.key = Some(p.key.clone());
                sample.interpret |= p.interpret();
            }
            Some(p) if p.status == "ok" => {
                sample.median_ms = p.f64("median_ms");
                sample.paired_xla = p.result.get("speedup_vs_xla").and_then(Speedup::from_json);
                sample.paired_handtuned = p
                    .result
                    .get("speedup_vs_handtuned")
                    .and_then(Speedup::from_json);
                sample.step = Some(p.step_id.clone());
                sample.key = Some(p.key.clone());
                sample.interpret |= p.interpret();
            }
            Some(p) => {
                // Correct but not measured: a runtime failure under the profiler.
                sample.status = p.status.clone();
                sample.step = Some(p.step_id.clone());
                sample.key = Some(p.key.clone());
            }
            None => sample.status = "not measured".into(),
        }
    }
    sample.outcome = match sample.status.as_str() {
        "not measured" => Outcome::NotEvaluated,
        s => Outcome::from_status(s),
    };
    Some(sample)
}

impl MethodSource for CandidateFiles {
    fn load(
        &self,
        records: &RecordSet,
        _cache: Option<&Cache>,
    ) -> Result<Vec<MethodData>, ReportError> {
        let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (s, _) in records.iter() {
            if s.pipeline != "eval" || s.vars.len() != 2 {
                continue;
            }
            if let (Some(w), Some(c)) = (s.vars.get("workload"), s.vars.get("candidate")) {
                names.entry(w.clone()).or_default().push(c.clone());
            }
        }
        let mut data = MethodData {
            name: "candidates".into(),
            description: "candidate files under candidates/<workload>/ (the eval pipeline), one sample per file in name order".into(),
            samples: BTreeMap::new(),
        };
        for (w, mut cands) in names {
            cands.sort();
            cands.dedup();
            let samples: Vec<MethodSample> = cands
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    candidate_sample(records, "eval", &w, &[("candidate", c)], c.clone(), i + 1)
                })
                .collect();
            if !samples.is_empty() {
                data.samples.insert(w, samples);
            }
        }
        Ok(if data.samples.is_empty() {
            Vec::new()
        } else {
            vec![data]
        })
    }
}

/// The sources every report consults, in the order their methods are listed: the candidate
/// files, the kernels `jb eval` judged, then the agent studies of the run database.
pub fn default_sources() -> Vec<Box<dyn MethodSource>> {
    sources_at(None)
}

/// The same sources, reading only results of one scale where given.
pub fn sources_at(scale: Option<&str>) -> Vec<Box<dyn MethodSource>> {
    vec![
        Box::new(CandidateFiles),
        Box::new(super::eval_runs::EvalRuns {
            scale: scale.map(str::to_string),
        }),
        Box::new(super::agent_runs::AgentRuns),
    ]
}

/// Methods from every source, in source order.
pub fn load_all(
    sources: &[Box<dyn MethodSource>],
    records: &RecordSet,
    cache: Option<&Cache>,
) -> Result<Vec<MethodData>, ReportError> {
    let mut out = Vec::new();
    for s in sources {
        out.extend(s.load(records, cache)?);
    }
    Ok(out)
}
