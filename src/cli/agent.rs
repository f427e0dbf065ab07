//! `jb agent`: run an agent method (best-of-N, iterative refinement, iterative refinement with
//! a context pack, beam search) over workloads, evaluate every sample like `jb eval`, and
//! account for it in the run database.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use crate::agent::accounting::{summarize, BenchmarkSummary, Outcome};
use crate::agent::backoff::Backoff;
use crate::agent::client::OpenAiClient;
use crate::agent::command_agent::CommandAgent;
use crate::agent::context::ContextPack;
use crate::agent::file_agent::FileAgent;
use crate::agent::hardware::{self, Device};
use crate::agent::methods::{self, Method, Plan, Sample};
use crate::agent::report::{AgentReport, BenchmarkDetail};
use crate::agent::store::{RunInfo, SampleRow, Store};
use crate::agent::{benchmark, table, Agent, Sampling};
use crate::engine::progress;
use crate::error::{exit, JbError};
use crate::exec::python::PythonExecutor;

use super::GlobalOpts;
use crate::agent::runner::EngineRunner;
use crate::eval::EvalSettings;
use crate::resolve;
use crate::session::{worker_spec, Python, Session};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MethodArg {
    /// N independent samples (`--samples`, default 144).
    BestOfN,
    /// Chains of turns that refine the previous kernel (`--chains 18 --turns 8`).
    Iterative,
    /// Iterative with the context pack (`context/`) in front of every prompt.
    IterativeCtx,
    /// Translate then optimise, keeping the best kernels (`--beam 3 --candidates 6
    /// --translate-iters 4 --optimize-iters 4`).
    Beam,
}

impl MethodArg {
    fn as_str(self) -> &'static str {
        match self {
            MethodArg::BestOfN => "best-of-n",
            MethodArg::Iterative => "iterative",
            MethodArg::IterativeCtx => "iterative-ctx",
            MethodArg::Beam => "beam",
        }
    }
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The method.
    #[arg(long, value_enum)]
    pub method: MethodArg,
    /// Workloads (folder names or ids such as `12p`); repeat or list several.
    #[arg(long = "workload", short = 'w', num_args = 1.., required = true)]
    pub workloads: Vec<String>,
    /// An OpenAI-compatible base URL, e.g. http://host:port/v1 (POST {URL}/chat/completions).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The model name sent to the endpoint (and part of every answer's cache key).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Environment variable holding the API key (default: OPENAI_API_KEY, if set). The key is
    /// never stored or hashed into keys.
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// An external agent instead: `sh -c CMD` reads the prompt on stdin, writes the answer.
    #[arg(long, value_name = "CMD", conflicts_with_all = ["endpoint", "answers_dir"])]
    pub agent_command: Option<String>,
    /// Recorded answers instead: DIR/<workload>/<tag>.md, the files of DIR/<workload>/ in turn,
    /// or DIR/<workload>.md (`.py` files are code).
    #[arg(long, value_name = "DIR", conflicts_with = "endpoint")]
    pub answers_dir: Option<PathBuf>,

    /// best-of-n: samples per workload [default: 144].
    #[arg(long)]
    pub samples: Option<usize>,
    /// iterative: independent chains [default: 18].
    #[arg(long)]
    pub chains: Option<usize>,
    /// iterative: turns per chain [default: 8].
    #[arg(long)]
    pub turns: Option<usize>,
    /// beam: beam width [default: 3].
    #[arg(long)]
    pub beam: Option<usize>,
    /// beam: candidates per beam element and iteration [default: 6].
    #[arg(long)]
    pub candidates: Option<usize>,
    /// beam: iterations of the translate phase [default: 4].
    #[arg(long)]
    pub translate_iters: Option<usize>,
    /// beam: iterations of the optimise phase [default: 4].
    #[arg(long)]
    pub optimize_iters: Option<usize>,

    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    #[arg(long, default_value_t = 16384)]
    pub max_tokens: u32,
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Send `seed` (this plus the sample's number) with every request.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Limit of one request (or one agent command), seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub request_timeout: f64,
    /// Retries of a request that got 429, 5xx or a timeout.
    #[arg(long, default_value_t = 6)]
    pub retries: u32,
    /// First retry delay in seconds (doubling each retry; `Retry-After` wins).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub backoff: f64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// The device the prompts describe (default: the one JAX finds): one of tpu-v5e, tpu-v6e,
    /// tpu-v5p, tpu, h100, h200, gpu, cpu.
    #[arg(long, value_name = "ID")]
    pub target: Option<String>,
    /// The context pack folder of iterative-ctx (default: `context/` of the project).
    #[arg(long, value_name = "DIR")]
    pub context: Option<PathBuf>,
    /// Name of the run (default: the method and a hash of its parameters).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,

    /// Evaluation: wall-clock limit per step in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub timeout: f64,
    /// Evaluation: memory limit of a candidate's worker in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 12000)]
    pub memory_mb: u64,
    /// Evaluation: accept candidates without a `pallas_call`.
    #[arg(long)]
    pub allow_pure_jax: bool,
    /// Evaluation: steps run in parallel.
    #[arg(long, short = 'j', default_value_t = 2)]
    pub jobs: usize,
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    JbError::Usage(msg.into()).into()
}

fn method_of(a: &AgentArgs) -> anyhow::Result<Method> {
    let only = |name: &str, set: bool, methods: &str| -> anyhow::Result<()> {
        if set {
            return Err(usage(format!(
                "--{name} applies to --method {methods}, not {}",
                a.method.as_str()
            )));
        }
        Ok(())
    };
    let iter_flags = a.chains.is_some() || a.turns.is_some();
    let beam_flags = a.beam.is_some()
        || a.candidates.is_some()
        || a.translate_iters.is_some()
        || a.optimize_iters.is_some();
    let m = match a.method {
        MethodArg::BestOfN => {
            only("chains/--turns", iter_flags, "iterative|iterative-ctx")?;
            only("beam/--candidates/--*-iters", beam_flags, "beam")?;
            Method::BestOfN {
                samples: a.samples.unwrap_or(144),
            }
        }
        MethodArg::Iterative | MethodArg::IterativeCtx => {
            only("samples", a.samples.is_some(), "best-of-n")?;
            only("beam/--candidates/--*-iters", beam_flags, "beam")?;
            Method::Iterative {
                chains: a.chains.unwrap_or(18),
                turns: a.turns.unwrap_or(8),
            }
        }
        MethodArg::Beam => {
            only("samples", a.samples.is_some(), "best-of-n")?;
            only("chains/--turns", iter_flags, "iterative|iterative-ctx")?;
            Method::Beam {
                beam: a.beam.unwrap_or(3),
                candidates: a.candidates.unwrap_or(6),
                translate_iters: a.translate_iters.unwrap_or(4),
                optimize_iters: a.optimize_iters.unwrap_or(4),
            }
        }
    };
    let positive = match &m {
        Method::BestOfN { samples } => *samples > 0,
        Method::Iterative { chains, turns } => *chains > 0 && *turns > 0,
        Method::Beam {
            beam,
            candidates,
            translate_iters,
            optimize_iters,
        } => *beam > 0 && *candidates > 0 && translate_iters + optimize_iters > 0,
    };
    if !positive {
        return Err(usage("the method's sample budget must be positive"));
    }
    Ok(m)
}

fn method_params(m: &Method) -> Value {
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

fn describe_method(name: &str, m: &Method) -> String {
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

fn build_agent(a: &AgentArgs, root: &std::path::Path) -> anyhow::Result<Arc<dyn Agent>> {
    let timeout = Duration::from_secs_f64(a.request_timeout.max(0.001));
    match (&a.endpoint, &a.agent_command, &a.answers_dir) {
        (Some(url), None, None) => {
            let model = a
                .model
                .as_deref()
                .ok_or_else(|| usage("--endpoint needs --model"))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(usage(format!(
                    "--endpoint {url}: expected an http:// or https:// base URL such as http://host:port/v1"
                )));
            }
            let key = match &a.api_key_env {
                Some(name) => Some(std::env::var(name).map_err(|_| {
                    usage(format!(
                        "--api-key-env {name}: the environment variable is not set"
                    ))
                })?),
                None => std::env::var("OPENAI_API_KEY").ok(),
            };
            let backoff = Backoff {
                retries: a.retries,
                base: Duration::from_secs_f64(a.backoff.max(0.0)),
                ..Backoff::default()
            };
            Ok(Arc::new(OpenAiClient::new(
                url, model, key, timeout, backoff,
            )?))
        }
        (None, Some(cmd), None) => Ok(Arc::new(CommandAgent::new(
            cmd,
            a.model.as_deref().unwrap_or("command"),
            timeout,
            root,
        ))),
        (None, None, Some(dir)) => {
            if !dir.is_dir() {
                return Err(usage(format!(
                    "--answers-dir {}: no such folder",
                    dir.display()
                )));
            }
            Ok(Arc::new(FileAgent::new(&crate::project::absolute(dir))))
        }
        _ => Err(usage(
            "name the agent: --endpoint URL --model M, --agent-command CMD, or --answers-dir DIR",
        )),
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
        candidate: s.code().map(crate::agent::runner::digest),
    }
}

pub fn run(global: &GlobalOpts, args: AgentArgs) -> anyhow::Result<i32> {
    let method = method_of(&args)?;
    let method_name = args.method.as_str();
    let project = crate::session::project(&global.session())?;
    let mut workloads = Vec::new();
    for w in &args.workloads {
        let name = resolve::workload(&project, w)?;
        if !workloads.contains(&name) {
            workloads.push(name);
        }
    }
    let agent = build_agent(&args, &project.root)?;
    let target: Option<&'static Device> = match &args.target {
        Some(t) => Some(hardware::by_id(t).ok_or_else(|| {
            usage(format!(
                "--target {t}: unknown; one of {}",
                hardware::ids().join(", ")
            ))
        })?),
        None => None,
    };
    let pack = if args.method == MethodArg::IterativeCtx {
        let dir = args
            .context
            .clone()
            .map(|d| crate::project::absolute(&d))
            .unwrap_or_else(|| project.root.join("context"));
        Some(ContextPack::load(&dir)?)
    } else {
        if args.context.is_some() {
            return Err(usage("--context applies to --method iterative-ctx"));
        }
        None
    };

    // The environment: backend, scale and device come from the session.
    let session = Session::open(&global.session(), Python::IfNeeded)?;
    // Refuse before any request is sent when candidates could not be run safely.
    crate::eval::require_sandbox(&session)?;
    let device = target
        .unwrap_or_else(|| hardware::from_fingerprint(&session.fingerprint, &session.backend));
    let worker_hash = session.key_context().worker_hash;
    let py = PythonExecutor::new(worker_spec(&session.project, &session.worker_env));
    let benches: Vec<_> = workloads
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
        .collect::<Result<_, _>>()?;
    py.close();
    let mut contexts = HashMap::new();
    if let Some(pack) = &pack {
        for w in &workloads {
            contexts.insert(w.clone(), pack.text_for(w, device.platform.as_str())?);
        }
    }
    let sampling = Sampling {
        temperature: args.temperature,
        max_tokens: args.max_tokens,
        top_p: args.top_p,
        seed: args.seed,
    };
    let params = json!({
        "method": method_params(&method),
        "budget": method.budget(),
        "sampling": sampling.to_json(),
        "target": device.id,
        "scale": session.scale,
        "backend": session.backend,
        "context": pack.as_ref().map(|p| p.dir.to_string_lossy().to_string()),
    });
    let run_name = match &args.run {
        Some(n) => n.clone(),
        None => {
            let h = blake3::hash(
                json!([method_name, params, agent.identity(), workloads])
                    .to_string()
                    .as_bytes(),
            );
            format!("{method_name}-{}", &h.to_hex()[..10])
        }
    };
    if run_name.is_empty() || run_name.contains(['/', '\\']) || run_name.starts_with('.') {
        return Err(usage(format!("--run {run_name}: not a usable name")));
    }
    let store = Store::open(&session.project.cache_dir)?;
    let run_id = store.start_run(&RunInfo {
        name: run_name.clone(),
        method: method_name.into(),
        agent: agent.identity(),
        params: params.clone(),
        workloads: workloads.clone(),
    })?;
    let title = format!(
        "{} — {} on {} at scale {} (run {run_name}, #{run_id})",
        describe_method(method_name, &method),
        agent.describe(),
        device.name,
        session.scale
    );
    eprintln!("jb agent: {title}");

    let mut runner = EngineRunner {
        opts: &global.session(),
        agent: agent.clone(),
        pipeline: format!("agent-{method_name}"),
        eval: EvalSettings {
            timeout: args.timeout,
            memory_mb: args.memory_mb,
            allow_pure_jax: args.allow_pure_jax,
            remeasure: false,
            measure_budget: None,
            handtuned: false,
            jobs: args.jobs,
            progress: progress::Mode::Quiet,
            seed: None,
        },
        parallel: args.parallel,
        device,
        project_root: session.project.root.clone(),
        cache_dir: session.project.cache_dir.clone(),
        run_dir: session
            .project
            .cache_dir
            .join("agent")
            .join("runs")
            .join(&run_name),
        cached_responses: 0,
    };
    let plan = Plan {
        device,
        benches: &benches,
        contexts,
        sampling,
    };
    // Every sample is stored as it finishes, so an aborted run keeps its accounting.
    let best: RefCell<HashMap<String, Option<f64>>> = RefCell::new(HashMap::new());
    let store_err: RefCell<Option<anyhow::Error>> = RefCell::new(None);
    let budget = method.budget();
    let mut on_sample = |s: &Sample| {
        let mut best = best.borrow_mut();
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
            "[{} {}/{budget} {}] {}{speed}; best {}{}",
            s.workload,
            s.number + 1,
            s.tag,
            s.outcome.as_str(),
            b.map(|x| format!("{x:.3}x")).unwrap_or_else(|| "-".into()),
            if s.translation.cached {
                " (cached answer)"
            } else {
                ""
            }
        );
        if let Err(e) = store.add_samples(run_id, &[row(s, *b)]) {
            store_err.borrow_mut().get_or_insert(e.into());
        }
    };
    let result = methods::run(&method, &plan, &mut runner, &mut on_sample);
    let cached = runner.cached_responses;
    let requests = agent.requests_sent();
    if let Some(e) = store_err.into_inner() {
        return Err(e);
    }
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
    if global.json {
        let rows = store.samples(run_id)?;
        let out = AgentReport {
            run_id,
            name: run_name,
            method: method_name.into(),
            params,
            agent: agent.identity(),
            budget,
            requests,
            cached_responses: cached,
            benchmarks: BenchmarkDetail::all(&summaries, &rows),
            summary,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table::render(&title, &summaries, &summary));
        println!(
            "requests sent {requests}, answers from the cache {cached}; stored as agent run #{run_id} in {}",
            session.project.cache_dir.join("jb.sqlite").display()
        );
    }
    Ok(exit::OK)
}
