//! What most commands share: the project, its expanded pipelines, the environment and the engine.
//! Opened from plain [`Options`] (the command line's global options), so that library code
//! (`eval`, `agent`) opens sessions without the command line.

pub mod doctor;
mod options;
pub mod ray;

pub use options::{Backend, ExecutorKind, Options, Scale};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cache::Cache;
use crate::engine::{Engine, KeyContext};
use crate::error::Result;
use crate::exec::dispatch::{Dispatch, Handler};
use crate::exec::python::{venv_python, PythonExecutor, UntrustedPolicy, WorkerSpec};
use crate::exec::ray::RayExecutor;
use crate::exec::Executor;
use crate::pipeline::{self, ExpandContext, LoadedPipeline, PipelineSet};
use crate::project::Project;

pub struct Session {
    pub project: Arc<Project>,
    pub set: PipelineSet,
    pub scale: String,
    pub backend: String,
    pub fingerprint: BTreeMap<String, String>,
    pub worker_env: Vec<(String, String)>,
    /// The Ray executor when steps run on a cluster (`--executor ray`).
    pub ray: Option<Arc<RayExecutor>>,
    /// `--no-sandbox`: candidates run without the OS sandbox.
    pub no_sandbox: bool,
}

/// Whether a command may start Python to learn the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Python {
    /// Only if the pipelines have Python steps (build, explain, dry runs).
    IfNeeded,
    /// Never: use the cached fingerprint or defaults (list, graph).
    Never,
}

pub fn project(opts: &Options) -> Result<Project> {
    let cwd = std::env::current_dir().unwrap_or_default();
    Project::discover(
        &cwd,
        opts.project.as_deref(),
        opts.cache_dir.as_deref(),
        opts.pyenv.as_deref(),
    )
}

pub fn worker_env(opts: &Options) -> Vec<(String, String)> {
    match opts.backend {
        Some(Backend::Cpu) => vec![("JAX_PLATFORMS".into(), "cpu".into())],
        Some(Backend::Gpu) => vec![("JAX_PLATFORMS".into(), "cuda".into())],
        Some(Backend::Tpu) => vec![("JAX_PLATFORMS".into(), "tpu".into())],
        None => vec![],
    }
}

pub fn worker_spec(project: &Project, env: &[(String, String)]) -> WorkerSpec {
    WorkerSpec {
        python: venv_python(&project.pyenv_dir),
        python_dir: project.python_dir.clone(),
        cwd: project.root.clone(),
        env: env.to_vec(),
    }
}

fn variant(opts: &Options) -> &'static str {
    crate::pyenv::variant_for_backend(opts.backend.map(|b| b.as_str()))
}

/// Make sure the Python environment exists and return the fingerprint (cached when possible).
pub fn fingerprint(
    project: &Project,
    opts: &Options,
    env: &[(String, String)],
    may_start: bool,
) -> Result<Option<BTreeMap<String, String>>> {
    let variant = variant(opts);
    if let Some(pins) = crate::pyenv::ready(&project.pyenv_dir, &project.python_dir, variant)? {
        let probe = crate::fingerprint::probe(&pins, env);
        if let Some(fp) = crate::fingerprint::cached(&project.cache_dir, &probe) {
            return Ok(Some(fp));
        }
    }
    if !may_start {
        return Ok(None);
    }
    let pins = crate::pyenv::ensure(&project.pyenv, &project.python_dir, variant, false)?.id;
    let probe = crate::fingerprint::probe(&pins, env);
    std::fs::create_dir_all(&project.cache_dir)
        .map_err(|e| crate::error::JbError::io(&project.cache_dir, e))?;
    let py = PythonExecutor::new(worker_spec(project, env));
    let fp = crate::fingerprint::measure(&project.cache_dir, &probe, &py)?;
    py.close();
    Ok(Some(fp))
}

/// Results of candidate code run without the sandbox must not stand in for sandboxed ones (or
/// the reverse): such steps get their own keys.
fn mark_unsandboxed(set: &mut PipelineSet) {
    for s in set.steps.iter_mut().filter(|s| s.untrusted()) {
        s.salt = Some(match s.salt.take() {
            Some(salt) => format!("{salt}+unsandboxed"),
            None => "unsandboxed".into(),
        });
    }
}

fn has_python_steps(pipelines: &[LoadedPipeline]) -> bool {
    pipelines
        .iter()
        .any(|p| p.file.steps.values().any(|s| s.kind.uses_python()))
}

pub fn backend_of(opts: &Options, fp: &BTreeMap<String, String>) -> String {
    if let Some(b) = opts.backend {
        return b.as_str().to_string();
    }
    match fp.get("backend").map(String::as_str) {
        Some("gpu" | "cuda" | "rocm") => "gpu".into(),
        Some("tpu") => "tpu".into(),
        _ => "cpu".into(),
    }
}

pub fn scale_of(opts: &Options, backend: &str) -> String {
    match opts.scale {
        Some(s) => s.as_str().to_string(),
        None => pipeline::default_scale(backend).into(),
    }
}

impl Session {
    /// The error to exit with when the Ray cluster could not be reached during a build.
    pub fn cluster_failure(&self) -> Option<crate::error::JbError> {
        self.ray
            .as_ref()
            .and_then(|r| r.fatal())
            .map(crate::error::JbError::Cluster)
    }

    pub fn open(opts: &Options, python: Python) -> Result<Session> {
        Self::open_inner(opts, python, |_, _| Ok(Vec::new()), false)
    }

    /// Open with extra, generated pipelines (e.g. `jb eval`'s) expanded beside the project's.
    /// A project pipeline file that does not parse is skipped with a warning (the generated
    /// pipelines need none of its steps; one that needs a step of it fails to expand, naming the
    /// file): one broken YAML does not block the evaluation of an unrelated kernel.
    pub fn open_with(
        opts: &Options,
        python: Python,
        extra: impl Fn(&Project, &ExpandContext) -> Result<Vec<LoadedPipeline>>,
    ) -> Result<Session> {
        Self::open_inner(opts, python, extra, true)
    }

    fn open_inner(
        opts: &Options,
        python: Python,
        extra: impl Fn(&Project, &ExpandContext) -> Result<Vec<LoadedPipeline>>,
        skip_broken: bool,
    ) -> Result<Session> {
        let project = project(opts)?;
        let own = if skip_broken {
            let (own, broken) = pipeline::load_pipelines_skipping_broken(&project)?;
            for e in &broken {
                eprintln!("warning: skipped a pipeline file this command does not need: {e}");
            }
            own
        } else {
            pipeline::load_pipelines(&project)?
        };
        let env = worker_env(opts);
        let ray =
            ray::settings(opts, &project)?.map(|cfg| ray::executor(opts, &project, cfg, &env));
        let fingerprint = |may_start: bool| match &ray {
            Some(r) => ray::fingerprint(opts, &project, &env, r, may_start),
            None => fingerprint(&project, opts, &env, may_start),
        };
        // Validate everything before anything is written or started.
        let cached_fp = fingerprint(false)?;
        let provisional_backend = backend_of(opts, cached_fp.as_ref().unwrap_or(&BTreeMap::new()));
        let provisional = ExpandContext {
            scale: scale_of(opts, &provisional_backend),
            backend: provisional_backend,
        };
        // Generated pipelines may depend on the scale (the hand-tuned kernel's configuration).
        let with_extra = |ctx: &ExpandContext| -> Result<Vec<LoadedPipeline>> {
            let mut all = own.clone();
            all.extend(extra(&project, ctx)?);
            Ok(all)
        };
        let pipelines = with_extra(&provisional)?;
        let mut set = pipeline::expand(&project, pipelines.clone(), &provisional)?;
        let fp = match cached_fp {
            Some(fp) => fp,
            None if python == Python::IfNeeded && has_python_steps(&pipelines) => {
                fingerprint(true)?.unwrap_or_default()
            }
            None => BTreeMap::new(),
        };
        let backend = backend_of(opts, &fp);
        let scale = scale_of(opts, &backend);
        if scale != provisional.scale || backend != provisional.backend {
            let ctx = ExpandContext {
                scale: scale.clone(),
                backend: backend.clone(),
            };
            set = pipeline::expand(&project, with_extra(&ctx)?, &ctx)?;
        }
        if opts.no_sandbox {
            mark_unsandboxed(&mut set);
        }
        Ok(Session {
            project: Arc::new(project),
            set,
            scale,
            backend,
            fingerprint: fp,
            worker_env: env,
            ray,
            no_sandbox: opts.no_sandbox,
        })
    }

    /// How this session runs candidate code.
    pub fn untrusted_policy(&self) -> UntrustedPolicy {
        UntrustedPolicy {
            no_sandbox: self.no_sandbox,
            cache_dir: self.project.cache_dir.clone(),
            pyenv: self.project.pyenv_dir.clone(),
        }
    }

    /// How candidate code would run (probes the sandbox once).
    pub fn sandbox_mode(&self) -> crate::exec::sandbox::SandboxMode {
        crate::exec::sandbox::mode(
            self.no_sandbox,
            &self.project.root,
            &self.project.python_dir,
            &self.project.pyenv_dir,
            &self.project.cache_dir,
        )
    }

    pub fn cache(&self) -> Result<Arc<Cache>> {
        Ok(Arc::new(Cache::open(&self.project.cache_dir)?))
    }

    pub fn key_context(&self) -> KeyContext {
        KeyContext {
            fingerprint: self.fingerprint.clone(),
            worker_hash: crate::engine::keys::worker_source_hash(&self.project.python_dir),
            scale: self.scale.clone(),
            salt: std::env::var("JB_SALT").ok(),
            peak: self.device_peak(),
        }
    }

    /// The executor, with a handler for `translate` steps (`jb agent`).
    pub fn executor_with(&self, translate: Option<Handler>) -> Arc<dyn Executor> {
        if let Some(ray) = &self.ray {
            ray.set_translate(translate);
            return ray.clone();
        }
        let uses_python = self.set.steps.iter().any(|s| s.kind.uses_python());
        Arc::new(Dispatch {
            python: uses_python.then(|| {
                let mut py = PythonExecutor::new(worker_spec(&self.project, &self.worker_env))
                    .with_untrusted(self.untrusted_policy());
                py.devices =
                    crate::exec::devices::DeviceBinding::new(&self.backend, self.device_units().0)
                        .with_kind(self.fingerprint.get("device_kind").map(String::as_str));
                py
            }),
            translate,
        })
    }

    /// The `device` resource's capacity and whether steps that open the backend are bound to a
    /// device unit: on a Ray cluster the judges hold the devices (capacity unbounded here); on
    /// this machine one unit per device of the fingerprint, bound on an accelerator backend.
    pub fn device_units(&self) -> (u32, bool) {
        if self.ray.is_some() {
            return (u32::MAX / 2, false);
        }
        let count = self
            .fingerprint
            .get("device_count")
            .and_then(|d| d.parse().ok())
            .unwrap_or(1u32)
            .max(1);
        (count, matches!(self.backend.as_str(), "gpu" | "tpu"))
    }

    /// The roofline peak profile steps are judged against: the published figures of the
    /// fingerprint's device, else the peak `jb doctor` measured (`<cache>/peak.json`).
    pub fn device_peak(&self) -> Option<serde_json::Value> {
        let peak = self
            .fingerprint
            .get("device_kind")
            .and_then(|k| crate::report::peaks::published(k))
            .or_else(|| crate::report::cached_peak(&self.project.cache_dir))?;
        Some(serde_json::json!({
            "flops_per_s": peak.flops_per_s,
            "bytes_per_s": peak.bytes_per_s,
            "source": peak.source,
            "device": peak.device,
        }))
    }

    pub fn engine(&self) -> Result<Engine> {
        self.engine_with(None)
    }

    /// The engine, with a handler for `translate` steps.
    pub fn engine_with(&self, translate: Option<Handler>) -> Result<Engine> {
        Ok(Engine {
            project: self.project.clone(),
            cache: self.cache()?,
            executor: self.executor_with(translate),
            ctx: self.key_context(),
            backend: self.backend.clone(),
        })
    }
}
