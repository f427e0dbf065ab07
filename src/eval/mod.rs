//! Evaluating candidate kernels: compile, verify and profile one candidate file beside the XLA
//! baseline and the hand-tuned baseline, as one incremental build. [`evaluate`] (one file) is
//! `jb eval`; [`evaluate_batch`] (several, in one build) is also what `jb agent` evaluates its
//! samples with.

mod assemble;
mod plan;
mod result;
mod status;

use std::path::{Path, PathBuf};

pub use result::{
    Correctness, EvalResult, HandtunedSource, Measured, Measurement, PairedSpeedup, PerRole,
    ProgramTiming, StageDetail, Timing, Unpaired,
};

use crate::engine::{closure_in_order, progress, BuildOptions};
use crate::error::{JbError, Result};
use crate::exec::sandbox::{refusal, SandboxMode};
use crate::outcome::StepStatus;
use crate::project::absolute;
use crate::session::{self, Options, Python, Session};

/// The name of `jb eval`'s generated pipeline.
const EVAL: &str = "jb-eval";

/// How candidates are evaluated.
#[derive(Debug, Clone)]
pub struct EvalSettings {
    /// Per-step wall-clock limit, seconds.
    pub timeout: f64,
    pub memory_mb: u64,
    pub allow_pure_jax: bool,
    pub remeasure: bool,
    /// Time budget of the candidate's paired measurement, seconds (None: the profile op's default).
    pub measure_budget: Option<f64>,
    /// Also compile, verify and profile the hand-tuned baseline (where the workload has one).
    pub handtuned: bool,
    pub jobs: usize,
    pub progress: progress::Mode,
    /// The seed of the verify and profile inputs (replay); `None`: drawn in secret by the judge.
    pub seed: Option<u64>,
}

/// One candidate of a batch: its generated pipeline's name (unique in the batch), the
/// workload (folder name) and the kernel file.
#[derive(Debug, Clone)]
pub struct CandidateRef {
    pub pipeline: String,
    pub workload: String,
    pub kernel: PathBuf,
}

/// Refuse to evaluate candidates when the sandbox cannot start (unless `--no-sandbox`).
pub fn require_sandbox(session: &Session) -> Result<()> {
    match session.sandbox_mode() {
        SandboxMode::Unavailable(e) => Err(JbError::Worker(refusal(&e))),
        SandboxMode::On(_) | SandboxMode::Off => Ok(()),
    }
}

fn build_options(session: &Session, s: &EvalSettings) -> BuildOptions {
    BuildOptions {
        jobs: s.jobs.max(1),
        keep_going: true,
        remeasure: s.remeasure,
        timeout: None,
        // On a Ray cluster the judges hold the devices (one step per device at a time).
        exclusive_measurements: session.backend == "cpu" && session.ray.is_none(),
        devices: session.device_units().0,
        device_bound: session.device_units().1,
        progress: s.progress,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    }
}

/// Compile, verify and profile several candidates in one build (the XLA baselines they are
/// compared with included); one result per candidate, in order.
pub fn evaluate_batch(
    opts: &Options,
    cands: &[CandidateRef],
    s: &EvalSettings,
) -> Result<Vec<EvalResult>> {
    if cands.is_empty() {
        return Ok(Vec::new());
    }
    let kinds: std::cell::RefCell<Vec<Option<HandtunedSource>>> = Default::default();
    let session = Session::open_with(opts, Python::IfNeeded, |project, ctx| {
        let cache = crate::cache::Cache::open(&project.cache_dir)?;
        let mut out = Vec::new();
        kinds.borrow_mut().clear();
        for c in cands {
            let ht = if s.handtuned {
                plan::handtuned_config(project, &cache, &c.workload, &ctx.scale)
            } else {
                None
            };
            kinds.borrow_mut().push(ht.as_ref().map(|(_, k)| *k));
            let ht_config = ht.as_ref().map(|(v, _)| v);
            out.push(plan::pipeline(
                &c.pipeline,
                &c.workload,
                &c.kernel,
                s,
                ht_config,
            )?);
        }
        Ok(out)
    })?;
    require_sandbox(&session)?;
    let mut targets: Vec<String> = cands.iter().map(|c| c.pipeline.clone()).collect();
    for c in cands {
        let xla = format!("baseline/profile[workload={}]", c.workload);
        if session.set.steps.iter().any(|st| st.id == xla) && !targets.contains(&xla) {
            targets.push(xla);
        }
    }
    let selected = crate::graph::select(&session.set, &targets)?;
    let order = closure_in_order(&session.set, &selected);
    let engine = session.engine()?;
    let summary = engine.build(&session.set, &order, &build_options(&session, s))?;
    if let Some(e) = session.cluster_failure() {
        return Err(e);
    }
    // Keep every fresh paired measurement's rounds, so that re-measurements pool.
    let cache = session.cache().ok();
    let db = cache.as_ref().map(|c| &c.db);
    if let Some(db) = db {
        for c in cands {
            let id = format!("{}/profile[workload={}]", c.pipeline, c.workload);
            let fresh = assemble::find(&summary.steps, &id)
                .filter(|p| !p.cached && p.status == StepStatus::Ok);
            if let Some(p) = fresh {
                if let Err(e) =
                    crate::report::paired::record_rounds(db, &p.key, summary.run_id, &p.result)
                {
                    eprintln!("warning: could not keep the paired rounds of {id}: {e}");
                }
            }
        }
    }
    Ok(cands
        .iter()
        .zip(kinds.into_inner())
        .map(|(c, kind)| {
            let mut r = assemble::Assembly {
                steps: &summary.steps,
                pipeline: &c.pipeline,
                workload: &c.workload,
                kernel: &c.kernel,
                handtuned: kind,
                scale: &session.scale,
                backend: &session.backend,
                run_id: summary.run_id,
                db,
            }
            .result();
            r.interrupted = summary.interrupted;
            r
        })
        .collect())
}

/// Evaluate one candidate file for a workload (folder name or id): `jb eval`.
pub fn evaluate(
    opts: &Options,
    workload: &str,
    kernel: &Path,
    s: &EvalSettings,
) -> Result<EvalResult> {
    let kernel = absolute(kernel);
    if !kernel.is_file() {
        return Err(JbError::Usage(format!(
            "--kernel {}: no such file",
            kernel.display()
        )));
    }
    let project = session::project(opts)?;
    let wl_name = crate::resolve::workload(&project, workload)?;
    let mut out = evaluate_batch(
        opts,
        &[CandidateRef {
            pipeline: EVAL.into(),
            workload: wl_name,
            kernel,
        }],
        s,
    )?;
    Ok(out.remove(0))
}
