//! `jb agent`: run an agent method (best-of-N, iterative refinement, iterative refinement with
//! a context pack, beam search) over workloads, evaluate every sample like `jb eval`, and
//! account for it in the run database.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::agent::backoff::Backoff;
use crate::agent::client::OpenAiClient;
use crate::agent::command_agent::CommandAgent;
use crate::agent::context::ContextPack;
use crate::agent::file_agent::FileAgent;
use crate::agent::hardware::{self, Device};
use crate::agent::methods::Method;
use crate::agent::study::{self, StudyRequest};
use crate::agent::{table, Agent, Sampling};
use crate::error::{exit, JbError};

use super::GlobalOpts;
use crate::resolve;

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

    let outcome = study::run(
        &global.session(),
        StudyRequest {
            method_name: method_name.into(),
            method,
            workloads,
            agent,
            target,
            context: pack,
            sampling: Sampling {
                temperature: args.temperature,
                max_tokens: args.max_tokens,
                top_p: args.top_p,
                seed: args.seed,
            },
            run: args.run.clone(),
            timeout: args.timeout,
            memory_mb: args.memory_mb,
            allow_pure_jax: args.allow_pure_jax,
            jobs: args.jobs,
            parallel: args.parallel,
        },
    )
    .map_err(|e| match e.downcast::<study::BadRunName>() {
        Ok(bad) => usage(bad.to_string()),
        Err(e) => e,
    })?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&outcome.report)?);
    } else {
        print!(
            "{}",
            table::render(&outcome.title, &outcome.summaries, &outcome.summary)
        );
        let r = &outcome.report;
        println!(
            "requests sent {}, answers from the cache {}; stored as agent run #{} in {}",
            r.requests,
            r.cached_responses,
            r.run_id,
            outcome.database.display()
        );
    }
    Ok(exit::OK)
}
