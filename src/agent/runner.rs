//! The [`Runner`] of `jb agent`: translate steps run by the build engine (answers cached as
//! action records), candidates evaluated by `jb eval`'s batch evaluation (compile, verify and
//! profile steps, cached and incremental). Candidates are stored by content under
//! `<cache>/agent/kernels/<workload>/k_<digest>.py`; every sample's prompt, answer and code are
//! also written under `<cache>/agent/runs/<run>/<workload>/<tag>/` for reading.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::feedback::{evaluation, Evaluation};
use crate::agent::hardware::Device;
use crate::agent::methods::{Answer, Runner, Translation};
use crate::agent::translate::{self, TranslateJob};
use crate::agent::Agent;
use crate::engine::{closure_in_order, BuildOptions};
use crate::error::JbError;
use crate::pipeline::generated_pipeline;

use crate::eval::{evaluate_batch, CandidateRef, EvalSettings};
use crate::session::{Options, Python, Session};

pub struct EngineRunner<'a> {
    pub opts: &'a Options,
    pub agent: Arc<dyn Agent>,
    /// Name of the generated translate pipeline (`agent-<method>`).
    pub pipeline: String,
    pub eval: EvalSettings,
    /// Requests in flight at once.
    pub parallel: usize,
    pub device: &'static Device,
    pub project_root: PathBuf,
    pub cache_dir: PathBuf,
    pub run_dir: PathBuf,
    /// Answers that came from the cache so far.
    pub cached_responses: u64,
}

/// The error that stops a run because the agent cannot answer (exit code 3).
#[derive(Debug, thiserror::Error)]
#[error("{0} (answers received so far are cached; run the same command again to resume)")]
pub struct AgentAborted(pub String);

pub fn digest(code: &str) -> String {
    blake3::hash(code.as_bytes()).to_hex().to_string()
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| JbError::io(parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| JbError::io(path, e))?;
    Ok(())
}

impl EngineRunner<'_> {
    fn rel(&self, path: &Path) -> String {
        path.strip_prefix(&self.project_root)
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .unwrap_or_else(|_| path.to_string_lossy().to_string())
    }

    /// The content-addressed path of a candidate (written once).
    fn kernel_file(&self, workload: &str, code: &str) -> anyhow::Result<(PathBuf, String)> {
        let d = digest(code);
        let path = self
            .cache_dir
            .join("agent")
            .join("kernels")
            .join(workload)
            .join(format!("k_{}.py", &d[..16]));
        let same = std::fs::read(&path).is_ok_and(|b| b == code.as_bytes());
        if !same {
            let tmp = path.with_extension(format!("py.{}.tmp", std::process::id()));
            write_file(&tmp, code)?;
            std::fs::rename(&tmp, &path).map_err(|e| JbError::io(&path, e))?;
        }
        Ok((path, d))
    }
}

impl Runner for EngineRunner<'_> {
    fn translate(&mut self, jobs: &[TranslateJob]) -> anyhow::Result<Vec<Translation>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let spec = translate::pipeline_spec(&self.pipeline, jobs, self.agent.as_ref());
        let loaded = generated_pipeline("jb agent", spec)?;
        let session =
            Session::open_with(self.opts, Python::IfNeeded, |_, _| Ok(vec![loaded.clone()]))?;
        let by_step: HashMap<String, TranslateJob> = jobs
            .iter()
            .map(|j| (translate::step_name(&j.workload, &j.tag), j.clone()))
            .collect();
        let engine = session.engine_with(Some(translate::handler(
            self.agent.clone(),
            Arc::new(by_step),
        )))?;
        let selected = crate::graph::select(&session.set, std::slice::from_ref(&self.pipeline))?;
        let order = closure_in_order(&session.set, &selected);
        let opts = BuildOptions {
            jobs: self.parallel.max(1),
            command: format!("jb agent ({} translate steps)", jobs.len()),
            ..BuildOptions::default()
        };
        let summary = engine.build(&session.set, &order, &opts)?;
        let results = translate::collect(&self.pipeline, jobs, &summary.steps, &engine.cache.cas);
        if let Some(t) = results.iter().find(|t| t.status == "error") {
            return Err(
                AgentAborted(t.error.clone().unwrap_or_else(|| "the agent failed".into())).into(),
            );
        }
        if summary.interrupted || results.iter().any(|t| t.status == "cancelled") {
            return Err(JbError::Interrupted.into());
        }
        if let Some(t) = results.iter().find(|t| t.status == "not_run") {
            return Err(AgentAborted(t.error.clone().unwrap_or_default()).into());
        }
        let mut out = Vec::with_capacity(jobs.len());
        for (job, t) in jobs.iter().zip(results) {
            let dir = self.run_dir.join(&job.workload).join(&job.tag);
            write_file(&dir.join("prompt.md"), &job.prompt.text())?;
            let answer = match (t.status.as_str(), t.code) {
                ("ok", Some(code)) => {
                    write_file(&dir.join("candidate.py"), &code)?;
                    Answer::Code(code)
                }
                ("no_code", _) => Answer::NoCode,
                (_, _) => Answer::ApiError(t.error.unwrap_or_else(|| t.status.clone())),
            };
            if t.cached {
                self.cached_responses += 1;
            }
            out.push(Translation {
                answer,
                key: t.key,
                cached: t.cached,
            });
        }
        Ok(out)
    }

    fn evaluate(&mut self, candidates: &[(String, String)]) -> anyhow::Result<Vec<Evaluation>> {
        // One evaluation per distinct (workload, code).
        let mut unique: Vec<CandidateRef> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        let mut which = Vec::with_capacity(candidates.len());
        for (workload, code) in candidates {
            let (path, d) = self.kernel_file(workload, code)?;
            let i = *index
                .entry((workload.clone(), d.clone()))
                .or_insert_with(|| {
                    let id = workload.split('_').next().unwrap_or(workload);
                    unique.push(CandidateRef {
                        pipeline: format!("agent-{id}-{}", &d[..12]),
                        workload: workload.clone(),
                        kernel: PathBuf::from(self.rel(&path)),
                    });
                    unique.len() - 1
                });
            which.push(i);
        }
        let results = evaluate_batch(self.opts, &unique, &self.eval)?;
        if results.iter().any(|r| r.interrupted) {
            return Err(JbError::Interrupted.into());
        }
        let evals = results
            .iter()
            .map(|r| Ok(evaluation(&serde_json::to_value(r)?, self.device)))
            .collect::<serde_json::Result<Vec<Evaluation>>>()?;
        Ok(which.into_iter().map(|i| evals[i].clone()).collect())
    }
}
