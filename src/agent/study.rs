//! One agent run (`jb agent`): open the session, load the benchmarks, run the method with every
//! sample evaluated like `jb eval` and stored as it finishes (an aborted run keeps its
//! accounting), and summarise. The command line only builds a [`StudyRequest`] and prints the
//! [`StudyOutcome`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::accounting::{summarize, BenchmarkSummary, MethodSummary, Outcome};
use super::context::ContextPack;
use super::hardware::{self, Device};
use super::methods::{self, Method, Plan, Sample};
use super::report::{AgentReport, BenchmarkDetail};
use super::runner::EngineRunner;
use super::store::{RunInfo, SampleRow, Store};
use super::{benchmark, Agent, Sampling};
use crate::engine::progress;
use crate::error::JbError;
use crate::eval::EvalSettings;
use crate::exec::python::PythonExecutor;
use crate::session::{worker_spec, Options, Python, Session};

/// What to run.
pub struct StudyRequest {
    pub method_name: String,
    pub method: Method,
    /// Resolved workload names, without repeats.
    pub workloads: Vec<String>,
    pub agent: Arc<dyn Agent>,
    /// The device the prompts describe; default: the session's.
    pub target: Option<&'static Device>,
    pub context: Option<ContextPack>,
    pub sampling: Sampling,
    /// The run's name; default: the method and a hash of everything that defines the run.
    pub run: Option<String>,
    /// How each sample is evaluated (`jb eval`'s settings).
    pub timeout: f64,
    pub memory_mb: u64,
    pub allow_pure_jax: bool,
    pub jobs: usize,
    /// Requests in flight at once.
    pub parallel: usize,
}

/// What came of it.
pub struct StudyOutcome {
    pub title: String,
    pub summaries: Vec<BenchmarkSummary>,
    pub summary: MethodSummary,
    pub report: AgentReport,
    /// The run database the run is stored in.
    pub database: std::path::PathBuf,
}

/// A run name is used as a folder name.
#[derive(Debug, thiserror::Error)]
#[error("--run {0}: not a usable name")]
pub struct BadRunName(pub String);

/// The method's parameters as stored with the run.
pub fn method_params(m: &Method) -> Value {
    match m {
        Method::BestOfN { samples } => json!({"samples": samples}),
        Method::Iterative { chains, turns } => json!({"chains": chains, "turns": turns}),
        Method::Beam {
            beam,
            candidates,
            translate_iters,
            optimize_iters,
        } => {
            json!({"beam": beam, "candidates": candidates, "translate_iters": translate_iters, "optimize_iters": optimize_iters})
        }
    }
}

/// One line saying what the method does.
pub fn describe_method(name: &str, m: &Method) -> String {
    match m {
        Method::BestOfN { samples } => format!("{name}: {samples} independent samples per benchmark"),
        Method::Iterative { chains, turns } => format!(
            "{name}: {chains} chains x {turns} turns = {} samples per benchmark",
            chains * turns
        ),
        Method::Beam {
            beam,
            candidates,
            translate_iters,
            optimize_iters,
        } => format!(
            "{name}: beam {beam} x {candidates} candidates, {translate_iters} translate + {optimize_iters} optimise iterations = {} samples per benchmark",
            m.budget()
        ),
    }
}

/// Run the study; progress lines go to stderr.
pub fn run(opts: &Options, req: StudyRequest) -> anyhow::Result<StudyOutcome> {
    let session = Session::open(opts, Python::IfNeeded)?;
    // Refuse before any request is sent when candidates could not be run safely.
    crate::eval::require_sandbox(&session)?;
    let device = req
        .target
        .unwrap_or_else(|| hardware::from_fingerprint(&session.fingerprint, &session.backend));
    let benches = load_benchmarks(&session, &req.workloads)?;
    let mut contexts = HashMap::new();
    if let Some(pack) = &req.context {
        for w in &req.workloads {
            contexts.insert(w.clone(), pack.text_for(w, device.platform.as_str())?);
        }
    }
    let params = json!({
        "method": method_params(&req.method),
        "budget": req.method.budget(),
        "sampling": req.sampling.to_json(),
        "target": device.id,
        "scale": session.scale,
        "backend": session.backend,
        "context": req.context.as_ref().map(|p| p.dir.to_string_lossy().to_string()),
    });
    let run_name = run_name(&req, &params)?;
    let store = Store::open(&session.project.cache_dir)?;
    let run_id = store.start_run(&RunInfo {
        name: run_name.clone(),
        method: req.method_name.clone(),
        agent: req.agent.identity(),
        params: params.clone(),
        workloads: req.workloads.clone(),
    })?;
    let title = format!(
        "{} — {} on {} at scale {} (run {run_name}, #{run_id})",
        describe_method(&req.method_name, &req.method),
        req.agent.describe(),
        device.name,
        session.scale
    );
    eprintln!("jb agent: {title}");
    let mut runner = engine_runner(opts, &req, &session, device, &run_name);
    let plan = Plan {
        device,
        benches: &benches,
        contexts,
        sampling: req.sampling.clone(),
    };
    let recorder = Recorder::new(&store, run_id, req.method.budget());
    let result = methods::run(&req.method, &plan, &mut runner, &mut |s: &Sample| {
        recorder.record(s)
    });
    let cached = runner.cached_responses;
    let requests = req.agent.requests_sent();
    recorder.into_result()?;
    let samples = match result {
        Ok(s) => s,
        Err(e) => {
            let status = if matches!(e.downcast_ref::<JbError>(), Some(JbError::Interrupted)) {
                "interrupted"
            } else {
                "aborted"
            };
            store.finish_run(run_id, status, requests, cached, &Value::Null, &Value::Null)?;
            eprintln!(
                "jb agent: {status} after {requests} requests ({cached} answers from the cache)"
            );
            return Err(e);
        }
    };
    let summaries: Vec<BenchmarkSummary> = samples
        .iter()
        .map(|(w, s)| {
            let pairs: Vec<(Outcome, Option<f64>)> =
                s.iter().map(|x| (x.outcome, x.speedup())).collect();
            BenchmarkSummary::new(w, &pairs)
        })
        .collect();
    let summary = summarize(&summaries);
    let summary_json = serde_json::to_value(&summary)?;
    let benches_json = serde_json::to_value(&summaries)?;
    store.finish_run(run_id, "ok", requests, cached, &summary_json, &benches_json)?;
    let rows = store.samples(run_id)?;
    let report = AgentReport {
        run_id,
        name: run_name,
        method: req.method_name.clone(),
        params,
        agent: req.agent.identity(),
        budget: req.method.budget(),
        requests,
        cached_responses: cached,
        benchmarks: BenchmarkDetail::all(&summaries, &rows),
        summary: summary.clone(),
    };
    Ok(StudyOutcome {
        title,
        summaries,
        summary,
        report,
        database: session.project.cache_dir.join("jb.sqlite"),
    })
}

fn load_benchmarks(
    session: &Session,
    workloads: &[String],
) -> anyhow::Result<Vec<super::prompt::Benchmark>> {
    let worker_hash = session.key_context().worker_hash;
    let py = PythonExecutor::new(worker_spec(&session.project, &session.worker_env));
    let benches = workloads
        .iter()
        .map(|w| {
            benchmark::load(
                &session.project.root,
                &session.project.cache_dir,
                w,
                &session.scale,
                &worker_hash,
                &py,
            )
        })
        .collect::<Result<_, _>>();
    py.close();
    Ok(benches?)
}

fn run_name(req: &StudyRequest, params: &Value) -> Result<String, BadRunName> {
    let name = match &req.run {
        Some(n) => n.clone(),
        None => {
            let h = blake3::hash(
                json!([req.method_name, params, req.agent.identity(), req.workloads])
                    .to_string()
                    .as_bytes(),
            );
            format!("{}-{}", req.method_name, &h.to_hex()[..10])
        }
    };
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(BadRunName(name));
    }
    Ok(name)
}

fn engine_runner<'a>(
    opts: &'a Options,
    req: &StudyRequest,
    session: &Session,
    device: &'static Device,
    run_name: &str,
) -> EngineRunner<'a> {
    EngineRunner {
        opts,
        agent: req.agent.clone(),
        pipeline: format!("agent-{}", req.method_name),
        eval: EvalSettings {
            timeout: req.timeout,
            memory_mb: req.memory_mb,
            allow_pure_jax: req.allow_pure_jax,
            remeasure: false,
            measure_budget: None,
            handtuned: false,
            jobs: req.jobs,
            progress: progress::Mode::Quiet,
            seed: None,
        },
        parallel: req.parallel,
        device,
        project_root: session.project.root.clone(),
        cache_dir: session.project.cache_dir.clone(),
        run_dir: session
            .project
            .cache_dir
            .join("agent")
            .join("runs")
            .join(run_name),
        cached_responses: 0,
    }
}

/// Stores every sample as it finishes, with the workload's best speedup so far, and prints a
/// progress line; the first storage error is kept for the end of the run.
struct Recorder<'a> {
    store: &'a Store,
    run_id: i64,
    budget: usize,
    best: RefCell<HashMap<String, Option<f64>>>,
    error: RefCell<Option<anyhow::Error>>,
}

impl<'a> Recorder<'a> {
    fn new(store: &'a Store, run_id: i64, budget: usize) -> Self {
        Recorder {
            store,
            run_id,
            budget,
            best: RefCell::new(HashMap::new()),
            error: RefCell::new(None),
        }
    }

    fn record(&self, s: &Sample) {
        let mut best = self.best.borrow_mut();
        let b = best.entry(s.workload.clone()).or_insert(None);
        if s.outcome.is_correct() {
            if let Some(x) = s.speedup() {
                *b = Some(b.map_or(x, |y: f64| y.max(x)));
            }
        }
        let speed = s
            .speedup()
            .filter(|_| s.outcome.is_correct())
            .map(|x| format!(" {x:.3}x"))
            .unwrap_or_default();
        eprintln!(
            "[{} {}/{} {}] {}{speed}; best {}{}",
            s.workload,
            s.number + 1,
            self.budget,
            s.tag,
            s.outcome.as_str(),
            b.map(|x| format!("{x:.3}x")).unwrap_or_else(|| "-".into()),
            if s.translation.cached {
                " (cached answer)"
            } else {
                ""
            }
        );
        if let Err(e) = self.store.add_samples(self.run_id, &[row(s, *b)]) {
            self.error.borrow_mut().get_or_insert(e.into());
        }
    }

    fn into_result(self) -> anyhow::Result<()> {
        match self.error.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// One stored row of a sample; `best` is the workload's best speedup after it.
fn row(s: &Sample, best: Option<f64>) -> SampleRow {
    SampleRow {
        workload: s.workload.clone(),
        number: s.number,
        tag: s.tag.clone(),
        chain: s.chain,
        step: s.step,
        phase: s.phase.as_str().into(),
        parent: s.parent,
        outcome: s.outcome.as_str().into(),
        eval_status: s.eval.as_ref().map(|e| e.status.clone()),
        speedup: s.speedup(),
        best_so_far: best,
        kernel_ms: s.eval.as_ref().and_then(|e| e.kernel_ms),
        xla_ms: s.eval.as_ref().and_then(|e| e.xla_ms),
        translate_key: s.translation.key.clone(),
        response_cached: s.translation.cached,
        candidate: s.code().map(super::runner::digest),
    }
}
