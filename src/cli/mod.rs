//! The `jb` command line.

mod agent;
mod archive;
pub mod build;
mod cache_cmd;
mod describe_cache;
mod doctor;
mod doctor_ray;
pub mod eval;
mod eval_text;
mod explain;
mod list;
mod report;
mod setup;
mod tune;
mod workloads;

pub use workloads::list_workloads;

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::error::{exit, JbError};

#[derive(Debug, Parser)]
#[command(
    name = "jb",
    version,
    about = "Benchmark suite and build system for accelerator kernels",
    long_about = "jb runs YAML pipelines (pipelines/*.yaml) as an incremental, content-addressed DAG of steps: \
compile, verify and profile JAX/Pallas implementations of 50 workloads, grid-search hand-tuned \
baselines, evaluate candidate kernels and aggregate the results. Every result is cached by a hash \
of everything it depends on, so a rebuild only re-runs what changed.",
    after_help = "Examples:\n  jb build                      build every default pipeline (the XLA baseline of all workloads)\n  jb build 12p --dry-run        what would run for workload 12p, and why\n  jb eval --workload 12p --kernel my_rmsnorm.py\n  jb agent --method iterative --workload 12p 8p --endpoint http://localhost:8000/v1 --model M\n  jb report                     tables, plots and report.html of the results so far\n  jb archive create results.tar.zst\n  jb explain baseline/profile[workload=12p_RMSNorm]\n  jb list workloads --scale tiny\n\nExit codes: 0 success; 1 a step failed or a candidate is not correct; 2 bad usage or bad pipeline; 3 internal or infrastructure error."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,
    #[command(subcommand)]
    pub command: Cmd,
}

pub use crate::session::{Backend, ExecutorKind, Scale};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalOpts {
    /// Cache directory (blobs, run database, Python environment). Default: `cache/` of the project.
    #[arg(long, global = true, env = "JB_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Workload scale. Default: `cpu` on the CPU backend, `paper` on GPU/TPU.
    #[arg(long, global = true, value_enum)]
    pub scale: Option<Scale>,
    /// Backend for JAX. Default: what JAX finds.
    #[arg(long, global = true, value_enum)]
    pub backend: Option<Backend>,
    /// Machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Project root (default: the nearest folder upwards with `pipelines/`).
    #[arg(long, global = true, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Python environment folder (default: `<cache-dir>/pyenv`).
    #[arg(long, global = true, env = "JB_PYENV", value_name = "DIR")]
    pub pyenv: Option<PathBuf>,
    /// Where steps run: this machine, or a Ray cluster (docs/ray.md). Default: `executor` in
    /// the project's jb.yaml, else local.
    #[arg(long, global = true, env = "JB_EXECUTOR", value_enum)]
    pub executor: Option<ExecutorKind>,
    /// The Ray cluster for `--executor ray`: the head's `host:port`, `auto` or `ray://host:port`.
    /// Default: `ray.address` in jb.yaml.
    #[arg(long, global = true, env = "JB_RAY_ADDRESS", value_name = "ADDRESS")]
    pub ray_address: Option<String>,
    /// Run candidate code without the OS sandbox (bubblewrap). Unsafe with untrusted
    /// candidates; every result made that way says `"trust": "unsandboxed"`.
    #[arg(long, global = true)]
    pub no_sandbox: bool,
}

impl GlobalOpts {
    /// The options a library session is opened with.
    pub fn session(&self) -> crate::session::Options {
        crate::session::Options {
            cache_dir: self.cache_dir.clone(),
            scale: self.scale,
            backend: self.backend,
            project: self.project.clone(),
            pyenv: self.pyenv.clone(),
            executor: self.executor,
            ray_address: self.ray_address.clone(),
            no_sandbox: self.no_sandbox,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Build targets (default `all`): run what changed, reuse everything else from the cache.
    Build(build::BuildArgs),
    /// Evaluate one candidate kernel: compile, verify, profile beside XLA and the hand-tuned baseline.
    /// Exit 0 only when the candidate is correct.
    Eval(eval::EvalArgs),
    /// Explain why a step would run: the component of its key that changed.
    Explain(explain::ExplainArgs),
    /// List workloads, pipelines or steps.
    List(list::ListArgs),
    /// Print the step graph (dot or mermaid).
    Graph(list::GraphArgs),
    /// Grid-search the hand-tuned baselines' block sizes (pipelines/tune.yaml); the best
    /// configuration becomes the hand-tuned baseline of `jb eval` and the reports.
    Tune(tune::TuneArgs),
    /// Run an agent method (best-of-n, iterative, iterative-ctx, beam) on workloads: ask an
    /// OpenAI-compatible endpoint, a command or a folder of answers for Pallas kernels, evaluate
    /// every sample like `jb eval`, and account for the results (cached: a rerun sends no request
    /// it already made).
    Agent(Box<agent::AgentArgs>),
    /// Inspect or prune the cache.
    Cache(cache_cmd::CacheArgs),
    /// Create (or check) the Python environment from the pinned requirements.
    Setup(setup::SetupArgs),
    /// Print the environment fingerprint and the device's measured peaks.
    Doctor(doctor::DoctorArgs),
    /// Tables, plots and a self-contained html report of the run database (runs nothing).
    Report(report::ReportArgs),
    /// Create, verify or import a reproducible archive of the results.
    Archive(archive::ArchiveArgs),
}

/// Parse arguments, run, and return the process exit code.
pub fn main() -> i32 {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JB_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    // `jb --help` ends with the environment variables, from their one registry.
    let command = Cli::command().after_long_help(crate::settings::env_help());
    let parsed = command
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            return code;
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = e
                .downcast_ref::<JbError>()
                .map(JbError::exit_code)
                .unwrap_or(exit::INTERNAL);
            match rendered(&e) {
                Some(text) => eprint!("{text}"),
                None => eprintln!("error: {e:#}"),
            }
            code
        }
    }
}

/// A pipeline error as the diagnostics style asks (see [`crate::pipeline::diagnostic`]).
fn rendered(e: &anyhow::Error) -> Option<String> {
    use crate::pipeline::diagnostic::{render, Style};
    let err = e.downcast_ref::<JbError>()?.as_pipeline()?;
    let style = Style::from_env();
    if style == Style::Plain {
        return None;
    }
    let cwd = std::env::current_dir().ok()?;
    let root = crate::project::Project::discover(&cwd, None, None, None)
        .map(|p| p.root)
        .unwrap_or(cwd);
    Some(render(err, style, &root))
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Cmd::Build(a) => build::run(&cli.global, a),
        Cmd::Eval(a) => eval::run(&cli.global, a),
        Cmd::Explain(a) => explain::run(&cli.global, a),
        Cmd::List(a) => list::run_list(&cli.global, a),
        Cmd::Graph(a) => list::run_graph(&cli.global, a),
        Cmd::Tune(a) => tune::run(&cli.global, a),
        Cmd::Agent(a) => agent::run(&cli.global, *a),
        Cmd::Cache(a) => cache_cmd::run(&cli.global, a),
        Cmd::Setup(a) => setup::run(&cli.global, a),
        Cmd::Doctor(a) => doctor::run(&cli.global, a),
        Cmd::Report(a) => report::run(&cli.global, a),
        Cmd::Archive(a) => archive::run(&cli.global, a),
    }
}
