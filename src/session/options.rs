//! What a session is opened with: the global options of the command line, as plain values.

use std::path::PathBuf;

/// Workload scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    Tiny,
    Cpu,
    Paper,
}

impl Scale {
    pub fn as_str(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny",
            Scale::Cpu => "cpu",
            Scale::Paper => "paper",
        }
    }
}

/// Backend for JAX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Cpu,
    Gpu,
    Tpu,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
            Backend::Tpu => "tpu",
        }
    }
}

/// Where steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecutorKind {
    /// Worker processes on this machine.
    Local,
    /// The nodes of a Ray cluster (docs/ray.md).
    Ray,
}

/// How to find the project and its environment, and where its steps run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Cache directory; default `cache/` of the project.
    pub cache_dir: Option<PathBuf>,
    /// Workload scale; default: [`crate::pipeline::default_scale`] of the backend.
    pub scale: Option<Scale>,
    /// Backend for JAX; default: what JAX finds.
    pub backend: Option<Backend>,
    /// Project root; default: the nearest folder upwards with `pipelines/`.
    pub project: Option<PathBuf>,
    /// Python environment folder; default `<cache-dir>/pyenv`.
    pub pyenv: Option<PathBuf>,
    /// Where steps run; default: `executor` in jb.yaml, else local.
    pub executor: Option<ExecutorKind>,
    /// The Ray cluster's address for `--executor ray`.
    pub ray_address: Option<String>,
    /// Run candidate code without the OS sandbox.
    pub no_sandbox: bool,
}
